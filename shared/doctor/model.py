"""What a doctor run returns: one :class:`ProbeResult` per probe, in a fixed order, and the run's time budget.

Outcomes:

* ``ok`` — the probe did what the collector needs (its ``detail`` may carry notes about how the service behaved);
* ``failed`` — it did not, and ``fix`` names the setting, permission or role to change;
* ``warning`` — it works, but the collector's output will be narrower than a user may expect (``fix`` says what to
  change if that is not intended); a warning does not fail the run;
* ``differs`` — the service behaves differently from what the collector assumes (``detail`` says what);
* ``skipped`` — the probe did not run (``detail`` says why: a probe it depends on failed, the time budget ran out).

Every text passes through :func:`shared.redact.redact` on its way in, so no result can carry a credential.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.redact import redact

DIFFERS_PREFIX = "service behaves differently from what the collector assumes: "


class Outcome(enum.Enum):
    OK = "ok"
    FAILED = "failed"
    WARNING = "warning"
    DIFFERS = "differs"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe: str
    outcome: Outcome
    detail: str
    fix: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", redact(self.detail))
        object.__setattr__(self, "fix", redact(self.fix))

    @property
    def line(self) -> str:
        """One line for a terminal: outcome, probe, what happened, and the fix when it failed."""
        text = (DIFFERS_PREFIX + self.detail) if self.outcome is Outcome.DIFFERS else self.detail
        if self.fix:
            text += f" | fix: {self.fix}"
        return f"{self.outcome.value.upper():<8} {self.probe:<17} {' '.join(text.split())}"

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"probe": self.probe, "outcome": self.outcome.value, "detail": self.detail}
        if self.outcome is Outcome.DIFFERS:
            body["detail"] = DIFFERS_PREFIX + self.detail
        if self.fix:
            body["fix"] = self.fix
        return body


def brief(text: object, limit: int = 200) -> str:
    """A service's message cut to ``limit`` characters, so each result stays one readable line."""
    value = " ".join(str(text).split())
    return value if len(value) <= limit else value[: limit - 1] + "\u2026"


def ok(probe: str, detail: str) -> ProbeResult:
    return ProbeResult(probe, Outcome.OK, detail)


def failed(probe: str, detail: str, fix: str) -> ProbeResult:
    return ProbeResult(probe, Outcome.FAILED, detail, fix)


def warning(probe: str, detail: str, fix: str) -> ProbeResult:
    return ProbeResult(probe, Outcome.WARNING, detail, fix)


def differs(probe: str, detail: str) -> ProbeResult:
    return ProbeResult(probe, Outcome.DIFFERS, detail)


def skipped(probe: str, why: str) -> ProbeResult:
    return ProbeResult(probe, Outcome.SKIPPED, why)


@dataclass(frozen=True, slots=True)
class DoctorReport:
    tenant: str
    source: str
    results: tuple[ProbeResult, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        """True when no probe failed (``warning``, ``differs`` and ``skipped`` do not fail a run)."""
        return not any(r.outcome is Outcome.FAILED for r in self.results)

    def result(self, probe: str) -> ProbeResult:
        return next(r for r in self.results if r.probe == probe)

    def counts(self) -> dict[str, int]:
        return {o.value: sum(1 for r in self.results if r.outcome is o) for o in Outcome}

    def summary_line(self) -> str:
        c = self.counts()
        verdict = "nothing failed" if self.ok else "something failed"
        return (
            f"doctor {self.tenant} ({self.source}): {c['ok']} ok, {c['failed']} failed, {c['warning']} warning"
            f"{'' if c['warning'] == 1 else 's'}, {c['differs']} differ, {c['skipped']} skipped in "
            f"{self.seconds:.1f} s: {verdict}"
        )

    def lines(self) -> list[str]:
        return [r.line for r in self.results] + [self.summary_line()]

    def to_json(self) -> dict[str, Any]:
        return {
            "tenantId": self.tenant,
            "source": self.source,
            "ok": self.ok,
            "counts": self.counts(),
            "seconds": round(self.seconds, 3),
            "results": [r.to_json() for r in self.results],
        }


def ordered(results: Iterable[ProbeResult], order: Sequence[str]) -> tuple[ProbeResult, ...]:
    """The results in report ``order`` (``shared.doctor.sources.PROBE_ORDER``); a probe not in it comes last."""
    rank = {name: i for i, name in enumerate(order)}
    return tuple(sorted(results, key=lambda r: rank.get(r.probe, len(rank))))


@dataclass
class Budget:
    """The run's deadline; probes ask what is left before starting something slow."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        return self.clock() - self.started

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def exhausted(self, reserve: float = 0.0) -> bool:
        return self.remaining() <= reserve

    def why_skipped(self) -> str:
        return f"the time budget of {self.seconds:g} s was used up (give a longer --timeout / timeoutSeconds)"
