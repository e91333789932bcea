"""The live pages and the collections list (function auth level, like every route of the app).

* ``GET /api/collections/{id}/view``: one collection's live page (chunk grid, lanes, records/s, failures, retry);
* ``GET /api/collections/view``: the hub's recent collections, as a page;
* ``GET /api/collections?top=50``: the same list as JSON, newest first.

The pages are plain HTML/CSS/JS files in ``http_api/static``, read once per worker and served with their script and
style inlined, so one request carries the whole page (a separate script URL would need its own function key) and a
Content-Security-Policy can allow exactly that script and style by hash and nothing else. The page reads ``code``
from its own URL and sends it on to its API calls.

Route order: ``collections/view`` and ``collections/{id}`` both match ``/api/collections/view``. ASP.NET routing
prefers the literal segment (the local host does too), but the Functions host adds function routes to one route
collection in the order it lists the functions, first match wins (``WebJobsRouteBuilder``/``WebJobsRouter`` in
``Azure/azure-webjobs-sdk-extensions``; ``Azure/azure-functions-host`` issue #9876), so the summary trigger also
answers ``view`` with the list page, and ``view`` is a reserved collection id
(``shared.requests.validation.RESERVED_IDS``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import azure.durable_functions as df
import azure.functions as func

from http_api import live
from http_api.common import json_answer
from shared import names
from shared.clock import utc_now
from shared.errors import ConfigError
from shared.log_fields import KQL
from shared.settings import Settings

bp = df.Blueprint()

STATIC = Path(__file__).resolve().with_name("static")
LIST_SEGMENT = "view"
DEFAULT_TOP = 50


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    headers: dict[str, str]


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@functools.cache
def page(name: str) -> Page:
    """``<name>.html`` with ``live.css`` and ``common.js`` + ``<name>.js`` inlined (read once per worker)."""
    html = (STATIC / f"{name}.html").read_text(encoding="utf-8")
    style = (STATIC / "live.css").read_text(encoding="utf-8")
    script = (
        (STATIC / "common.js").read_text(encoding="utf-8") + "\n" + (STATIC / f"{name}.js").read_text(encoding="utf-8")
    )
    script = script.replace("/*KQL*/null", json.dumps(KQL), 1)  # the operator's queries (docs/operations.md)
    body = html.replace("/*STYLE*/", style, 1).replace("/*SCRIPT*/", script, 1)
    policy = (
        f"default-src 'none'; script-src {_hash(script)}; style-src {_hash(style)}; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    headers = {
        "Content-Security-Policy": policy,
        "Referrer-Policy": "no-referrer",  # the page's URL carries the function key
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache",
    }
    return Page(body.encode("utf-8"), headers)


def _html(name: str) -> func.HttpResponse:
    found = page(name)
    return func.HttpResponse(found.body, status_code=200, mimetype="text/html", charset="utf-8", headers=found.headers)


def _json(status: int, body: object) -> func.HttpResponse:
    return json_answer(status, body)


def list_page() -> func.HttpResponse:
    return _html("collections")


@bp.route(route="collections/{id}/view", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
def collection_page(req: func.HttpRequest) -> func.HttpResponse:
    collection_id = req.route_params.get("id", "")
    if not names.is_safe_id(collection_id):
        return _json(400, {"error": {"field": "id", "rule": "format", "message": "bad id"}})
    return _html("collection")


@bp.route(route="collections/view", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
def collections_list_page(req: func.HttpRequest) -> func.HttpResponse:
    return list_page()


def parse_top(raw: str | None) -> int | str:
    """``top`` as an int, or the 400 message naming the rule."""
    if raw is None or raw == "":
        return DEFAULT_TOP
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= live.MAX_TOP:
        return f"top must be a whole number from 1 to {live.MAX_TOP}"
    return int(raw)


@bp.route(route="collections", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_list(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    top = parse_top(req.params.get("top"))
    if isinstance(top, str):
        return _json(400, {"error": {"field": "top", "rule": "range", "message": top}})
    try:
        now = utc_now(Settings.from_env(os.environ))
    except ConfigError as exc:
        return _json(500, {"error": {"field": exc.setting, "rule": "config", "message": str(exc)}})
    return _json(200, await live.recent_collections(client, now, top))
