"""JSON for the record path: the same values and the same bytes whether or not ``orjson`` is installed.

The standard library's ``json`` is the reference; ``orjson`` (compiled, in requirements.txt) does the work wherever it
gives exactly what the reference gives, and the reference takes over wherever it might not. A worker without the
orjson wheel therefore writes the very same chunk objects, only slower.

Decoding (:func:`loads`) is RFC 8259 JSON:

* ``orjson`` reads an integer beyond 64 bits as a float, losing digits: text with a run of 19 or more digits (the
  shortest that can leave 64 bits) goes to the reference, which keeps every digit. A run inside a string costs only
  the slower path.
* Whatever ``orjson`` refuses, the reference reads, so what is accepted is what the reference accepts, with two
  refusals of its own: ``NaN``, ``Infinity`` and numbers that overflow a double are not JSON (RFC 8259 section 6, and
  an output line carrying them would not be JSON either), and nesting too deep for the interpreter is a decode error
  rather than a ``RecursionError``.
* ``bytes`` are UTF-8 (RFC 8259 section 8.1); invalid sequences read as U+FFFD, as ``requests`` decodes a body
  (``Response.text``) before ``Response.json()`` parses it.

Encoding (:func:`dump_line`, :func:`dump_lines`) is the reference's
``json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)`` in UTF-8, one line each:

* ``orjson`` sorts keys by code point, escapes the same characters the same way (``\\b \\t \\n \\f \\r``, other
  controls as ``\\u00XX``, nothing else) and writes integers the same within 64 bits (it refuses larger ones, and the
  reference writes them).
* Floats: both write the shortest text that reads back as the same double, but for magnitudes from 1e-10 to 1e-4
  orjson writes ``1e-7`` and ``0.00001`` where the reference writes ``1e-07`` and ``1e-05``. Every such text is
  ``e-`` with one digit before a delimiter, or ``0.0000`` and a digit from 1 to 9; output containing either (also
  inside a string, which only costs time) is written by the reference.
* Before orjson 3.12 positive exponents had no ``+`` (``1e16``): on import, a set of probe values is written both ways
  and orjson is left unused unless every difference is one the checks above catch (requirements.txt asks for 3.12+).
* Subclasses of the JSON types, dataclasses and datetimes are refused by ``orjson`` here and go to the reference
  (which writes the subclasses as before and refuses the rest). The decoder never makes any of them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

_orjson: Any
try:
    import orjson as _orjson
except ImportError:  # the reference does everything (a worker without the wheel; the bench's "stdlib" variant)
    _orjson = None

_DIGIT_RUNS = bytes(0x39 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"9" * 19
# Two searches, each led by a literal (which the regex engine finds fast); one alternation would be ten times slower.
_SHORT_EXPONENT = re.compile(rb"e-[1-9][,}\]\n]")
_SMALL_DECIMAL = re.compile(rb"0\.0000[1-9]")
_JSON_TYPES = (dict, list, str, int, float, bool, type(None))
_OPTIONS = 0
if _orjson is not None:
    _OPTIONS = (
        _orjson.OPT_SORT_KEYS
        | _orjson.OPT_APPEND_NEWLINE
        | _orjson.OPT_PASSTHROUGH_SUBCLASS
        | _orjson.OPT_PASSTHROUGH_DATACLASS
        | _orjson.OPT_PASSTHROUGH_DATETIME
    )


class JsonDecodeError(ValueError):
    """The text is not JSON (``msg`` says why, in the reference decoder's words where it has them)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.msg = msg


class JsonEncodeError(ValueError):
    """The value cannot be written as one line of UTF-8 JSON (a lone surrogate, a non-JSON type, too deep)."""


def _orjson_agrees() -> bool:
    """Whether the installed orjson writes and reads the probe values as this module expects (see the docstring)."""
    if _orjson is None:
        return False
    probes: list[Any] = [0.1, 123.456, 1e15, 1e16, 1e22, -5.674664918136216e64, 1.5e300, 1e-4, 1e-5, 2.5e-5]
    probes += [1e-7, 7.259938266031263e-08, 1e-10, 5e-324, 2**63, -(2**63), 2**64 - 1, "\x00\x1f\x7f\u2028\ud7ff"]
    probes += [{"b": 1, "a": 2, "\u00e9": 3, "\U0001f600": 4, "\uffff": 5}]
    for value in probes:
        line = _orjson.dumps(value, option=_OPTIONS)
        expected = _reference_line(value)
        if line != expected and not _float_forms_differ(line):
            return False
        if _orjson.loads(expected) != json.loads(expected):
            return False
    return True


def uses_orjson() -> bool:
    return _orjson is not None


def _may_hold_a_big_int(data: bytes | str) -> bool:
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return _LONG_RUN in raw.translate(_DIGIT_RUNS)


def _float_forms_differ(data: bytes) -> bool:
    """True when ``orjson``'s text may spell a float differently from the reference (see the module docstring)."""
    return _SHORT_EXPONENT.search(data) is not None or _SMALL_DECIMAL.search(data) is not None


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonDecodeError(f"number {text[:40]} does not fit a double")
    return value


def _not_a_number(name: str) -> Any:
    raise JsonDecodeError(f"{name} is not a JSON value")


def _reference_loads(data: bytes | str) -> Any:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    try:
        return json.loads(text, parse_float=_finite, parse_constant=_not_a_number)
    except json.JSONDecodeError as exc:
        raise JsonDecodeError(exc.msg) from None
    except RecursionError:
        raise JsonDecodeError("nested too deeply") from None


def loads(data: bytes | str) -> Any:
    """Decodes JSON text (see the module docstring for what is accepted).

    Raises:
        JsonDecodeError: the text is not JSON.
    """
    if _orjson is not None and not _may_hold_a_big_int(data):
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:
            pass  # the reference decides, and says why in its own words
    return _reference_loads(data)


def _reference_line(value: Any) -> bytes:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)
        return text.encode() + b"\n"
    except UnicodeEncodeError as exc:
        raise JsonEncodeError(f"text that is not valid Unicode ({exc.reason})") from None
    except RecursionError:
        raise JsonEncodeError("nested too deeply") from None
    except (TypeError, ValueError) as exc:
        raise JsonEncodeError(str(exc)) from None


def dump_line(value: Any) -> bytes:
    """One JSON line (with its newline), byte for byte what the reference writes.

    Raises:
        JsonEncodeError: the value cannot be written as UTF-8 JSON.
    """
    if _orjson is not None and type(value) in _JSON_TYPES:
        try:
            line: bytes = _orjson.dumps(value, option=_OPTIONS)
        except _orjson.JSONEncodeError:
            return _reference_line(value)
        if not _float_forms_differ(line):
            return line
    return _reference_line(value)


if _orjson is not None and not _orjson_agrees():
    _orjson = None  # an orjson that writes some value differently: the reference does everything


def dump_lines(values: Sequence[Any]) -> bytes:
    """The JSON lines of ``values``, concatenated; one call per page keeps the per-line checks to one scan.

    Raises:
        JsonEncodeError: one of the values cannot be written (call :func:`dump_line` on each to find which).
    """
    if _orjson is None:
        return b"".join(_reference_line(value) for value in values)
    dumps, options = _orjson.dumps, _OPTIONS
    try:
        data = b"".join([dumps(value, option=options) for value in values])
    except _orjson.JSONEncodeError:
        return b"".join(dump_line(value) for value in values)
    if _float_forms_differ(data) or not all(type(value) in _JSON_TYPES for value in values):
        return b"".join(dump_line(value) for value in values)
    return data
