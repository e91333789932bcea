"""Session-wide fixtures. Area-specific fixtures live in each test folder's own conftest.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.support.azurite import Azurite, run_azurite

# CI decides whether a change lands, so there the property tests draw the same examples every run (a failure is a
# defect in the change, not a new draw); a developer's run keeps exploring, and a case it finds becomes an @example.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


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
