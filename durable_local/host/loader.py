"""Load a v2-model function app and describe its functions from the app's own metadata.

The app folder goes on ``sys.path`` and ``function_app.py`` is imported, as the Python worker does; the
module-level ``FunctionRegister`` (``df.DFApp`` or ``func.FunctionApp`` with ``df.Blueprint``s registered)
is asked for ``get_functions()``. Anything the local host cannot run faithfully is refused at load time
with an ``AppLoadError`` naming the function and binding, never skipped; every problem of every function is reported
in that one error (the Functions host logs "The 'f' function is in error: ..." for each function it cannot load), so
an app with several unsupported bindings needs one look, not one restart per binding.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from durable_local.host.retries import RetryPolicy, RetryPolicyError, policy_from_decorator
from durable_local.host.routing import RouteTemplate, RouteTemplateError, precedence_conflicts

logger = logging.getLogger(__name__)

SCRIPT_FILE = "function_app.py"
_ALL_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE")


class AppLoadError(Exception):
    """The app cannot be served: missing file, import failure or unsupported functions/bindings (``problems``
    lists each one; the message holds them all)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [message])


class _FunctionError(Exception):
    """Internal: what is wrong with one function (each line a problem)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class ClientBinding:
    """A ``durableClient`` input binding (``task_hub`` None = the app's hub)."""

    parameter: str
    task_hub: str | None = None
    connection_name: str | None = None


@dataclass(slots=True)
class HttpFunction:
    name: str
    route: RouteTemplate
    methods: tuple[str, ...]
    auth_level: str
    """``anonymous``, ``function`` or ``admin``."""
    request_parameter: str
    handler: Callable[..., Any]
    is_async: bool
    clients: list[ClientBinding] = field(default_factory=list)
    context_parameter: str | None = None
    retry: RetryPolicy | None = None
    """``@app.retry`` (host.json ``retry`` is applied by ``LocalHost`` where this is None)."""


@dataclass(slots=True)
class TimerFunction:
    """A ``timerTrigger`` function (``durable_local.host.timers`` runs it)."""

    name: str
    timer_parameter: str
    schedule: str
    """As written: a ``%SETTING%`` reference is resolved when the host starts."""
    run_on_startup: bool
    use_monitor: bool
    handler: Callable[..., Any]
    is_async: bool
    clients: list[ClientBinding] = field(default_factory=list)
    context_parameter: str | None = None
    retry: RetryPolicy | None = None


@dataclass(slots=True)
class ActivityFunction:
    name: str
    input_parameter: str
    handler: Callable[..., Any]
    is_async: bool
    context_parameter: str | None = None
    retry: RetryPolicy | None = None
    function_name: str = ""
    """The function's name (the activity may be registered under another ``activity`` name)."""


@dataclass(slots=True)
class OrchestratorFunction:
    name: str
    handle: Callable[[Any], str]
    """The SDK handle ``Orchestrator.create(user_fn)`` registered by ``orchestration_trigger``."""
    function_name: str = ""
    """The function's name (the orchestration may be registered under another ``orchestration`` name)."""


@dataclass(slots=True)
class EntityFunction:
    name: str
    """The entity name (``entity_name`` of the trigger, else the function name)."""
    handle: Callable[[Any], str]
    """The SDK handle ``Entity.create(user_fn)`` registered by ``entity_trigger``."""
    retry: RetryPolicy | None = None
    function_name: str = ""


@dataclass(slots=True)
class LoadedApp:
    app_dir: Path
    module: ModuleType
    http: list[HttpFunction] = field(default_factory=list)
    activities: dict[str, ActivityFunction] = field(default_factory=dict)
    orchestrators: dict[str, OrchestratorFunction] = field(default_factory=dict)
    entities: dict[str, EntityFunction] = field(default_factory=dict)
    timers: list[TimerFunction] = field(default_factory=list)

    @property
    def function_names(self) -> list[str]:
        names = [f.name for f in self.http] + [t.name for t in self.timers]
        return names + list(self.orchestrators) + list(self.activities) + list(self.entities)


def load_app(app_dir: Path | str) -> LoadedApp:
    """Import ``app_dir/function_app.py`` and index its functions."""
    folder = Path(app_dir).resolve()
    script = folder / SCRIPT_FILE
    if not script.is_file():
        raise AppLoadError(f"{script} does not exist: point --app-dir at a v2-model function app folder")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    module = _import_script(script)
    registers = _find_registers(module)
    if not registers:
        raise AppLoadError(f"{script} defines no FunctionApp / DFApp at module level")
    if len(registers) > 1:
        raise AppLoadError(f"{script} defines {len(registers)} function apps at module level; the worker allows one")
    loaded = LoadedApp(app_dir=folder, module=module)
    seen: set[str] = set()
    try:
        functions = registers[0].get_functions()
    except ValueError as exc:  # the SDK's own indexing validation (duplicate names, missing trigger)
        raise AppLoadError(f"{script}: {exc}") from exc
    problems: list[str] = []
    for function in functions:
        name = str(function.get_function_name())
        if name.lower() in seen:
            problems.append(f"function name {name!r} is defined twice")
            continue
        seen.add(name.lower())
        try:
            _index_function(loaded, name, function)
        except _FunctionError as refused:
            problems += [f"The '{name}' function is in error: {problem}" for problem in refused.problems]
    if problems:
        raise AppLoadError(_problems_message(script, problems), problems)
    for local_winner, azure_winner, path in precedence_conflicts(
        [(f.name, f.route) for f in loaded.http], methods={f.name: f.methods for f in loaded.http}
    ):
        logger.warning(
            "HTTP functions %r and %r both match /%s: here %r answers (the more literal route), on Azure %r does "
            "(the Functions host tries routes in function-name order). Make the routes disjoint or rename them.",
            local_winner,
            azure_winner,
            path,
            local_winner,
            azure_winner,
        )
    loaded.http.sort(key=lambda f: f.route.sort_key())
    return loaded


def _import_script(script: Path) -> ModuleType:
    # The worker imports the script as the top-level module "function_app".
    spec = importlib.util.spec_from_file_location("function_app", script)
    if spec is None or spec.loader is None:
        raise AppLoadError(f"cannot import {script}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop("function_app", None)
        raise AppLoadError(f"importing {script} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _find_registers(module: ModuleType) -> list[Any]:
    from azure.functions import FunctionRegister

    found: list[Any] = []
    for value in vars(module).values():
        if isinstance(value, FunctionRegister) and all(value is not f for f in found):
            found.append(value)
    return found


def _binding_dicts(function: Any) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for binding in function.get_bindings():
        raw = binding.get_dict_repr()
        result.append({key: getattr(value, "value", value) for key, value in raw.items()})
    return result


def _context_parameter(handler: Callable[..., Any], bound: set[str]) -> str | None:
    """The worker passes ``func.Context`` to a parameter named ``context`` that no binding claims."""
    parameters = inspect.signature(handler).parameters
    if "context" in parameters and "context" not in bound:
        return "context"
    return None


def _index_function(loaded: LoadedApp, name: str, function: Any) -> None:
    """Index one function, or raise ``_FunctionError`` with everything wrong with it."""
    bindings = _binding_dicts(function)
    trigger = next((b for b in bindings if str(b.get("type", "")).lower().endswith("trigger")), None)
    if trigger is None:
        raise _FunctionError(["it has no trigger"])
    kind = str(trigger["type"])
    handler = function.get_user_function()
    others = [b for b in bindings if b is not trigger]
    problems: list[str] = []
    retry = _retry_of(function, problems)
    if kind == "orchestrationTrigger":
        problems += _refused(others)
        orchestration = str(trigger.get("orchestration") or name)
        if not hasattr(handler, "orchestrator_function"):
            problems.append("the orchestrationTrigger handler is not an SDK orchestrator handle")
        if retry is not None:
            logger.warning(
                "The retry policy of orchestrator function %r is not applied by the local host: a retried orchestrator "
                "episode replays the same history and fails the same way (use call_activity_with_retry).",
                name,
            )
        _raise_if(problems)
        loaded.orchestrators[orchestration] = OrchestratorFunction(orchestration, handler, function_name=name)
    elif kind == "activityTrigger":
        problems += _refused(others)
        activity = str(trigger.get("activity") or name)
        bound = {str(trigger["name"])}
        problems += _unbound_parameters(handler, bound | {str(b.get("name")) for b in others})
        _raise_if(problems)
        loaded.activities[activity] = ActivityFunction(
            name=activity,
            input_parameter=str(trigger["name"]),
            handler=handler,
            is_async=inspect.iscoroutinefunction(handler),
            context_parameter=_context_parameter(handler, bound),
            retry=retry,
            function_name=name,
        )
    elif kind == "httpTrigger":
        http = _http_function(name, trigger, others, handler, problems)
        _raise_if(problems)
        assert http is not None
        http.retry = retry
        loaded.http.append(http)
    elif kind == "entityTrigger":
        problems += _refused(others)
        entity = str(trigger.get("entityName") or name)
        if not hasattr(handler, "entity_function"):
            problems.append("the entityTrigger handler is not an SDK entity handle")
        _raise_if(problems)
        loaded.entities[entity] = EntityFunction(entity, handler, retry=retry, function_name=name)
    elif kind == "timerTrigger":
        timer = _timer_function(name, trigger, others, handler, problems)
        _raise_if(problems)
        assert timer is not None
        timer.retry = retry
        loaded.timers.append(timer)
    else:
        problems.insert(0, f"trigger {trigger.get('name')!r} of type {kind} is not supported by the local host.")
        problems += _refused(others, allowed=("durableClient",))
        _raise_if(problems)


WHAT_RUNS = (
    "The local host runs httpTrigger, timerTrigger, orchestrationTrigger, activityTrigger and entityTrigger functions, "
    "with durableClient inputs (and an HTTP $return output); it has no emulation of queues, blobs, Event Hubs, Service "
    "Bus, Cosmos DB or other services, so their triggers and bindings would never fire or write anything. Serve this "
    "app with Azure Functions Core Tools (func start) or on Azure, or move the binding out of the app you run here."
)


def _problems_message(script: Path, problems: list[str]) -> str:
    heading = (
        f"{script}: the local host cannot serve this app ({len(problems)} problem{'s' if len(problems) > 1 else ''}):"
    )
    text = "\n".join([heading, *(f"  {problem}" for problem in problems)])
    if any("is not supported by the local host" in problem for problem in problems):
        text += "\n" + WHAT_RUNS
    return text


def _raise_if(problems: list[str]) -> None:
    if problems:
        raise _FunctionError(problems)


def _retry_of(function: Any, problems: list[str]) -> RetryPolicy | None:
    settings = function.get_settings_dict("retry_policy")
    if not settings:
        return None
    try:
        return policy_from_decorator(settings)
    except RetryPolicyError as exc:
        problems.append(str(exc))
        return None


def _refused(others: list[dict[str, Any]], allowed: tuple[str, ...] = ()) -> list[str]:
    return [
        f"binding {binding.get('name')!r} of type {binding.get('type')} is not supported by the local host."
        for binding in others
        if str(binding.get("type")) not in allowed
    ]


def _unbound_parameters(handler: Callable[..., Any], bound: set[str]) -> list[str]:
    return [
        f"parameter {parameter.name!r} has no binding"
        for parameter in inspect.signature(handler).parameters.values()
        if parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and parameter.name not in bound
        and parameter.name != "context"
        and parameter.default is inspect._empty
    ]


def _client_bindings(others: list[dict[str, Any]]) -> list[ClientBinding]:
    return [
        ClientBinding(str(binding["name"]), binding.get("taskHub"), binding.get("connectionName"))
        for binding in others
        if str(binding.get("type")) == "durableClient"
    ]


def _timer_function(
    name: str, trigger: dict[str, Any], others: list[dict[str, Any]], handler: Any, problems: list[str]
) -> TimerFunction | None:
    problems += _refused(others, allowed=("durableClient",))
    clients = _client_bindings(others)
    schedule = trigger.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        problems.append("timerTrigger needs a schedule")
    bound = {str(trigger["name"])} | {c.parameter for c in clients}
    problems += _unbound_parameters(handler, bound | {str(b.get("name")) for b in others})
    if problems:
        return None
    assert isinstance(schedule, str)
    return TimerFunction(
        name=name,
        timer_parameter=str(trigger["name"]),
        schedule=schedule,
        # The host's defaults (CoreExtensionsScriptBindingProvider: runOnStartup false, useMonitor true).
        run_on_startup=bool(trigger.get("runOnStartup") or False),
        use_monitor=bool(trigger.get("useMonitor", True) is not False),
        handler=handler,
        is_async=inspect.iscoroutinefunction(handler),
        clients=clients,
        context_parameter=_context_parameter(handler, bound),
    )


def _http_function(
    name: str, trigger: dict[str, Any], others: list[dict[str, Any]], handler: Any, problems: list[str]
) -> HttpFunction | None:
    kept = [b for b in others if not (str(b.get("type")) == "http" and b.get("name") == "$return")]
    problems += _refused(kept, allowed=("durableClient",))
    clients = _client_bindings(kept)
    route_text = str(trigger.get("route") or name)
    route: RouteTemplate | None = None
    try:
        route = RouteTemplate.parse(route_text)
    except RouteTemplateError as exc:
        problems.append(str(exc))
    methods = tuple(str(m).upper() for m in (trigger.get("methods") or ())) or _ALL_METHODS
    auth_level = str(trigger.get("authLevel") or "function").lower()
    bound = {str(trigger["name"])} | {c.parameter for c in clients}
    problems += _unbound_parameters(handler, bound | {str(b.get("name")) for b in kept})
    if problems or route is None:
        return None
    return HttpFunction(
        name=name,
        route=route,
        methods=methods,
        auth_level=auth_level,
        request_parameter=str(trigger["name"]),
        handler=handler,
        is_async=inspect.iscoroutinefunction(handler),
        clients=clients,
        context_parameter=_context_parameter(handler, bound),
    )
