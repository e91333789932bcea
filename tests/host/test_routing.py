from __future__ import annotations

import pytest

from durable_local.host.routing import RouteTemplate, RouteTemplateError


def test_literal_routes_match_case_insensitively() -> None:
    route = RouteTemplate.parse("Collections/Start")
    assert route.match("collections/start") == {}
    assert route.match("collections/other") is None


def test_parameters_optional_and_constraints() -> None:
    route = RouteTemplate.parse("items/{id:int}/{name?}")
    assert route.match("items/42/bob") == {"id": "42", "name": "bob"}
    assert route.match("items/42") == {"id": "42"}
    assert route.match("items/abc") is None
    assert route.match("items/42/bob/extra") is None


def test_values_are_percent_decoded_after_matching() -> None:
    route = RouteTemplate.parse("files/{name}")
    assert route.match("files/a%2Fb%20c") == {"name": "a/b c"}


def test_catch_all_and_defaults() -> None:
    assert RouteTemplate.parse("static/{*path}").match("static/a/b/c.txt") == {"path": "a/b/c.txt"}
    assert RouteTemplate.parse("page/{n=1}").match("page") == {"n": "1"}


@pytest.mark.parametrize(
    ("template", "value", "ok"),
    [
        ("{v:alpha}", "abc", True),
        ("{v:alpha}", "ab1", False),
        ("{v:guid}", "8f6f2f8e-4f0b-4a5e-9a55-0d6f3c1f6a10", True),
        ("{v:bool}", "TRUE", True),
        ("{v:min(5)}", "4", False),
        ("{v:range(1,3)}", "3", True),
        ("{v:maxlength(3)}", "abcd", False),
        ("{v:regex(^a\\d+$)}", "a12", True),
    ],
)
def test_constraints(template: str, value: str, ok: bool) -> None:
    assert (RouteTemplate.parse(template).match(value) is not None) is ok


def test_mixed_segment_parameters() -> None:
    assert RouteTemplate.parse("{name}.{ext}").match("report.csv") == {"name": "report", "ext": "csv"}


def test_more_literal_routes_sort_first() -> None:
    routes = [RouteTemplate.parse("items/{id}"), RouteTemplate.parse("items/latest"), RouteTemplate.parse("{*all}")]
    ordered = sorted(routes, key=RouteTemplate.sort_key)
    assert [r.template for r in ordered] == ["items/latest", "items/{id}", "{*all}"]


@pytest.mark.parametrize("template", ["a/{x:unknown}", "{*rest}/tail", "a//b", "{x}/{x}", "a/{x"])
def test_bad_templates_are_refused(template: str) -> None:
    with pytest.raises(RouteTemplateError):
        RouteTemplate.parse(template)
