"""Timer schedules: NCRONTAB evaluation (expected values from NCrontab's own test cases, re-derived), the five-field
form, TimeSpans, and the host's refusal message."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from durable_local.host.schedules import (
    ConstantSchedule,
    CronSchedule,
    ScheduleError,
    parse_cron,
    parse_schedule,
    parse_timespan,
)


def _at(text: str) -> datetime:
    return datetime.strptime(text, "%d/%m/%Y %H:%M:%S")


@pytest.mark.parametrize(
    ("start", "expression", "expected"),
    [
        ("01/01/2003 00:00:00", "* * * * *", "01/01/2003 00:01:00"),
        ("31/12/2003 23:59:00", "* * * * *", "01/01/2004 00:00:00"),
        ("28/02/2004 23:59:00", "* * * * *", "29/02/2004 00:00:00"),
        ("01/01/2003 00:00:00", "45 * * * * *", "01/01/2003 00:00:45"),
        ("01/01/2003 00:00:49", "45-47,48,49 * * * * *", "01/01/2003 00:01:45"),
        ("01/01/2003 00:00:57", "2/5 * * * * *", "01/01/2003 00:01:02"),
        ("24/02/2021 09:50:35", "* 0-1 10 * * *", "24/02/2021 10:00:00"),
        ("01/01/2003 00:57:00", "2/5 * * * *", "01/01/2003 01:02:00"),
        ("01/01/2003 00:57:30", "9 2/5 * * * *", "01/01/2003 01:02:09"),
        ("20/12/2003 10:00:00", " * 3/4 * * *", "20/12/2003 11:00:00"),
        ("07/01/2003 00:00:00", "30  *  1 * *", "01/02/2003 00:30:00"),
        ("31/01/2000 00:00:00", "0 0 15,30,31 * *", "15/02/2000 00:00:00"),
        ("30/04/2000 00:00:00", "0 0 15,30,31 * *", "15/05/2000 00:00:00"),
        ("01/12/2003 05:00:00", "10 * * 6 *", "01/06/2004 00:10:00"),
        ("01/07/2002 05:00:00", "10 * * February,April-Jun *", "01/02/2003 00:10:00"),
        (
            "11/03/1988 14:23:00",
            "20 * * january,FeB,Mar,april,May,JuNE,July,Augu,SEPT-October,Nov,DECEM *",
            "11/03/1988 15:20:00",
        ),
        ("26/06/2003 10:00:00", "30 6 * * sunday", "29/06/2003 06:30:00"),
        ("30/06/2003 18:15:00", "15 18 * * Mon", "07/07/2003 18:15:00"),
        # Day of month AND day of week (NCrontab), not "either" as in Vixie cron.
        ("01/01/2003 12:00:00", "45 16 1 * Mon", "01/09/2003 16:45:00"),
        ("29/02/2000 12:01:00", "1 12 29 2 *", "29/02/2004 12:01:00"),
        ("01/01/2000 14:40:00", "40 14/1 * * *", "01/01/2000 15:40:00"),
        ("01/01/2003 00:00:00", "0 5-2 * * * *", "01/01/2003 00:02:00"),  # a range written backwards is swapped
    ],
)
def test_next_occurrences_match_ncrontab(start: str, expression: str, expected: str) -> None:
    schedule = parse_cron(expression)
    assert schedule is not None
    assert schedule.next_after(_at(start)) == _at(expected)


def test_the_next_occurrence_is_strictly_after_the_base_in_whole_seconds() -> None:
    schedule = parse_cron("* * * * * *")
    assert schedule is not None
    assert schedule.next_after(datetime(2024, 1, 1, 12, 0, 0, 500000)) == datetime(2024, 1, 1, 12, 0, 1)


def test_an_impossible_date_never_occurs() -> None:
    schedule = parse_cron("0 0 0 30 2 *")
    assert schedule is not None and schedule.next_after(datetime(2024, 1, 1)) is None


@pytest.mark.parametrize(
    "expression",
    ["", "* * * *", "* * * * * * *", "60 * * * * *", "* 60 * * * *", "* * 24 * * *", "* * * 0 * *", "* * * * 13 *",
     "* * * * * 7", "* * * * * Funday", "a * * * *", "*/x * * * *", ",1 * * * *", "1- * * * *"],
)  # fmt: skip
def test_invalid_cron_expressions(expression: str) -> None:
    assert parse_cron(expression) is None


def test_timespans_as_dotnet_reads_them() -> None:
    assert parse_timespan("00:00:30") == timedelta(seconds=30)
    assert parse_timespan("01:30") == timedelta(hours=1, minutes=30)
    assert parse_timespan("1.02:03:04.5") == timedelta(days=1, hours=2, minutes=3, seconds=4.5)
    assert parse_timespan("2") == timedelta(days=2)
    assert parse_timespan("24:00:00") is None and parse_timespan("00:60:00") is None and parse_timespan("x") is None


def test_parse_schedule_tries_cron_then_timespan_then_refuses() -> None:
    cron = parse_schedule("0 */5 * * * *")
    assert isinstance(cron, CronSchedule) and cron.has_seconds
    five = parse_schedule("*/5 * * * *")
    assert isinstance(five, CronSchedule) and not five.has_seconds and five.seconds == {0}
    constant = parse_schedule("00:00:10")
    assert isinstance(constant, ConstantSchedule) and constant.interval == timedelta(seconds=10)
    with pytest.raises(ScheduleError) as refused:
        parse_schedule("every minute")
    assert str(refused.value) == (
        "The schedule expression 'every minute' was not recognized as a valid cron expression or timespan string."
    )


def test_sub_minute_schedules_turn_the_monitor_off() -> None:
    now = datetime(2024, 1, 1, 12, 0, 0)
    assert parse_schedule("*/10 * * * * *").occurs_more_than_once_a_minute(now)
    assert not parse_schedule("0 * * * * *").occurs_more_than_once_a_minute(now)
    assert not parse_schedule("*/10 5 * * * *").occurs_more_than_once_a_minute(now)
    assert parse_schedule("00:00:30").occurs_more_than_once_a_minute(now)
    assert not parse_schedule("00:01:00").occurs_more_than_once_a_minute(now)
