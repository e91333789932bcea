"""The fast history-timestamp parser gives the SDK what dateutil gives it, and installs only where it was checked."""

from __future__ import annotations

import importlib
import json
import types
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from dateutil.parser import ParserError
from dateutil.parser import parse as dateutil_parse
from hypothesis import example, given
from hypothesis import strategies as st

from shared.hosting import sdk_timestamps
from shared.hosting.sdk_timestamps import InstallOutcome, install, parse_history_timestamp, uninstall
from shared.settings import Settings

# The SDK formats datetimes it derives from history (timer fireAt, new_uuid seeds) with this pattern.
SDK_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC))


def dotnet_forms(moment: datetime, extra_digit: int) -> list[str]:
    """How .NET writes a UTC DateTime in history: round-trip "o" (7 digits), Newtonsoft's trimmed "FFFFFFF", none."""
    # .NET always writes four year digits ("yyyy"); glibc's %Y writes year 31 as "31" (hypothesis found 0031-02-01,
    # which dateutil then read as 2031-02-01 -> "day is out of range"): format the year by hand.
    base = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S")
    seven = f"{moment.microsecond:06d}{extra_digit}"
    trimmed = seven.rstrip("0")
    return [f"{base}.{seven}Z", f"{base}.{trimmed}Z" if trimmed else f"{base}Z", f"{base}Z"]


def assert_same(text: str) -> None:
    fast, slow = parse_history_timestamp(text), dateutil_parse(text)
    assert fast == slow, text
    assert fast.utcoffset() == slow.utcoffset(), text
    assert fast.isoformat() == slow.isoformat(), text
    assert fast.strftime(SDK_FORMAT) == slow.strftime(SDK_FORMAT), text
    assert fast.strftime("%z %Z") == slow.strftime("%z %Z"), text
    assert fast.timestamp() == slow.timestamp(), text


@given(moment=moments, extra=st.integers(0, 9))
@example(moment=datetime(31, 2, 1, tzinfo=UTC), extra=0)  # a year below 1000, as CI once drew
def test_every_form_the_extension_writes_parses_to_the_same_datetime(moment: datetime, extra: int) -> None:
    for text in dotnet_forms(moment, extra):
        assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        "2024-11-18T12:00:00.1234567Z",
        "2024-11-18T12:00:00.9999999Z",  # truncated, never rounded up into the next second
        "2024-11-18T12:00:00Z",
        "2024-11-18T12:00:00.1Z",
        "0001-01-01T00:00:00Z",  # DateTime.MinValue, which the extension writes for unset times
        "9999-12-31T23:59:59.9999999Z",  # DateTime.MaxValue
        "2024-02-29T23:59:59.5Z",
    ],
)
def test_edge_timestamps_parse_the_same(text: str) -> None:
    assert_same(text)


@given(moment=moments, extra=st.integers(0, 9))
@example(moment=datetime(2024, 11, 18, 12, 0, 0, 120000, tzinfo=UTC), extra=0)  # "...00.12", "...00.1" without its 2
def test_a_timestamp_without_a_zone_is_left_to_dateutil(moment: datetime, extra: int) -> None:
    # Not a form the extension writes: dateutil reads it as a naive datetime, and so must the SDK. Only text ending in
    # "Z" may take the fast path (which attaches UTC); cutting the last character of a zone-less text often still
    # leaves valid ISO ("...00.12" -> "...00.1"), so a check on the shape alone would return the wrong instant.
    for text in dotnet_forms(moment, extra):
        zoneless = text.removesuffix("Z")
        fast, slow = parse_history_timestamp(zoneless), dateutil_parse(zoneless)
        assert slow.tzinfo is None
        assert (fast, fast.tzinfo) == (slow, None), zoneless


@pytest.mark.parametrize(
    "text", ["2024-11-18T12:00:00+01:00", "2024-11-18T12:00:00.5-08:00", "2024-11-18T12:00:00", "Nov 18 2024 12:00 UTC"]
)
def test_other_forms_are_left_to_dateutil(text: str) -> None:
    fast, slow = parse_history_timestamp(text), dateutil_parse(text)
    assert fast == slow
    assert type(fast.tzinfo) is type(slow.tzinfo)  # the very same path, not an imitation of it


@pytest.mark.parametrize("text", ["2024-11-18T25:00:00Z", "2024-11-18T12:00:00+01:00Z", "not a dateZ"])
def test_what_fromisoformat_refuses_gets_dateutils_answer(text: str) -> None:
    try:
        expected: object = dateutil_parse(text)
    except (ParserError, ValueError) as exc:
        expected = type(exc)
    try:
        got: object = parse_history_timestamp(text)
    except (ParserError, ValueError) as exc:
        got = type(exc)
    assert got == expected


class FakeSdkModule(types.ModuleType):
    dt_parse: Callable[[str], datetime]


@pytest.fixture
def sdk_module() -> Iterator[FakeSdkModule]:
    module = FakeSdkModule("HistoryEvent")
    module.dt_parse = dateutil_parse
    yield module


def test_install_swaps_the_parser_of_a_verified_sdk_and_uninstall_restores_it(sdk_module: FakeSdkModule) -> None:
    outcome = install(version=lambda: "1.7.0", module=lambda: sdk_module)
    assert outcome is InstallOutcome.INSTALLED
    assert sdk_module.dt_parse is parse_history_timestamp
    assert install(version=lambda: "1.7.0", module=lambda: sdk_module) is InstallOutcome.ALREADY_INSTALLED
    uninstall(module=lambda: sdk_module)
    assert sdk_module.dt_parse is dateutil_parse


@pytest.mark.parametrize("version", ["1.8.0", "2.0.0", "1.2.8", None])
def test_an_unverified_sdk_version_is_left_alone(sdk_module: FakeSdkModule, version: str | None) -> None:
    assert install(version=lambda: version, module=lambda: sdk_module) is InstallOutcome.UNVERIFIED_VERSION
    assert sdk_module.dt_parse is dateutil_parse


def test_a_module_that_changed_shape_is_left_alone(sdk_module: FakeSdkModule) -> None:
    sdk_module.dt_parse = datetime.fromisoformat  # type: ignore[assignment]  # some other parser: not ours to replace
    assert install(version=lambda: "1.7.0", module=lambda: sdk_module) is InstallOutcome.UNEXPECTED_LAYOUT
    assert sdk_module.dt_parse == datetime.fromisoformat
    del sdk_module.dt_parse
    assert install(version=lambda: "1.7.0", module=lambda: sdk_module) is InstallOutcome.UNEXPECTED_LAYOUT


def test_the_setting_turns_it_off(sdk_module: FakeSdkModule) -> None:
    assert install(enabled=False, version=lambda: "1.7.0", module=lambda: sdk_module) is InstallOutcome.DISABLED
    assert sdk_module.dt_parse is dateutil_parse
    assert Settings.from_env({"COLLECTOR_FAST_SDK_TIMESTAMPS": "false"}).fast_sdk_timestamps is False
    assert Settings.from_env({}).fast_sdk_timestamps is True


def test_the_installed_sdk_is_a_verified_version() -> None:
    # When a new SDK release is installed this fails: read its HistoryEvent module, then add the version.
    assert sdk_timestamps._sdk_version() in sdk_timestamps.VERIFIED_SDK_VERSIONS


def test_the_app_installs_it_for_the_real_sdk() -> None:
    import function_app  # noqa: F401  (importing the app is what installs it)

    sdk_history = importlib.import_module(sdk_timestamps.HISTORY_EVENT_MODULE)

    assert sdk_history.dt_parse is parse_history_timestamp


def test_a_whole_collection_replays_to_the_same_decisions_with_either_parser() -> None:
    """Every episode of a real collection: the SDK's output JSON is identical with dateutil and with the fast path."""
    from shared.sinks.memory import MemorySink
    from tests.collector.fakes import FakeQueryApi, synthetic
    from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
    from tests.collector.test_orchestrator_replay import START, graph_activities, payload

    handle = orchestrator_handle()  # imports the app, which installs the fast parser
    sdk_history = importlib.import_module(sdk_timestamps.HISTORY_EVENT_MODULE)
    compared: list[int] = []

    def both(context_json: str) -> str:
        sdk_history.dt_parse = dateutil_parse
        try:
            slow = handle(context_json)
        finally:
            sdk_history.dt_parse = parse_history_timestamp
        fast = handle(context_json)
        assert json.loads(fast) == json.loads(slow)
        compared.append(len(json.loads(context_json)["history"]))
        return fast

    api = FakeQueryApi(synthetic(START, hours=12, per_hour=20), polls_until_done=2)
    driver = ReplayDriver(both, graph_activities(api, MemorySink()), seed=3)
    driver.start(payload("graph", hours=12, k=3, m=5, poll_interval_seconds=7.25))
    result = driver.run()
    assert result.status.name == "COMPLETED"
    assert driver.executions > 1 and len(compared) >= driver.episodes and max(compared) > 50
