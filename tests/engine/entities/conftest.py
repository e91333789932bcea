"""The runtime tests' fixtures (manual clock, memory store, fast settings, a control queue) for entity tests."""

from __future__ import annotations

from tests.engine.runtime.conftest import clock, queues, settings, store

__all__ = ["clock", "queues", "settings", "store"]
