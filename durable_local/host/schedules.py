"""Timer trigger schedules as the Functions host reads them: NCRONTAB expressions and TimeSpans.

Rules (re-implemented from the sources named, see ``docs/local-host.md``, "Timer triggers"):

* ``TimerSchedule.Create`` (azure-webjobs-sdk-extensions, ``Extensions/Timers/Scheduling/TimerSchedule.cs``): a
  ``%SETTING%`` schedule is resolved from the app settings first; the text is tried as a cron expression, then as a
  .NET ``TimeSpan`` (a constant interval); anything else is refused with "The schedule expression '...' was not
  recognized as a valid cron expression or timespan string.".
* ``CronSchedule.TryCreate``: five fields are a classic crontab (minutes first, second 0); any other count is parsed
  with seconds first, which needs exactly six.
* NCrontab (``CrontabSchedule``, ``CrontabField``, ``CrontabFieldImpl``): fields are ``*``, ``n``, ``a-b`` (swapped
  when ``a > b``), ``*/s``, ``a-b/s``, ``n/s`` (``n`` to the field's maximum) and comma lists of those; months and days
  of week also by name, any case-insensitive prefix of the English name (``Jan``, ``Augu``, ``mon``); day of week 0-6,
  Sunday = 0. A day must match the day-of-month **and** the day-of-week field (NCrontab checks both, where Vixie cron
  takes either). The next occurrence is strictly after the base time, in whole seconds.

Times are the machine's local wall-clock time (the host uses ``DateTime.Now``; on Azure that is UTC unless
``WEBSITE_TIME_ZONE`` is set). Daylight-saving adjustments of ``CronSchedule`` are not reproduced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_SEARCH_YEARS = 400
"""How far ahead an occurrence is searched (the Gregorian calendar repeats every 400 years): none = never."""


class ScheduleError(ValueError):
    """A schedule the host refuses; the message is the host's."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()


_SECOND = _Field("Second", 0, 59)
_MINUTE = _Field("Minute", 0, 59)
_HOUR = _Field("Hour", 0, 23)
_DAY = _Field("Day", 1, 31)
_MONTH = _Field("Month", 1, 12, _MONTHS)
_DAY_OF_WEEK = _Field("DayOfWeek", 0, 6, _DAYS)
_FIELDS = (_SECOND, _MINUTE, _HOUR, _DAY, _MONTH, _DAY_OF_WEEK)
_EVERY = tuple(frozenset(range(f.low, f.high + 1)) for f in _FIELDS)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed NCRONTAB expression."""

    expression: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    days_of_week: frozenset[int]
    has_seconds: bool

    adjust_for_dst = True
    """``TimerInfo.Schedule.AdjustForDST`` as the host serializes a cron schedule."""

    def next_after(self, base: datetime) -> datetime | None:
        """The first occurrence strictly after ``base`` (whole seconds), or None if there is none."""
        moment = base.replace(microsecond=0) + timedelta(seconds=1)
        limit = base.replace(microsecond=0) + timedelta(days=366 * _SEARCH_YEARS)
        while moment < limit:
            if moment.month not in self.months:
                moment = _first_of_next_month(moment)
            elif moment.day not in self.days or _weekday(moment) not in self.days_of_week:
                moment = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0)
            elif moment.hour not in self.hours:
                moment = (moment + timedelta(hours=1)).replace(minute=0, second=0)
            elif moment.minute not in self.minutes:
                moment = (moment + timedelta(minutes=1)).replace(second=0)
            elif moment.second not in self.seconds:
                moment += timedelta(seconds=1)
            else:
                return moment
        return None

    def occurs_more_than_once_a_minute(self, now: datetime) -> bool:
        """``TimerSchedule.ShouldDisableScheduleMonitor``: every field from minutes up is ``*`` and more than one
        occurrence falls in the next minute."""
        if (self.minutes, self.hours, self.days, self.months, self.days_of_week) != _EVERY[1:]:
            return False
        first = self.next_after(now)
        second = None if first is None else self.next_after(first)
        return second is not None and second < now + timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class ConstantSchedule:
    """A ``TimeSpan`` schedule (``ConstantSchedule``): every ``interval`` after the previous invocation."""

    expression: str
    interval: timedelta

    adjust_for_dst = False

    def next_after(self, base: datetime) -> datetime | None:
        return base + self.interval

    def occurs_more_than_once_a_minute(self, now: datetime) -> bool:
        return self.interval < timedelta(minutes=1)


Schedule = CronSchedule | ConstantSchedule


def parse_schedule(expression: str) -> Schedule:
    """A cron expression, else a TimeSpan, else the host's error (the expression is already resolved)."""
    cron = parse_cron(expression)
    if cron is not None:
        return cron
    interval = parse_timespan(expression)
    if interval is not None:
        if interval <= timedelta(0):
            raise ScheduleError(
                f"The schedule expression '{expression}' is a TimeSpan of {interval}: the local host needs a positive "
                "interval (the Functions host would invoke the function in a tight loop)."
            )
        return ConstantSchedule(expression, interval)
    raise ScheduleError(
        f"The schedule expression '{expression}' was not recognized as a valid cron expression or timespan string."
    )


def parse_cron(expression: str) -> CronSchedule | None:
    """NCrontab ``TryParse`` with ``IncludingSeconds`` unless the expression has five fields; None if invalid."""
    tokens = [token for token in expression.split(" ") if token]
    has_seconds = len(tokens) != 5
    if len(tokens) != (6 if has_seconds else 5):
        return None
    kinds = _FIELDS if has_seconds else _FIELDS[1:]
    try:
        values = [_parse_field(token, kind) for token, kind in zip(tokens, kinds, strict=True)]
    except ValueError:
        return None
    if not has_seconds:
        values.insert(0, frozenset({0}))
    seconds, minutes, hours, days, months, days_of_week = values
    return CronSchedule(expression, seconds, minutes, hours, days, months, days_of_week, has_seconds)


def _parse_field(text: str, kind: _Field) -> frozenset[int]:
    values: set[int] = set()
    # CrontabFieldImpl.InternalParse: a comma only splits when it is not the first character.
    parts = text.split(",") if text.find(",") > 0 else [text]
    for part in parts:
        values |= _parse_part(part, kind)
    return frozenset(values)


def _parse_part(text: str, kind: _Field) -> set[int]:
    if not text:
        raise ValueError("A crontab field value cannot be empty.")
    step: int | None = None
    slash = text.find("/")
    if slash > 0:
        step = _dotnet_int(text[slash + 1 :])
        text = text[:slash]
    if text == "*":
        return set(range(kind.low, kind.high + 1, max(step or 1, 1)))
    dash = text.find("-")
    if dash > 0:
        first, last = _value(text[:dash], kind), _value(text[dash + 1 :], kind)
        first, last = min(first, last), max(first, last)
    else:
        first = _value(text, kind)
        last = first if step is None else kind.high
    for value in (first, last):
        if not kind.low <= value <= kind.high:
            raise ValueError(f"{value} is out of range for the [{kind.name}] field")
    return set(range(first, last + 1, max(step or 1, 1)))


def _value(text: str, kind: _Field) -> int:
    if not text:
        raise ValueError("A crontab field value cannot be empty.")
    if text[0] in "0123456789":
        return _dotnet_int(text)
    folded = text.casefold()
    for index, name in enumerate(kind.names):
        if name.casefold().startswith(folded):
            return kind.low + index
    raise ValueError(f"'{text}' is not a valid [{kind.name}] crontab field value")


def _dotnet_int(text: str) -> int:
    """``int.Parse`` with the invariant culture: optional surrounding white space and sign, ASCII digits."""
    if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) is None:
        raise ValueError(f"'{text}' is not an integer")
    return int(text)


_TIMESPAN = re.compile(
    r"\s*(?P<sign>-)?(?:(?P<days_only>\d+)|(?:(?P<days>\d+)\.)?(?P<h>\d+):(?P<m>\d+)(?::(?P<s>\d+)(?:\.(?P<f>\d{1,7}))?)?)\s*"
)


def parse_timespan(text: str) -> timedelta | None:
    """.NET ``TimeSpan.TryParse`` (invariant): ``d``, ``[d.]hh:mm[:ss[.fffffff]]``, optional ``-``; None if invalid."""
    match = _TIMESPAN.fullmatch(text)
    if match is None:
        return None
    if match["days_only"] is not None:
        value = timedelta(days=int(match["days_only"]))
    else:
        hours, minutes, seconds = int(match["h"]), int(match["m"]), int(match["s"] or 0)
        if hours > 23 or minutes > 59 or seconds > 59:
            return None
        fraction = int((match["f"] or "0").ljust(7, "0")) // 10  # 100 ns ticks to microseconds
        value = timedelta(
            days=int(match["days"] or 0), hours=hours, minutes=minutes, seconds=seconds, microseconds=fraction
        )
    return -value if match["sign"] else value


def _first_of_next_month(moment: datetime) -> datetime:
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return moment.replace(year=year, month=month, day=1, hour=0, minute=0, second=0)


def _weekday(moment: datetime) -> int:
    """Sunday = 0, as .NET ``DayOfWeek``."""
    return (moment.weekday() + 1) % 7
