"""The benchmarks measure the collector's orchestration, not the tenant's daily Graph quota: they lift it on both
sides (the emulator counts no submissions, the collector's tenant budget keeps no daily allowance), so a run that
submits thousands of Graph queries on one emulator, or one host, measures what it did before the quota was kept.
``tests/e2e/test_graph_quota.py`` shows the quota itself.

For the same reason they turn off the emulator's queries that fail, vanish or stay running (on by default): each one
is a resubmission, and a stuck one a wait as long as the collector's give-up bound, which would make a figure depend
on which chunks the draws hit rather than on the code measured (``tests/e2e/test_graph_evidence.py`` shows them).
"""

from __future__ import annotations

from m365_emulator import EmulatorConfig

NO_DAILY_QUOTA = {"COLLECTOR_GRAPH_DAILY_QUERIES": "1000000", "COLLECTOR_GRAPH_DAILY_RESERVE": "0"}
"""Collector settings: an allowance no benchmark reaches (an app that predates the quota ignores them)."""


def lift(config: EmulatorConfig) -> EmulatorConfig:
    """The emulator without its daily submission quota, and with every query finishing (``steady``)."""
    config.graph.daily_submission_quota = 0
    return steady(config)


def steady(config: EmulatorConfig) -> EmulatorConfig:
    """The emulator's Graph queries all finish: none fails, vanishes or stays running."""
    config.graph.fail_rate = config.graph.vanish_rate = config.graph.stuck_rate = 0.0
    return config
