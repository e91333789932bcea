"""Parsing an HTTP request body as JSON without letting its shape hurt the app.

Two things ``json.loads`` does that a request API must not accept:

* **Deep nesting.** The decoder recurses once per ``[`` / ``{``; a body nested about a thousand levels deep raises
  ``RecursionError`` (an unexpected exception, so the host answers 500). Nesting is measured before decoding, on the
  text, and anything deeper than ``MAX_DEPTH`` is a 400. No valid request nests deeper than three levels.
* **Duplicate keys.** The last duplicate silently wins, so ``{"tenantId": "../x", "tenantId": "contoso..."}`` reads as
  whichever one a particular parser keeps (RFC 8259 §4: names "SHOULD be unique"; receivers differ). A duplicate at
  any depth is a 400 naming the key's path.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shared.requests.validation import InvalidRequest

MAX_DEPTH = 32

# A JSON string (its closing quote optional, so an unterminated one ends the scan instead of being retried from every
# later quote: linear in the body's length).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


class _Object(dict[str, Any]):
    """A decoded JSON object that remembers the first key it saw twice."""

    duplicate: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    result = _Object()
    for key, value in pairs:
        if key in result and result.duplicate is None:
            result.duplicate = key
        result[key] = value
    return result


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, brackets inside strings excepted."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _reject_duplicates(value: Any) -> None:
    """Raises on a duplicate key anywhere in ``value``, naming its path (iterative: no recursion)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            duplicate = getattr(item, "duplicate", None)
            if duplicate is not None:
                field = (f"{path}.{duplicate}" if path else duplicate)[:64]
                raise InvalidRequest(field, "duplicate_key", f"the key {field!r} appears more than once")
            stack += [(child, f"{path}.{key}" if path else key) for key, child in item.items()]
        elif isinstance(item, list):
            stack += [(child, f"{path}[{index}]") for index, child in enumerate(item)]


def parse_request_json(body: bytes) -> Any:
    """The body's JSON value; raises ``InvalidRequest`` (field ``body`` or the duplicate key's path) otherwise."""
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass") if body else "null"
    except UnicodeDecodeError:
        raise InvalidRequest("body", "json", "the request body must be valid JSON (UTF-8)") from None
    if nesting_depth(text) > MAX_DEPTH:
        raise InvalidRequest("body", "depth", f"the request body nests deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, object_pairs_hook=_object)
    except RecursionError:  # unreachable after the depth check; kept so no shape can ever become a 500
        raise InvalidRequest("body", "depth", f"the request body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:
        raise InvalidRequest("body", "json", "the request body must be valid JSON") from None
    _reject_duplicates(value)
    return value
