"""JSON pages read without building their records: each item's raw bytes, and only the members asked for.

A records page is ``{"value": [record, record, ...], "@odata.nextLink": ...}``. The writer needs each record's bytes
(written as the service sent them), its id and its time, and nothing else. :func:`split_page` checks the whole page is
JSON and cuts its item list into the items' exact bytes; :class:`Projection` reads a few members of one item (their
values, or only what kind of JSON value they are) and skips the rest.

``msgspec`` (compiled, in requirements.txt) does both where it accepts the text; the standard library's ``json`` is
the reference and decides wherever ``msgspec`` refuses (a lone UTF-16 surrogate escape, which ``msgspec`` refuses and
``json`` reads). Either way the same spans and the same values come out, so a worker without the ``msgspec`` wheel
writes the very same chunk objects, only slower. What both accept is RFC 8259 JSON, with two refusals of their own:
the literals ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON, and nor is a control character inside a string.
Numbers are not converted to decide where an item ends: an integer of any length or ``1e400`` is kept as the service
wrote it (``shared.records.json_codec`` refuses a number that overflows a double when it decodes a value).

Bytes that are not UTF-8 are not split here (:func:`is_utf8` says so first): the caller decodes such a page the old
way, where invalid sequences read as U+FFFD.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from operator import attrgetter
from typing import Any

from shared.records.json_codec import JsonDecodeError

_msgspec: Any
try:
    import msgspec as _msgspec
except ImportError:  # the reference does everything (a worker without the wheel; the bench's "stdlib" variant)
    _msgspec = None

Item = bytes | memoryview
"""One item's raw bytes (``msgspec.Raw`` is read like one too: a buffer over the page)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""A member the item does not have."""

KINDS = {ord("{"): "object", ord("["): "array", ord('"'): "string", ord("n"): "null", ord("t"): "boolean"}
KINDS[ord("f")] = "boolean"


def uses_msgspec() -> bool:
    return _msgspec is not None


def is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_REFERENCE = json.JSONDecoder(parse_constant=_not_a_number)
_scan = _REFERENCE.scan_once  # type: ignore[attr-defined]
_SPACE = re.compile(r"[ \t\n\r]*")


def _reference_value(data: Item | str) -> Any:
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    try:
        return _REFERENCE.decode(text)
    except (ValueError, RecursionError) as exc:
        raise JsonDecodeError(getattr(exc, "msg", str(exc))) from None


@dataclass(frozen=True, slots=True)
class SplitPage:
    """A page cut into its items: ``items`` None when the list member is absent or not a list."""

    items: list[Any] | None
    """Each item's exact bytes (``bytes`` or a buffer over the page, such as ``msgspec.Raw``)."""
    members: dict[str, Any]
    """The other top-level members asked for (``MISSING`` when absent)."""


class _Reference:
    """The standard library's reading of a page: a walk over the top-level object with ``json``'s own scanner."""

    def __init__(self, body: bytes, items_key: str) -> None:
        self.body = body
        self.text = body.decode("utf-8")
        self.items_key = items_key

    def _fail(self, what: str, at: int) -> JsonDecodeError:
        return JsonDecodeError(f"{what} at character {at}")

    def _skip(self, at: int) -> int:
        match = _SPACE.match(self.text, at)
        return match.end() if match is not None else at

    def _value(self, at: int) -> tuple[Any, int]:
        try:
            return _scan(self.text, at)  # type: ignore[no-any-return]
        except StopIteration:
            raise self._fail("expected a value", at) from None
        except (ValueError, RecursionError) as exc:
            raise self._fail(str(exc), at) from None

    def _items(self, at: int) -> tuple[list[tuple[int, int]], int]:
        spans: list[tuple[int, int]] = []
        text, at = self.text, self._skip(at + 1)
        if text.startswith("]", at):
            return spans, at + 1
        while True:
            _, end = self._value(at)
            spans.append((at, end))
            at = self._skip(end)
            if text.startswith(",", at):
                at = self._skip(at + 1)
            elif text.startswith("]", at):
                return spans, at + 1
            else:
                raise self._fail("expected ',' or ']'", at)

    def split(self, wanted: Sequence[str]) -> SplitPage:
        text = self.text
        at = self._skip(0)
        if not text.startswith("{", at):
            raise self._fail("the page is not a JSON object", at)
        members: dict[str, Any] = {}
        spans: list[tuple[int, int]] | None = None
        at = self._skip(at + 1)
        closed = text.startswith("}", at)
        at += int(closed)
        while not closed:
            if not text.startswith('"', at):
                raise self._fail("expected a member name", at)
            try:
                key, at = scanstring(text, at + 1, True)
            except ValueError as exc:
                raise self._fail(str(exc), at) from None
            at = self._skip(at)
            if not text.startswith(":", at):
                raise self._fail("expected ':'", at)
            at = self._skip(at + 1)
            if key == self.items_key and text.startswith("[", at):
                spans, at = self._items(at)
                members.pop(key, None)
            else:
                value, at = self._value(at)
                members[key] = value
                if key == self.items_key:
                    spans = None  # the last of repeated names wins, as in every decoder here
            at = self._skip(at)
            if text.startswith(",", at):
                at = self._skip(at + 1)
            elif text.startswith("}", at):
                at, closed = at + 1, True
            else:
                raise self._fail("expected ',' or '}'", at)
        if self._skip(at) != len(text):
            raise self._fail("extra data after the page", at)
        if spans is None:
            items = None
        elif self.body.isascii():
            items = [self.body[start:end] for start, end in spans]
        else:
            items = [text[start:end].encode("utf-8") for start, end in spans]
        return SplitPage(items, {name: members.get(name, MISSING) for name in wanted})


def _page_struct(items_key: str, wanted: tuple[str, ...]) -> Any:
    fields: list[tuple[str, Any, Any]] = [("items", list[_msgspec.Raw] | None, None)]
    fields += [(f"m{n}", object, MISSING) for n in range(len(wanted))]
    rename = {"items": items_key, **{f"m{n}": name for n, name in enumerate(wanted)}}
    return _msgspec.json.Decoder(_msgspec.defstruct("Page", fields, rename=rename))


_PAGE_DECODERS: dict[tuple[str, tuple[str, ...]], Any] = {}


def split_page(body: bytes, *, items_key: str = "value", members: Sequence[str] = ()) -> SplitPage:
    """The items of the page's ``items_key`` list as raw bytes, and the top-level ``members`` asked for.

    Call it on UTF-8 bytes only (:func:`is_utf8`).

    Raises:
        JsonDecodeError: the page is not JSON, or not a JSON object.
    """
    wanted = tuple(members)
    if _msgspec is not None:
        decoder = _PAGE_DECODERS.get((items_key, wanted))
        if decoder is None:
            decoder = _PAGE_DECODERS[items_key, wanted] = _page_struct(items_key, wanted)
        try:
            page = decoder.decode(body)
        except _msgspec.DecodeError:
            pass  # the reference decides, and says why in its own words
        else:
            values = _msgspec.structs.astuple(page)
            return SplitPage(values[0], dict(zip(wanted, values[1:], strict=True)))
    return _Reference(body, items_key).split(wanted)


def kind(value: Any) -> str | None:
    """The JSON kind of a decoded value (None: ``MISSING``)."""
    if value is MISSING:
        return None
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return "number"


class Projection:
    """Reads some members of an item that is a JSON object and skips the rest: ``values`` decoded, ``kinds`` only as
    their JSON kind (``"object"``, ``"string"``, ...; None when absent), and for each ``nested`` member that is an
    object, a dict of the members of it named there (absent ones left out; ``MISSING`` when it is absent or null).

    :meth:`read` gives a tuple: values (``MISSING`` when absent), then kinds, then the nested dicts; None when the item
    is not a JSON object, or a nested member is neither an object nor null. The item must be JSON already (an item of
    :func:`split_page`).
    """

    def __init__(
        self, values: Sequence[str], kinds: Sequence[str] = (), nested: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        self.values = tuple(values)
        self.kinds = tuple(kinds)
        self.nested = {name: tuple(members) for name, members in (nested or {}).items()}
        self._decoder: Any = None
        if _msgspec is not None:
            self._decoder = _msgspec.json.Decoder(self._struct())

    def _struct(self) -> Any:
        fields: list[tuple[str, Any, Any]] = [(f"v{n}", object, MISSING) for n in range(len(self.values))]
        fields += [(f"k{n}", _msgspec.Raw, _msgspec.Raw()) for n in range(len(self.kinds))]
        rename = {f"v{n}": name for n, name in enumerate(self.values)}
        rename.update({f"k{n}": name for n, name in enumerate(self.kinds)})
        for n, (name, members) in enumerate(self.nested.items()):
            inner = _msgspec.defstruct(
                "Nested",
                [(f"v{m}", object, MISSING) for m in range(len(members))],
                rename={f"v{m}": member for m, member in enumerate(members)},
            )
            fields.append((f"n{n}", inner | None, MISSING))
            rename[f"n{n}"] = name
        return _msgspec.defstruct("Projection", fields, rename=rename)

    def read(self, item: Item) -> tuple[Any, ...] | None:
        if self._decoder is not None:
            try:
                found = _msgspec.structs.astuple(self._decoder.decode(item))
            except _msgspec.DecodeError:
                pass  # not an object, or text msgspec refuses: the reference decides
            else:
                return self._from_struct(found)
        return self._from_value(_reference_value(item))

    def _from_struct(self, found: tuple[Any, ...]) -> tuple[Any, ...]:
        count, kinds = len(self.values), len(self.kinds)
        head = found[:count]
        if kinds:
            raws = found[count : count + kinds]
            head += tuple(KINDS.get(memoryview(raw)[0], "number") if len(raw) else None for raw in raws)
        if not self.nested:
            return head
        dicts: list[Any] = []
        for inner, members in zip(found[count + kinds :], self.nested.values(), strict=True):
            if inner is MISSING or inner is None:
                dicts.append(MISSING)
                continue
            values = _msgspec.structs.astuple(inner)
            dicts.append({name: value for name, value in zip(members, values, strict=True) if value is not MISSING})
        return (*head, *dicts)

    def _from_value(self, value: Any) -> tuple[Any, ...] | None:
        if not isinstance(value, dict):
            return None
        dicts: list[Any] = []
        for name, members in self.nested.items():
            inner = value.get(name)
            if inner is None:
                dicts.append(MISSING)
            elif not isinstance(inner, dict):
                return None
            else:
                dicts.append({member: inner[member] for member in members if member in inner})
        return (
            *(value.get(name, MISSING) for name in self.values),
            *(kind(value.get(name, MISSING)) for name in self.kinds),
            *dicts,
        )


class Heads:
    """Reads a few members of every item of a page's list in one pass: ``texts`` (each must be a string) and
    ``objects`` (each must be a JSON object; only that is checked). For a page whose items all have them so, this is
    one C pass over the page with ``msgspec``, and nothing of the rest of the items is built.

    :meth:`read` gives one list per text member (item order), or None when an item is not an object, lacks one of the
    members or has another kind of value there (the caller then reads the items one by one).
    """

    def __init__(self, texts: Sequence[str], objects: Sequence[str] = (), *, items_key: str = "value") -> None:
        self.texts = tuple(texts)
        self.objects = tuple(objects)
        self._decoder: Any = None
        self._columns = [attrgetter(f"t{n}") for n in range(len(self.texts))]
        if _msgspec is not None:
            anything = _msgspec.defstruct("Object", [], gc=False)  # any object: its members are skipped, never built
            fields: list[tuple[str, Any]] = [(f"t{n}", str) for n in range(len(self.texts))]
            fields += [(f"o{n}", anything) for n in range(len(self.objects))]
            rename = {f"t{n}": name for n, name in enumerate(self.texts)}
            rename.update({f"o{n}": name for n, name in enumerate(self.objects)})
            item = _msgspec.defstruct("Head", fields, rename=rename, gc=False)
            page = _msgspec.defstruct("HeadPage", [("items", list[item])], rename={"items": items_key}, gc=False)  # type: ignore[valid-type]
            self._decoder = _msgspec.json.Decoder(page)

    def read(self, body: bytes, items: Sequence[Item]) -> tuple[list[str], ...] | None:
        """The text members of every item; ``body`` is the page ``items`` were split from."""
        if self._decoder is not None:
            try:
                heads = self._decoder.decode(body).items
            except _msgspec.ValidationError:
                return None  # the reference would judge the same members the same way
            except _msgspec.DecodeError:
                pass  # text msgspec refuses: the reference decides
            else:
                return tuple(list(map(column, heads)) for column in self._columns)
        columns: tuple[list[str], ...] = tuple([] for _ in self.texts)
        for item in items:
            value = _reference_value(item)
            if not isinstance(value, dict) or any(not isinstance(value.get(name), dict) for name in self.objects):
                return None
            for column, name in zip(columns, self.texts, strict=True):
                text = value.get(name)
                if not isinstance(text, str):
                    return None
                column.append(text)
        return columns
