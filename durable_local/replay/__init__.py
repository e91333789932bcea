"""The pure replay layer: one orchestration episode in, history events and outbound messages out.

Modules: ``api`` (the contract), ``episode`` (``run_episode``), ``reconcile`` (DTFx's message
reconciliation), ``context_json`` (what the worker receives), ``actions`` (what it answers),
``dtfx`` (DTFx's replay context: sequence ids, open tasks, retries, non-determinism checks),
``shim`` (the extension's out-of-proc shim), ``decisions`` (decision events and messages).
"""

from __future__ import annotations

from durable_local.replay.api import EpisodeInput, EpisodeResult, ReplaySettings
from durable_local.replay.episode import run_episode

__all__ = ["EpisodeInput", "EpisodeResult", "ReplaySettings", "run_episode"]
