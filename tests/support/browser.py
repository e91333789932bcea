"""Headless Chromium for the page tests and the page bench: Debian's ``chromium`` package, driven by Playwright.

Playwright's wheel carries its driver, not a browser; the browser is the system one (``executable_path``), installed
by ``scripts/bootstrap.sh`` (``apt-get install chromium chromium-driver``), never downloaded. Each launch gets a
fresh profile folder and flags that keep the browser from reaching out (updates, sync, QUIC, background fetches).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("COLLECTOR_CHROMIUM", "/usr/bin/chromium"))
INSTALL_HINT = (
    f"Chromium is not installed at {CHROMIUM}. Install Debian's package: "
    "`sudo apt-get update && sudo apt-get install -y chromium chromium-driver` "
    "(or run `bash scripts/bootstrap.sh` as root), or point COLLECTOR_CHROMIUM at a Chromium binary."
)
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1100, "height": 900}


def missing() -> str | None:
    """Why a browser cannot be launched here (with the command that fixes it), or None."""
    if not CHROMIUM.exists():
        return INSTALL_HINT
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "The playwright package is missing: run `bash scripts/bootstrap.sh` (requirements-dev.txt)."
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A browser context on a fresh profile; closed (and the profile deleted) on exit."""
    problem = missing()
    if problem:
        raise RuntimeError(problem)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=ARGS, viewport=VIEWPORT
        )
        try:
            yield context
        finally:
            context.close()


# The grid's colours (http_api/static/live.css), as the canvas stores them.
COLOURS = {
    "d": (0, 158, 115),
    "r": (0, 114, 178),
    "b": (230, 159, 0),
    "f": (213, 94, 0),
    "i": (204, 121, 167),
    "p": (228, 231, 235),
}

# Reads one cell's colour off the canvas, near its top-left corner (away from the shape drawn in its middle).
CELL_PIXEL_JS = """(i) => {
  const c = document.getElementById("grid");
  const size = Number(c.dataset.cellSize), cols = Number(c.dataset.cols), dpr = window.devicePixelRatio || 1;
  const x = (i % cols) * size + 2, y = Math.floor(i / cols) * size + 2;
  const d = c.getContext("2d").getImageData(Math.round(x * dpr), Math.round(y * dpr), 1, 1).data;
  return [d[0], d[1], d[2]];
}"""
