"""Session-wide fixtures. Area-specific fixtures live in each test folder's own conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.azurite import Azurite, run_azurite


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """A running Azurite blob service on a free loopback port. Fails (never skips) when it is missing."""
    try:
        with run_azurite() as running:
            yield running
    except RuntimeError as exc:  # missing install or failed start: say how to fix it
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def azurite_connection_string(azurite: Azurite) -> str:
    return azurite.connection_string
