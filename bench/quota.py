"""The benchmarks measure the collector's orchestration, not the tenant's daily Graph quota: they lift it on both
sides (the emulator counts no submissions, the collector's tenant budget keeps no daily allowance), so a run that
submits thousands of Graph queries on one emulator, or one host, measures what it did before the quota was kept.
``tests/e2e/test_graph_quota.py`` shows the quota itself.
"""

from __future__ import annotations

from m365_emulator import EmulatorConfig

NO_DAILY_QUOTA = {"COLLECTOR_GRAPH_DAILY_QUERIES": "1000000", "COLLECTOR_GRAPH_DAILY_RESERVE": "0"}
"""Collector settings: an allowance no benchmark reaches (an app that predates the quota ignores them)."""


def lift(config: EmulatorConfig) -> EmulatorConfig:
    """The emulator without its daily submission quota."""
    config.graph.daily_submission_quota = 0
    return config
