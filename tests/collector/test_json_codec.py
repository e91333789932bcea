"""The record path's JSON: orjson where it agrees with the standard library, the standard library where it might not.

The reference is ``json``: every line must be byte for byte what ``json.dumps(sort_keys=True, ensure_ascii=False,
separators=(",", ":"))`` writes, and every decoded value what ``json.loads`` reads, whether or not orjson is there.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.records import json_codec
from shared.records.json_codec import JsonDecodeError, JsonEncodeError, dump_line, dump_lines, loads

pytestmark = pytest.mark.skipif(not json_codec.uses_orjson(), reason="orjson is not installed: nothing to compare")


def reference(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode() + b"\n"


def without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(json_codec, "_orjson", None)


# Text without lone surrogates (they cannot be UTF-8; see the encode error test), any plane, controls included.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
INTS = st.integers(min_value=-(2**70), max_value=2**70) | st.integers(min_value=-(2**64), max_value=2**64)
SCALARS = st.none() | st.booleans() | INTS | FLOATS | TEXT
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4))


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(TEXT, VALUES, max_size=6))
def test_a_line_is_the_reference_bytes_and_reads_back_as_the_same_value(record: dict[str, Any]) -> None:
    line = dump_line(record)
    assert line == reference(record)
    assert dump_lines([record, record]) == line + line
    assert loads(line) == json.loads(line) == record


def test_every_float_is_written_as_the_reference_writes_it() -> None:
    """orjson spells magnitudes between 1e-10 and 1e-4 differently (0.00001, 1e-7): those lines go to the reference."""
    values = [m * 10.0**e for e in range(-330, 309) for m in (1.0, 1.5, 2.2250738585072014, 9.999999999999999)]
    values += [5e-324, 1e-5, 2.5e-5, 7.259938266031263e-08, 1e-4, 1e16, 1e-10, 0.0, -0.0]
    finite = [v for sign in (1, -1) for v in values if math.isfinite(sign * v) for v in (sign * v,)]
    for value in finite:
        for shape in ({"a": value, "b": 1}, {"l": [value, 1]}, {"l": [1, value]}, {"n": {"z": value}}):
            assert dump_line(shape) == reference(shape), value
    page = [{"v": value} for value in finite]
    assert dump_lines(page) == b"".join(reference(r) for r in page)


def test_integers_beyond_64_bits_keep_every_digit() -> None:
    big = 123456789012345678901234567890
    assert loads(f'{{"n": {big}, "m": -{big}}}'.encode()) == {"n": big, "m": -big}
    assert loads(b"[-9999999999999999999, 18446744073709551616]") == [-9999999999999999999, 18446744073709551616]
    assert dump_line({"n": big}) == reference({"n": big})
    assert dump_line({"n": 2**64 - 1, "m": -(2**63)}) == reference({"n": 2**64 - 1, "m": -(2**63)})


@pytest.mark.parametrize("text", [b"NaN", b"[Infinity]", b'{"a": -Infinity}', b"[1e400]", b"[-1e999]"])
def test_numbers_that_are_not_json_are_refused_with_and_without_orjson(
    text: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(JsonDecodeError):
        loads(text)
    without_orjson(monkeypatch)
    with pytest.raises(JsonDecodeError):
        loads(text)


def test_nesting_too_deep_is_a_decode_error_not_a_recursion_error(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    with pytest.raises(JsonDecodeError, match="nested too deeply"):
        loads(deep)
    without_orjson(monkeypatch)
    with pytest.raises(JsonDecodeError, match="nested too deeply"):
        loads(deep)


CORPUS = [
    b'{"a": "\\u00e9\\ud83d\\ude00", "b": [1, 2.5, -0.0, 1E+2, 1e-7], "c": null, "d": true}',
    b'"\\ud800"',  # a lone surrogate escape: orjson refuses, the reference reads it
    b'{"a": "\xff\xfe"}',  # not UTF-8: read as U+FFFD, as requests decodes a body
    b'\xef\xbb\xbf{"bom": 1}',  # a byte order mark is not JSON text
    b'{"a": 1, "a": 2}',
    b'{"a": "x\x01y"}',  # a raw control character inside a string
    b"[1,]",
    b"",
    b"  [1]  ",
    b'"\\/"',
]


@pytest.mark.parametrize("text", CORPUS)
def test_what_is_accepted_and_what_it_reads_as_do_not_depend_on_orjson(
    text: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def outcome() -> tuple[str, Any]:
        try:
            return "value", loads(text)
        except JsonDecodeError as exc:
            return "error", exc.msg

    with_it = outcome()
    without_orjson(monkeypatch)
    assert outcome() == with_it


def test_invalid_utf8_reads_as_replacement_characters() -> None:
    assert loads(b'{"a": "x\xffy"}') == {"a": "x\ufffdy"}


def test_a_lone_surrogate_cannot_be_written() -> None:
    value = loads(b'{"a": "\\udead"}')
    with pytest.raises(JsonEncodeError, match="not valid Unicode"):
        dump_line(value)
    with pytest.raises(JsonEncodeError):
        dump_lines([{"ok": 1}, value])


def test_values_the_decoder_never_makes_go_to_the_reference() -> None:
    class Text(str):
        pass

    assert dump_line({"k": Text("v"), "b": True}) == reference({"k": "v", "b": True})
    with pytest.raises(JsonEncodeError):
        dump_line({"when": __import__("datetime").datetime(2024, 1, 1)})
    assert dump_line({1.5: "a float key"}) == reference({1.5: "a float key"})
    with pytest.raises(JsonEncodeError):
        dump_line({1: "a", "b": 2})  # keys of mixed types cannot be sorted: the reference refuses them too
