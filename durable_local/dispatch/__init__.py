"""Dispatchers of the local durable engine: orchestration work items and activity work items."""

from __future__ import annotations

from durable_local.dispatch.activity import ActivityDispatcher
from durable_local.dispatch.counters import EngineCounters, EventHook
from durable_local.dispatch.orchestration import OrchestrationDispatcher

__all__ = ["ActivityDispatcher", "EngineCounters", "EventHook", "OrchestrationDispatcher"]
