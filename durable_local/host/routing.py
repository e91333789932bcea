"""ASP.NET-style route templates as the Functions host accepts them in ``@app.route(route=...)``.

Routes are ranked as ASP.NET ranks them, which is not the Functions host's order (see ``precedence_conflicts``).
Supported: literal segments (case-insensitive), ``{name}``, optional ``{name?}``, defaults ``{name=value}``,
catch-all ``{*rest}``, several parameters in one segment (``{a}.{b}``) and the constraints ``int``, ``long``,
``bool``, ``alpha``, ``guid``, ``float``/``double``/``decimal``, ``datetime``, ``min(n)``, ``max(n)``,
``range(a,b)``, ``minlength(n)``, ``maxlength(n)``, ``length(n)``, ``regex(expr)``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import unquote

_PARAM = re.compile(r"\{([^{}]+)\}")


class RouteTemplateError(ValueError):
    """A route template the host cannot serve (the message names the template)."""


@dataclass(frozen=True, slots=True)
class _Param:
    name: str
    optional: bool
    catch_all: bool
    default: str | None
    checks: tuple[Callable[[str], bool], ...]


@dataclass(slots=True)
class RouteTemplate:
    """A compiled template: ``match(path)`` returns the route values or None."""

    template: str
    _regex: re.Pattern[str] = field(repr=False)
    _params: dict[str, _Param] = field(repr=False)
    literal_segments: int = 0

    @classmethod
    def parse(cls, template: str) -> RouteTemplate:
        text = template.strip().strip("/")
        params: dict[str, _Param] = {}
        pattern = ""
        literal_segments = 0
        segments = text.split("/") if text else []
        for index, segment in enumerate(segments):
            if not segment:
                raise RouteTemplateError(f"route {template!r}: empty segment")
            seg_regex, seg_params = _compile_segment(segment, template)
            if not seg_params:
                literal_segments += 1
            for param in seg_params:
                if param.name.lower() in (p.lower() for p in params):
                    raise RouteTemplateError(f"route {template!r}: parameter {param.name!r} appears twice")
                params[param.name] = param
            is_last = index == len(segments) - 1
            if any(p.catch_all for p in seg_params) and not is_last:
                raise RouteTemplateError(f"route {template!r}: a catch-all parameter must be the last segment")
            only = seg_params[0] if len(seg_params) == 1 else None
            whole_optional = only is not None and (only.optional or only.catch_all or only.default is not None)
            whole_optional = whole_optional and _PARAM.fullmatch(segment) is not None
            if whole_optional:
                pattern += f"(?:/{seg_regex})?" if index else f"(?:{seg_regex})?"
            else:
                pattern += f"/{seg_regex}" if index else seg_regex
        return cls(template, re.compile(pattern, re.IGNORECASE | re.DOTALL), params, literal_segments)

    @property
    def parameter_names(self) -> list[str]:
        return list(self._params)

    def sort_key(self) -> tuple[int, int, int]:
        """Routes with more literal segments win, then those with fewer parameters (as ASP.NET orders them)."""
        catch_all = sum(1 for p in self._params.values() if p.catch_all)
        return (-self.literal_segments, catch_all, len(self._params))

    def match(self, path: str) -> dict[str, str] | None:
        """Match a request path (relative to the route prefix, no leading slash)."""
        found = self._regex.fullmatch(path.strip("/"))
        if found is None:
            return None
        values: dict[str, str] = {}
        for name, param in self._params.items():
            raw = found.group(_group(name))
            if raw is None or raw == "":
                if param.default is not None:
                    values[name] = param.default
                elif not (param.optional or param.catch_all):
                    return None
                continue
            value = unquote(raw)
            if not all(check(value) for check in param.checks):
                return None
            values[name] = value
        return values


def _group(name: str) -> str:
    return "p_" + re.sub(r"\W", "_", name)


def _compile_segment(segment: str, template: str) -> tuple[str, list[_Param]]:
    params: list[_Param] = []
    regex = ""
    position = 0
    for found in _PARAM.finditer(segment):
        regex += re.escape(segment[position : found.start()])
        param = _parse_param(found.group(1), template)
        params.append(param)
        body = ".*" if param.catch_all else "[^/]+"
        regex += f"(?P<{_group(param.name)}>{body})"
        if param.optional and len(segment) != len(found.group(0)):
            raise RouteTemplateError(f"route {template!r}: optional parameter {param.name!r} must fill its segment")
        position = found.end()
    rest = segment[position:]
    if "{" in rest or "}" in rest:
        raise RouteTemplateError(f"route {template!r}: unbalanced braces in {segment!r}")
    regex += re.escape(rest)
    return regex, params


def _parse_param(spec: str, template: str) -> _Param:
    catch_all = spec.startswith("*")
    spec = spec.lstrip("*")
    default: str | None = None
    if "=" in spec:
        spec, default = spec.split("=", 1)
    optional = spec.endswith("?")
    spec = spec.rstrip("?")
    name, *constraints = _split_constraints(spec)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise RouteTemplateError(f"route {template!r}: bad parameter name {name!r}")
    checks = tuple(_constraint(c, template) for c in constraints)
    return _Param(name, optional, catch_all, default, checks)


def _split_constraints(spec: str) -> list[str]:
    """Split ``name:c1:regex(a:b)`` on colons outside parentheses."""
    parts: list[str] = []
    depth = 0
    current = ""
    for char in spec:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == ":" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_guid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


_SIMPLE: dict[str, Callable[[str], bool]] = {
    "int": lambda v: re.fullmatch(r"[+-]?\d+", v) is not None and -(2**31) <= int(v) < 2**31,
    "long": lambda v: re.fullmatch(r"[+-]?\d+", v) is not None and -(2**63) <= int(v) < 2**63,
    "bool": lambda v: v.lower() in ("true", "false"),
    "alpha": lambda v: re.fullmatch(r"[A-Za-z]+", v) is not None,
    "guid": _is_guid,
    "float": _is_number,
    "double": _is_number,
    "decimal": _is_number,
    "datetime": _is_datetime,
}


def _constraint(text: str, template: str) -> Callable[[str], bool]:
    if text.lower() in _SIMPLE:
        return _SIMPLE[text.lower()]
    found = re.fullmatch(r"(\w+)\((.*)\)", text, re.DOTALL)
    if found is None:
        raise RouteTemplateError(f"route {template!r}: unsupported constraint {text!r}")
    kind, argument = found.group(1).lower(), found.group(2)
    if kind == "regex":
        compiled = re.compile(argument, re.IGNORECASE)
        return lambda v: compiled.search(v) is not None
    try:
        numbers = [int(part) for part in argument.split(",")]
    except ValueError as exc:
        raise RouteTemplateError(f"route {template!r}: bad constraint argument in {text!r}") from exc
    if kind == "min" and len(numbers) == 1:
        return lambda v: _SIMPLE["long"](v) and int(v) >= numbers[0]
    if kind == "max" and len(numbers) == 1:
        return lambda v: _SIMPLE["long"](v) and int(v) <= numbers[0]
    if kind == "range" and len(numbers) == 2:
        return lambda v: _SIMPLE["long"](v) and numbers[0] <= int(v) <= numbers[1]
    if kind == "minlength" and len(numbers) == 1:
        return lambda v: len(v) >= numbers[0]
    if kind == "maxlength" and len(numbers) == 1:
        return lambda v: len(v) <= numbers[0]
    if kind == "length" and len(numbers) in (1, 2):
        low, high = (numbers[0], numbers[0]) if len(numbers) == 1 else (numbers[0], numbers[1])
        return lambda v: low <= len(v) <= high
    raise RouteTemplateError(f"route {template!r}: unsupported constraint {text!r}")


def precedence_conflicts(
    routes: list[tuple[str, RouteTemplate]], *, methods: Mapping[str, Collection[str]] | None = None
) -> list[tuple[str, str, str]]:
    """Pairs of HTTP functions that would answer the same path differently here and on Azure.

    Locally routes are tried by ``sort_key`` (more literal segments first, as ASP.NET ranks them); the Functions
    host tries them in function-name order, first match wins (Azure/azure-functions-host#9876, #6062). For each
    pair the two orders disagree on, a sample path built from either template (every parameter replaced by ``1``,
    or the literal path) that both match is a conflict: ``(local winner, Azure winner, path)``. A heuristic: it
    finds the usual literal-versus-parameter shadowing, not every overlap constraints allow. Two functions whose
    ``methods`` (name -> allowed methods; absent = all) are disjoint never conflict: the host's route carries its
    methods as a constraint, so a GET and a POST on one template each answer their own.
    """
    local = sorted(routes, key=lambda item: item[1].sort_key())
    rank = {name: index for index, (name, _) in enumerate(local)}
    conflicts: list[tuple[str, str, str]] = []
    by_name = sorted(routes, key=lambda item: item[0].lower())
    for index, (first_name, first) in enumerate(by_name):
        for second_name, second in by_name[index + 1 :]:
            if rank[second_name] > rank[first_name]:
                continue  # both orders try first_name first
            if methods is not None and _disjoint(methods.get(first_name), methods.get(second_name)):
                continue  # a request has one method: only one of them can match it
            for sample in (_sample_path(second), _sample_path(first)):
                if first.match(sample) is not None and second.match(sample) is not None:
                    conflicts.append((second_name, first_name, sample))
                    break
    return conflicts


def _disjoint(first: Collection[str] | None, second: Collection[str] | None) -> bool:
    if first is None or second is None:
        return False
    return not {m.upper() for m in first} & {m.upper() for m in second}


def _sample_path(route: RouteTemplate) -> str:
    return _PARAM.sub("1", route.template.strip().strip("/"))
