"""How the pages are served: files of the app, script and style inlined and allowed by hash, small, and reachable
whichever order the Functions host tries the ``collections/view`` and ``collections/{id}`` routes in."""

from __future__ import annotations

import asyncio
import base64
import fnmatch
import hashlib
import re
from pathlib import Path

import azure.functions as func

from durable_local.host.client_binding import client_binding_json
from durable_local.host.keys import HostKeys
from http_api import collections, view

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "http_api" / "static"


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_pages_inline_their_script_and_style_and_allow_exactly_those() -> None:
    for name in ("collection", "collections"):
        page = view.page(name)
        html = page.body.decode()
        (script,) = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
        (style,) = re.findall(r"<style>(.*?)</style>", html, re.DOTALL)
        assert "LIVE" in script and ":root" in style and "/*SCRIPT*/" not in html
        policy = page.headers["Content-Security-Policy"]
        assert f"script-src {_sha(script)};" in policy and f"style-src {_sha(style)};" in policy
        assert "default-src 'none'" in policy and "unsafe-inline" not in policy
        assert page.headers["Referrer-Policy"] == "no-referrer"  # the URL carries the function key


def test_page_script_never_writes_markup() -> None:
    # API data reaches the document through textContent; innerHTML/outerHTML/insertAdjacentHTML/document.write are
    # not used at all, so no change to the data can make the page parse it as HTML.
    for path in STATIC.glob("*.js"):
        text = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in text, f"{path.name} uses {sink}"


def test_the_pages_stay_small() -> None:
    for name, own in (("collection", "collection"), ("collections", "collections")):
        files = [STATIC / f"{own}.html", STATIC / f"{own}.js", STATIC / "common.js", STATIC / "live.css"]
        size = sum(p.stat().st_size for p in files)
        print(f"{name} page: {size:,} bytes unminified")
        assert size <= 50 * 1024


def test_static_files_are_deployed() -> None:
    patterns = [line.strip() for line in (REPO / ".funcignore").read_text().splitlines() if line.strip()]
    for path in STATIC.iterdir():
        parts = path.relative_to(REPO).parts
        matched = [p for p in patterns if any(fnmatch.fnmatch(part, p.rstrip("/")) for part in parts)]
        assert not matched, f"{path.name} excluded from the package by {matched}"


def _request(route_id: str) -> func.HttpRequest:
    return func.HttpRequest(
        "GET", f"http://127.0.0.1/api/collections/{route_id}", headers={}, params={}, route_params={"id": route_id},
        body=b"",
    )  # fmt: skip


def test_the_summary_route_answers_view_with_the_list_page() -> None:
    # The Functions host tries function routes in the order it lists the functions (first match wins), so GET
    # /api/collections/view may reach the summary trigger; it must serve the list page, not a 400.
    binding = client_binding_json("http://127.0.0.1:1", "UalCollector", HostKeys())
    summary = collections.collections_summary._function.get_user_function()
    for spelling in ("view", "VIEW"):
        response = asyncio.run(summary(req=_request(spelling), client=binding))
        assert response.status_code == 200 and response.mimetype == "text/html"
        assert response.get_body() == view.page("collections").body


def test_a_bad_id_gets_no_page() -> None:
    page = view.collection_page._function.get_user_function()
    response = page(req=_request("../etc"))
    assert response.status_code == 400 and b'"field": "id"' in response.get_body()


def test_the_collection_page_carries_the_operators_queries_under_its_policy() -> None:
    """The live page's "Logs (KQL)" shows docs/operations.md's queries; they are inlined into the page's one script,
    which the Content-Security-Policy allows by hash."""
    import json as json_module

    from http_api.view import page
    from shared.log_fields import KQL

    served = page("collection")
    body = served.body.decode()
    assert 'id="kql"' in body and "/*KQL*/" not in body
    script = body.split("<script>", 1)[1].split("</script>", 1)[0]
    assert json_module.dumps(KQL) in script
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in served.headers["Content-Security-Policy"]
