"""Session-wide fixtures. Area-specific fixtures live in each test folder's own conftest.py."""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.azurite import Azurite, run_azurite

# CI decides whether a change lands, so there the property tests draw the same examples every run (a failure is a
# defect in the change, not a new draw); a developer's run keeps exploring, and a case it finds becomes an @example.
# Neither times an example (Hypothesis's per-example deadline and its "too slow" health check are wall-clock
# assertions: on a loaded machine, or beside the parallel workers of scripts/test.sh, they failed correct code).
untimed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", untimed)
settings.register_profile("ci", untimed, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """The local host's loader, run in-process (``LocalHost``), leaves the app it loaded as ``sys.modules
    ["function_app"]``; a later ``import function_app`` in the same process (the replay tests) would get that app, its
    functions already indexed, instead of importing this repository's. Each test (with the module fixtures it sets up)
    leaves the name as it found it, so tests pass in any order: parallel workers run them in another order than a
    serial run."""
    before = sys.modules.get("function_app")
    try:
        return (yield)
    finally:
        if before is None:
            sys.modules.pop("function_app", None)
        else:
            sys.modules["function_app"] = before


# Under pytest-xdist (scripts/test.sh) the folders whose tests serve a host or an emulator for seconds each go out
# first, so the last minutes are filled with quick tests instead of waiting on a long one started late. Every worker
# collects the same list and sorts it the same way (xdist requires it); a serial run keeps the files' order.
HEAVY_FIRST = ("e2e", "bench", "local_run", "host", "doctor", "browser", "emulator", "audit")
TESTS = Path(__file__).resolve().parent


def _weight(item: pytest.Item) -> int:
    parts = item.path.relative_to(TESTS).parts
    return HEAVY_FIRST.index(parts[0]) if len(parts) > 1 and parts[0] in HEAVY_FIRST else len(HEAVY_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_weight)  # stable: each folder keeps its own order
