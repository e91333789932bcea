"""Route precedence: the local router ranks routes by specificity (ASP.NET), the Functions host tries them in
function-name order (Azure/azure-functions-host#9876). The host warns at start where the two orders disagree."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from durable_local.host.loader import load_app
from durable_local.host.routing import RouteTemplate, precedence_conflicts

_APP = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="items/{id}", methods=["GET"])
def a_item(req: func.HttpRequest) -> str:
    return "a_item " + req.route_params["id"]


@app.route(route="items/recent", methods=["GET"])
def b_recent(req: func.HttpRequest) -> str:
    return "b_recent"


@app.route(route="other/{id:int}", methods=["GET"])
def c_other(req: func.HttpRequest) -> str:
    return "c_other"
"""


def _routes(**templates: str) -> list[tuple[str, RouteTemplate]]:
    return [(name, RouteTemplate.parse(template)) for name, template in templates.items()]


def test_a_literal_route_named_after_a_parameter_route_is_reported() -> None:
    conflicts = precedence_conflicts(_routes(a_item="items/{id}", b_recent="items/recent"))
    assert conflicts == [("b_recent", "a_item", "items/recent")]


def test_routes_in_the_same_order_both_ways_or_disjoint_are_not_reported() -> None:
    assert precedence_conflicts(_routes(a_recent="items/recent", b_item="items/{id}")) == []
    assert precedence_conflicts(_routes(a_item="items/{id}", b_other="other/recent")) == []
    assert precedence_conflicts(_routes(a_item="items/{id:int}", b_recent="items/recent")) == []


def test_the_host_warns_at_load(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "function_app.py").write_text(_APP)
    (tmp_path / "host.json").write_text('{"version": "2.0"}')
    with caplog.at_level(logging.WARNING, logger="durable_local.host.loader"):
        loaded = load_app(tmp_path)
    assert [f.name for f in loaded.http][:2] == ["b_recent", "a_item"]  # local order is unchanged
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'b_recent'" in warnings[0] and "'a_item'" in warnings[0] and "items/recent" in warnings[0]


def test_routes_with_disjoint_methods_never_shadow_each_other() -> None:
    """The host's router constrains a route by its methods: a GET and a POST on one template both answer (a
    ``follows`` list and a ``follows`` start), whatever the names' order. Only overlapping methods are a conflict."""
    same = _routes(follows_start="follows", follows_list="follows")
    assert precedence_conflicts(same, methods={"follows_start": ("POST",), "follows_list": ("GET",)}) == []
    assert precedence_conflicts(same, methods={"follows_start": ("POST", "GET"), "follows_list": ("GET",)}) == [
        ("follows_start", "follows_list", "follows")
    ]
