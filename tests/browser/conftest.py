"""A headless Chromium (Debian's package, driven by Playwright) shared by this folder's tests.

The tests fail, never skip, when the browser is missing: the message says how to install it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import make_emulator  # noqa: F401  (the emulator factory of the e2e tests)
from tests.support import browser


@pytest.fixture(scope="module")
def chromium_context() -> Iterator[Any]:
    problem = browser.missing()
    if problem:
        pytest.fail(problem, pytrace=False)
    with browser.chromium() as context:
        yield context


@pytest.fixture
def page(chromium_context: Any) -> Iterator[Any]:
    """A tab that fails the test on any script error or console error (a CSP violation shows up as one)."""
    tab = chromium_context.new_page()
    problems: list[str] = []
    tab.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    tab.on("console", lambda message: problems.append(f"console: {message.text}") if message.type == "error" else None)
    yield tab
    tab.close()
    assert not problems, problems
