"""The request-body parser: nesting measured before decoding, duplicate keys refused at any depth."""

from __future__ import annotations

import pytest

from http_api.request_json import MAX_DEPTH, nesting_depth, parse_request_json
from shared.requests.validation import InvalidRequest


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("{}", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('["[[[[", "]]]]"]', 1),  # brackets inside strings are text
        ('["\\"[[[", [2]]', 2),  # an escaped quote does not end the string
        ('["\\\\", [[3]]]', 3),  # an escaped backslash does
        ('"unterminated [[[[', 0),
        ("", 0),
    ],
)
def test_nesting_depth_counts_structure_not_strings(text: str, depth: int) -> None:
    assert nesting_depth(text) == depth


def test_the_depth_limit_is_exact() -> None:
    inside = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nesting_depth(inside) == MAX_DEPTH
    assert parse_request_json(inside.encode()) is not None
    with pytest.raises(InvalidRequest) as caught:
        parse_request_json(("[" + inside + "]").encode())
    assert (caught.value.field, caught.value.rule) == ("body", "depth")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"a": 1, "a": 1}', "a"),  # even with the same value
        (b'{"filters": {"userIds": [], "userIds": ["x"]}}', "filters.userIds"),
        (b'{"a": [{"ok": 1}, {"b": 1, "b": 2}]}', "a[1].b"),
    ],
)
def test_a_duplicate_key_at_any_depth_is_named(raw: bytes, field: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request_json(raw)
    assert (caught.value.field, caught.value.rule) == (field, "duplicate_key")
    assert field in caught.value.message


def test_ordinary_bodies_parse_as_before() -> None:
    assert parse_request_json(b'{"a": [1, "x"], "b": {"c": null}}') == {"a": [1, "x"], "b": {"c": None}}
    assert parse_request_json(b"") is None  # no body: the validator answers "body must be an object"
    assert parse_request_json('{"k": "\u00e9"}'.encode("utf-16")) == {"k": "\u00e9"}  # JSON's other encodings


@pytest.mark.parametrize("raw", [b"{not json", b'{"a": 1', b"\xff\xfe\xfa", b"[1,]"])
def test_broken_json_is_a_json_error(raw: bytes) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request_json(raw)
    assert (caught.value.field, caught.value.rule) == ("body", "json")
