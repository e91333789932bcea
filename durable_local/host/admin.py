"""``POST /admin/functions/{name}``: run a function by hand, as the Functions host does it (``docs/local-host.md``,
"Run a function by hand").

Re-implemented from azure-functions-host ``FunctionsController.Invoke`` and Microsoft's "Manually run a non
HTTP-triggered function" (read, not copied):

* The master key (admin level); ``func start`` without ``--enableAuth`` lets every caller in, as the local host does
  without ``--require-keys``. A wrong or missing key answers 401.
* The body is a ``FunctionInvocation``, ``{"input": "<trigger input>"}``, read by MVC's Newtonsoft input formatter:
  a JSON content type is required (else 415), an empty body, invalid JSON, ``null`` or anything but an object answer
  400, property names match in any case, and ``input`` may be a string, a number or a boolean (read as text:
  ``true`` is ``"True"``); an object or array answers 400. Absent, it is null.
* The function is looked up by name in any case (404 if none), and answers 202 at once: the invocation runs in the
  background through the same executor as triggered runs (its retry policy included) and its outcome is only
  logged. What the trigger makes of the input is the trigger's business: a timer gets a ``TimerInfo`` with the
  monitor's status and ``IsPastDue`` false and ignores the input; an activity reads it as its serialized input (JSON
  text); an orchestration or entity trigger cannot bind a string and an HTTP trigger needs a request, so those
  invocations fail in the log (as on Azure).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from durable_local.host.keys import HostKeys
from durable_local.host.loader import EntityFunction, LoadedApp, OrchestratorFunction

logger = logging.getLogger(__name__)

ADMIN_FUNCTIONS = "/admin/functions/"
_JSON_TYPES = re.compile(r"(application|text)/json|application/[^/;\s]+\+json")


@dataclass(frozen=True, slots=True)
class ManualRunners:
    """How the host runs each kind of function by hand (both called on the host's event loop)."""

    timer: Callable[[str], None]
    """Timer function name -> start a manual run."""
    activity: Callable[[str, str | None], None]
    """Activity name, serialized input -> start a run in a worker thread."""


class AdminFunctions:
    def __init__(self, app: LoadedApp, keys: HostKeys, runners: ManualRunners) -> None:
        self._app = app
        self._keys = keys
        self._runners = runners

    async def invoke(self, request: web.Request, name: str) -> web.StreamResponse:
        if not self._keys.allows("admin", request.query, request.headers):
            return web.Response(status=401)
        media_type = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if not _JSON_TYPES.fullmatch(media_type):
            return _problem(415, 'Content-Type must be application/json (the body is {"input": "..."})')
        text = (await request.read()).decode("utf-8-sig", errors="replace")
        if not text.strip():
            return _problem(400, 'A non-empty request body is required: {"input": "..."}')
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):
            return _problem(400, 'The body is not valid JSON: send {"input": "..."}')
        if not isinstance(body, dict):
            return _problem(400, 'The body must be a JSON object: {"input": "..."}')
        value = next((v for k, v in body.items() if k == "input"), None)
        if value is None:
            value = next((v for k, v in body.items() if k.lower() == "input"), None)
        if isinstance(value, dict | list):
            return _problem(400, "input must be a string, a number or a boolean")
        run = self._find(name)
        if run is None:
            return web.Response(status=404)
        run(_as_text(value))
        return web.Response(status=202)

    def _find(self, name: str) -> Callable[[str | None], None] | None:
        """The manual run of function ``name`` (any case), or None if the app has no such function."""
        wanted = name.lower()
        for timer in self._app.timers:
            if timer.name.lower() == wanted:
                return functools.partial(_ignore_input, self._runners.timer, timer.name)
        for activity in self._app.activities.values():
            if (activity.function_name or activity.name).lower() == wanted:
                return functools.partial(_run_activity, self._runners.activity, activity.name)
        for http in self._app.http:
            if http.name.lower() == wanted:
                return functools.partial(_cannot_bind, http.name, _HTTP_NEEDS_A_REQUEST)
        durable: list[OrchestratorFunction | EntityFunction] = [
            *self._app.orchestrators.values(),
            *self._app.entities.values(),
        ]
        for function in durable:
            function_name = function.function_name or function.name
            if function_name.lower() == wanted:
                return functools.partial(_cannot_bind, function_name, _DURABLE_CANNOT_BIND_A_STRING)
        return None


_HTTP_NEEDS_A_REQUEST = "NotSupportedException: An HttpRequest is required (call the function's route instead)"
_DURABLE_CANNOT_BIND_A_STRING = (
    "ArgumentException: Don't know how to bind to String. (Parameter 'value') (start orchestrations with a "
    "durableClient or POST /runtime/webhooks/durabletask/orchestrators/{name}; signal entities through "
    "entities/{name}/{key})"
)


def _run_activity(run: Callable[[str, str | None], None], function: str, given: str | None) -> None:
    """``ActivityTriggerAttributeBindingProvider.BindAsync``: a string is the serialized input, wrapped as
    ``[<input>]``, which must be a JSON array of one element (``DurableActivityContext.GetInputAsJson``)."""
    try:
        wrapped = json.loads(f"[{given}]") if given is not None else []
    except (ValueError, RecursionError):
        wrapped = None
    if not isinstance(wrapped, list) or len(wrapped) != 1:
        _cannot_bind(
            function,
            "ArgumentException: The serialized input is expected to be an object array with one element. (the input "
            'of a manual activity run is the activity\'s input as JSON text: {"input": "\\"Tokyo\\""})',
            given,
        )
        return
    run(function, json.dumps(wrapped[0]))


def _ignore_input(run: Callable[[str], None], function: str, _input: str | None) -> None:
    """A timer's manual run ignores the input (``TimerTriggerBinding`` builds its own ``TimerInfo``)."""
    run(function)


def _cannot_bind(function: str, reason: str, _input: str | None) -> None:
    logger.error("Executed '%s' (Failed: manual run: %s)", function, reason)


def _as_text(value: object) -> str | None:
    """A JSON scalar as Newtonsoft reads it into a string property."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        text = repr(value).upper()
        return text.removesuffix(".0")
    return str(value)


def _problem(status: int, message: str) -> web.Response:
    """The host answers these with an empty body; the local host says what is wrong."""
    return web.json_response({"Message": message}, status=status)
