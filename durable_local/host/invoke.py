"""Invoking the app's functions the way the Python worker does.

* Activities: the input JSON is decoded and the return value encoded with ``azure.functions``'
  ``ActivityTriggerConverter`` (so durable custom objects round-trip exactly as in Azure).
* Orchestrators: the SDK handle gets the context JSON string; a thread-local marks the running
  ``DurableOrchestrationContext`` so ``ReplayLogFilter`` can drop user log lines emitted while replaying.
* Entities: the SDK handle gets the batch JSON (``durable_local.entities.batch``) and answers the result JSON.
* Every invocation logs one line: function, instance id when known, duration and outcome.
* A function with a retry policy (``durable_local.host.retries``) is invoked again after a failure, each attempt
  with its ``RetryContext`` in ``context.retry_context``; activities and entities retry inside the work item, as the
  host's executor does before the Durable extension sees the result.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

import azure.functions as func

from durable_local.host.loader import ActivityFunction, EntityFunction, OrchestratorFunction
from durable_local.host.retries import Attempts, RetryContext, wait_unless_stopping

logger = logging.getLogger(__name__)

_current = threading.local()


class InvocationContext(func.Context):
    """The ``func.Context`` passed to a parameter named ``context``."""

    def __init__(
        self,
        function_name: str,
        function_directory: str,
        invocation_id: str | None = None,
        retry_context: RetryContext | None = None,
    ) -> None:
        self._invocation_id = invocation_id or str(uuid.uuid4())
        self._function_name = function_name
        self._function_directory = function_directory
        self._retry_context = retry_context or RetryContext()
        self._tls = threading.local()
        self._tls.invocation_id = self._invocation_id

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    @property
    def thread_local_storage(self) -> Any:
        return self._tls

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    @property
    def trace_context(self) -> Any:
        return None

    @property
    def retry_context(self) -> RetryContext:
        """Never None, as on Azure: the worker builds it from the host's (possibly unset) ``RetryContext``."""
        return self._retry_context


class AsyncRunner:
    """Runs app coroutines on the host's event loop (the worker runs every async function on one loop;
    the SDK's shared aiohttp session depends on that). Without a loop, ``asyncio.run`` is used."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        loop = self.loop
        if loop is None or not loop.is_running():
            return asyncio.run(coroutine)
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, loop)
        return future.result()


def log_invocation(function: str, started: float, outcome: str, instance_id: str | None = None) -> None:
    elapsed_ms = (time.perf_counter() - started) * 1000
    suffix = f" instance={instance_id}" if instance_id else ""
    logger.info("Executed '%s'%s (%s, %.1f ms)", function, suffix, outcome, elapsed_ms)


def make_activity(
    activity: ActivityFunction, runner: AsyncRunner, app_dir: str, stopping: threading.Event | None = None
) -> Callable[[str | None], str | None]:
    """The engine's ``ActivityFn`` for one activity function (with its retry policy; ``stopping`` ends a wait
    between retries with the last failure, as a host shutdown cancels the executor's delay)."""
    from azure.functions import meta
    from azure.functions.durable_functions import ActivityTriggerConverter

    def attempt(input_json: str | None, retry_context: RetryContext) -> str | None:
        started = time.perf_counter()
        value = ActivityTriggerConverter.decode(
            meta.Datum(type="json", value=input_json if input_json is not None else "null"), trigger_metadata=None
        )
        kwargs: dict[str, Any] = {activity.input_parameter: value}
        if activity.context_parameter:
            kwargs[activity.context_parameter] = InvocationContext(activity.name, app_dir, retry_context=retry_context)
        try:
            result = activity.handler(**kwargs)
            if activity.is_async or asyncio.iscoroutine(result):
                result = runner.run(result)
        except BaseException as exc:
            log_invocation(activity.name, started, f"Failed: {type(exc).__name__}: {exc}")
            raise
        encoded = ActivityTriggerConverter.encode(result, expected_type=None).value
        log_invocation(activity.name, started, "Succeeded")
        return str(encoded) if encoded is not None else None

    def run(input_json: str | None) -> str | None:
        attempts = Attempts(activity.function_name or activity.name, activity.retry)
        while True:
            try:
                return attempt(input_json, attempts.context)
            except Exception as exc:
                delay = attempts.failed(exc)
                if delay is None or wait_unless_stopping(delay, stopping):
                    raise

    return run


def make_orchestrator(orchestrator: OrchestratorFunction) -> Callable[[str], str]:
    """The engine's ``OrchestratorFn``: the SDK handle, plus replay-aware logging."""
    from azure.durable_functions.models import DurableOrchestrationContext
    from azure.durable_functions.orchestrator import Orchestrator

    handle = orchestrator.handle
    user_function = getattr(handle, "orchestrator_function", None)

    def run(context_json: str) -> str:
        started = time.perf_counter()
        if user_function is None:  # not an SDK handle: call it as is
            return str(handle(context_json))
        # Same steps as the SDK handle, keeping the context so the log filter can see is_replaying.
        context = DurableOrchestrationContext.from_json(context_json)
        context._input_expected_type = getattr(handle, "_df_input_type", None)
        previous = getattr(_current, "context", None)
        _current.context = context
        try:
            result = str(Orchestrator(user_function).handle(context))
        except BaseException as exc:
            # The SDK raises with the state JSON appended when user code fails; the engine decodes it.
            log_invocation(orchestrator.name, started, f"Failed: {str(exc).split(chr(10))[0]}", context.instance_id)
            raise
        finally:
            _current.context = previous
        log_invocation(orchestrator.name, started, "Succeeded", context.instance_id)
        return result

    return run


def make_entity(entity: EntityFunction, stopping: threading.Event | None = None) -> Callable[[str], str]:
    """The engine's ``EntityFn``: the SDK handle gets the batch JSON the way the worker passes it (an
    ``EntityContext`` whose ``body`` is the JSON text) and answers the batch result JSON (a batch whose function
    call fails is run again under the function's retry policy)."""
    from azure.functions._durable_functions import EntityContext

    def attempt(batch_json: str) -> str:
        started = time.perf_counter()
        instance_id = _entity_instance_id(batch_json)
        try:
            result = entity.handle(EntityContext(batch_json))
        except BaseException as exc:
            log_invocation(entity.name, started, f"Failed: {type(exc).__name__}: {exc}", instance_id)
            raise
        log_invocation(entity.name, started, "Succeeded", instance_id)
        return str(result)

    def run(batch_json: str) -> str:
        attempts = Attempts(entity.function_name or entity.name, entity.retry)
        while True:
            try:
                return attempt(batch_json)
            except Exception as exc:
                delay = attempts.failed(exc)
                if delay is None or wait_unless_stopping(delay, stopping):
                    raise

    return run


def _entity_instance_id(batch_json: str) -> str | None:
    try:
        identity = json.loads(batch_json)["self"]
        return f"@{identity['name']}@{identity['key']}"
    except (ValueError, KeyError, TypeError):
        return None


class ReplayLogFilter(logging.Filter):
    """Drops log records emitted by orchestrator code while the SDK is replaying history (what
    ``context.is_replaying`` guards would do), except the host's and engine's own records."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = getattr(_current, "context", None)
        if context is None or record.name.startswith("durable_local"):
            return True
        return not bool(getattr(context, "is_replaying", False))
