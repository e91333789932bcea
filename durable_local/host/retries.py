"""Retry policies of the Functions host and the ``RetryContext`` a function receives (``docs/local-host.md``, "Retry
policies").

Re-implemented from (read, not copied):

* azure-webjobs-sdk ``FunctionExecutorExtensions.TryExecuteAsync``: every invocation (triggered, HTTP, a manual run)
  goes through one loop; after a failure, if the function has a policy and fewer than ``MaxRetryCount`` retries ran
  (``-1``: no limit), ``RetryCount`` grows by one, ``Exception`` is the failure, the loop waits the policy's delay
  (logging "Waiting for `...` before retrying function execution...") and invokes again; after the last retry it logs
  "Function execution failed after 'n' retries." and the invocation fails. A host shutting down ends the wait and
  the loop with the last failure.
* ``FixedDelayRetryAttribute`` (the same delay each time) and ``ExponentialBackoffRetryAttribute`` over
  ``RandomizedExponentialBackoffStrategy``: the minimum first, then minimum + (0.8..1.2) x 2^(n-1) x minimum while
  that stays under the maximum, then the maximum; the strategy lives for one invocation's retries.
* The Python worker (``loader.build_retry_protos``): ``@app.retry`` settings reach the host as ``fixed_delay`` or
  the protobuf enum label ``exponential_backoff`` (anything else fails indexing), ``int(max_retry_count)``, and
  intervals read with ``time.strptime(..., '%H:%M:%S')``. The host then validates (``Utility.ValidateRetryOptions``):
  ``max_retry_count`` of -1 or more, the fixed delay, or both intervals with the minimum not above the maximum.
* host.json ``retry`` (``ScriptJobHostOptions.Retry``, bound by .NET configuration: keys in any case, the strategy
  ``fixedDelay`` or ``exponentialBackoff`` in any case or as its number, ``ExponentialBackoff`` when absent)
  applies to every function without its own policy (``ScriptHost.CreateTypeAttributes``; the method's attribute
  wins).
* ``RetryContext`` as the host sends it (``ScriptInvocationContextExtensions.SetRetryContext``) and the worker
  builds it (``dispatcher._get_context``): without a policy the host sends none and the worker reads the protobuf
  defaults (0, 0, an empty exception), so ``context.retry_context`` is never None.
"""

from __future__ import annotations

import logging
import random
import re
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from azure.functions._abc import RetryContext as _RetryContextABC
from azure.functions._abc import RpcException as _RpcExceptionABC

logger = logging.getLogger(__name__)

Strategy = Literal["FixedDelay", "ExponentialBackoff"]
RANDOMIZATION_FACTOR = 0.2
"""``RandomizedExponentialBackoffStrategy.RandomizationFactor``."""
_HMS = re.compile(r"(\d{1,2}):(\d{1,2}):(\d{1,2})")


class RetryPolicyError(ValueError):
    """A retry policy the worker cannot send or the host refuses (the message names the setting and the rule)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``RetryOptions`` of one function."""

    strategy: Strategy
    max_retry_count: int
    """Retries after the first attempt; -1 retries without limit."""
    delay_interval: timedelta | None = None
    minimum_interval: timedelta | None = None
    maximum_interval: timedelta | None = None

    def allows_retry(self, retry_number: int) -> bool:
        """Whether retry number ``retry_number`` (1-based) may run."""
        return self.max_retry_count == -1 or retry_number <= self.max_retry_count

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The waits before retry 1, 2, ... of one invocation, in seconds."""
        if self.strategy == "FixedDelay":
            assert self.delay_interval is not None
            while True:
                yield self.delay_interval.total_seconds()
        assert self.minimum_interval is not None and self.maximum_interval is not None
        minimum, maximum = self.minimum_interval.total_seconds(), self.maximum_interval.total_seconds()
        draw = rng or random.Random()
        current, exponent = 0.0, 0
        while True:
            if current != maximum:
                backoff = minimum
                if exponent > 0:
                    factor = draw.uniform(1.0 - RANDOMIZATION_FACTOR, 1.0 + RANDOMIZATION_FACTOR)
                    backoff += factor * 2.0 ** (exponent - 1) * minimum
                if backoff < maximum:
                    current, exponent = backoff, exponent + 1
                else:
                    current = maximum
            yield current


def policy_from_decorator(settings: Mapping[str, Any]) -> RetryPolicy:
    """The policy of an ``@app.retry`` setting (``get_settings_dict("retry_policy")``), as the worker sends it and
    the host accepts it."""
    strategy = settings.get("strategy")
    if strategy not in ("fixed_delay", "exponential_backoff"):
        raise RetryPolicyError(
            f"retry strategy {strategy!r} must be fixed_delay or exponential_backoff (as written: the Python worker "
            "sends anything else as the protobuf enum label, which fails indexing)"
        )
    try:
        count = int(settings.get("max_retry_count"))  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise RetryPolicyError(
            f"retry max_retry_count {settings.get('max_retry_count')!r} is not an integer (the worker reads it with "
            "int())"
        ) from exc
    if strategy == "fixed_delay":
        policy = RetryPolicy("FixedDelay", count, delay_interval=_hms(settings, "delay_interval"))
    else:
        policy = RetryPolicy(
            "ExponentialBackoff",
            count,
            minimum_interval=_hms(settings, "minimum_interval"),
            maximum_interval=_hms(settings, "maximum_interval"),
        )
    return _validated(policy)


def policy_from_host_json(section: Mapping[str, Any]) -> RetryPolicy:
    """The policy of host.json's ``retry`` section, bound as .NET configuration binds ``RetryOptions``."""
    values = {str(key).lower(): value for key, value in section.items()}
    strategy_text = str(values.get("strategy", "ExponentialBackoff")).strip()
    names: dict[str, Strategy] = {
        "exponentialbackoff": "ExponentialBackoff",
        "0": "ExponentialBackoff",
        "fixeddelay": "FixedDelay",
        "1": "FixedDelay",
    }
    strategy = names.get(strategy_text.lower())
    if strategy is None:
        raise RetryPolicyError(f"retry.strategy {values.get('strategy')!r} must be fixedDelay or exponentialBackoff")
    if values.get("maxretrycount") is None:
        raise RetryPolicyError("retry.maxRetryCount is required (Value cannot be null. (Parameter 'MaxRetryCount'))")
    count = _configuration_int(values["maxretrycount"], "retry.maxRetryCount")
    intervals = {
        key: _configuration_timespan(values.get(key.lower()), f"retry.{key}")
        for key in ("delayInterval", "minimumInterval", "maximumInterval")
    }
    if strategy == "FixedDelay":
        if intervals["delayInterval"] is None:
            raise RetryPolicyError("retry.delayInterval is required with fixedDelay (Parameter 'DelayInterval')")
        return _validated(RetryPolicy(strategy, count, delay_interval=intervals["delayInterval"]))
    for key in ("minimumInterval", "maximumInterval"):
        if intervals[key] is None:
            raise RetryPolicyError(
                f"retry.{key} is required with exponentialBackoff (Parameter '{key[0].upper()}{key[1:]}')"
            )
    return _validated(
        RetryPolicy(
            strategy,
            count,
            minimum_interval=intervals["minimumInterval"],
            maximum_interval=intervals["maximumInterval"],
        )
    )


def _validated(policy: RetryPolicy) -> RetryPolicy:
    """``RetryAttribute`` and ``RandomizedExponentialBackoffStrategy.ValidateIntervals``."""
    if not -1 <= policy.max_retry_count <= 2**31 - 1:
        raise RetryPolicyError(f"retry max_retry_count {policy.max_retry_count} must be -1 or more (-1: no limit)")
    if policy.strategy == "ExponentialBackoff":
        assert policy.minimum_interval is not None and policy.maximum_interval is not None
        if policy.minimum_interval > policy.maximum_interval:
            raise RetryPolicyError("retry: The minimumInterval must not be greater than the maximumInterval.")
    return policy


def _hms(settings: Mapping[str, Any], key: str) -> timedelta:
    """``convert_to_seconds``: ``time.strptime(text, '%H:%M:%S')`` (hours 0-23, whole seconds)."""
    text = settings.get(key)
    found = _HMS.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise RetryPolicyError(
            f"retry {key} {text!r} must be a time of day HH:MM:SS (the worker reads it with "
            "time.strptime(..., '%H:%M:%S'))"
        )
    hours, minutes, seconds = (int(part) for part in found.groups())
    if hours > 23 or minutes > 59 or seconds > 61:
        raise RetryPolicyError(f"retry {key} {text!r} is out of range for HH:MM:SS")
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


def _configuration_int(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise RetryPolicyError(f"{name} {value!r} is not an integer")
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise RetryPolicyError(f"{name} {value!r} is not an integer") from exc


def _configuration_timespan(value: object, name: str) -> timedelta | None:
    """A .NET ``TimeSpan`` as configuration binds it: ``[d.]hh:mm[:ss[.fffffff]]`` or a number of days."""
    if value is None:
        return None
    text = str(value).strip()
    found = re.fullmatch(r"(-)?(?:(\d+)\.)?(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,7}))?)?", text)
    if found is None:
        if re.fullmatch(r"\d+", text):
            return timedelta(days=int(text))
        raise RetryPolicyError(f"{name} {value!r} is not a TimeSpan (hh:mm:ss)")
    sign, days, hours, minutes, seconds, fraction = found.groups()
    span = timedelta(
        days=int(days or 0),
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds or 0),
        microseconds=int((fraction or "0").ljust(7, "0")) / 10,
    )
    if int(hours) > 23 or int(minutes) > 59 or int(seconds or 0) > 59:
        raise RetryPolicyError(f"{name} {value!r} is not a TimeSpan (hh:mm:ss)")
    if sign:
        raise RetryPolicyError(f"{name} {value!r}: The TimeSpan must not be negative.")
    return span


def timespan_text(seconds: float) -> str:
    """A ``TimeSpan`` as .NET prints it (``00:00:01``, ``00:00:01.8123456``, ``1.02:00:00``)."""
    ticks = round(seconds * 10_000_000)
    days, ticks = divmod(ticks, 864_000_000_000)
    hours, ticks = divmod(ticks, 36_000_000_000)
    minutes, ticks = divmod(ticks, 600_000_000)
    whole, fraction = divmod(ticks, 10_000_000)
    text = f"{hours:02d}:{minutes:02d}:{whole:02d}" + (f".{fraction:07d}" if fraction else "")
    return f"{days}.{text}" if days else text


class RpcException(_RpcExceptionABC):
    """The previous attempt's failure in ``RetryContext`` (protobuf ``RpcException``: empty strings when unset)."""

    def __init__(self, message: str = "", stack_trace: str = "", source: str = "") -> None:
        self._message = message
        self._stack_trace = stack_trace
        self._source = source

    @property
    def message(self) -> str:
        return self._message

    @property
    def stack_trace(self) -> str:
        return self._stack_trace

    @property
    def source(self) -> str:
        return self._source


class RetryContext(_RetryContextABC):
    """``context.retry_context``: ``retry_count``, ``max_retry_count`` and the previous failure, as ``exception``
    (``azure.functions.RetryContext``) and ``rpc_exception`` (the field name of the worker's own class)."""

    def __init__(self, retry_count: int = 0, max_retry_count: int = 0, exception: RpcException | None = None) -> None:
        self._retry_count = retry_count
        self._max_retry_count = max_retry_count
        self._exception = exception or RpcException()

    @property
    def retry_count(self) -> int:
        return self._retry_count

    @property
    def max_retry_count(self) -> int:
        return self._max_retry_count

    @property
    def exception(self) -> RpcException:
        return self._exception

    @property
    def rpc_exception(self) -> RpcException:
        return self._exception

    def __repr__(self) -> str:
        return f"RetryContext(retry_count={self._retry_count}, max_retry_count={self._max_retry_count})"


def failure_of(function_name: str, exc: BaseException) -> RpcException:
    """What the host passes on as the previous failure: its formatted ``FunctionInvocationException`` over the
    worker's ``Result: Failure / Exception: / Stack:`` text (without the .NET class names and frames)."""
    stack = "".join(traceback.format_tb(exc.__traceback__))
    message = (
        f"Exception while executing function: Functions.{function_name} ---> Result: Failure\n"
        f"Exception: {type(exc).__name__}: {exc}\nStack: {stack}"
    )
    return RpcException(message=message, stack_trace=stack)


class Attempts:
    """One invocation's retry loop, step by step: ``context`` for the attempt about to run, ``failed`` after it
    failed (the wait before the next attempt, or None to give up)."""

    def __init__(self, function_name: str, policy: RetryPolicy | None, rng: random.Random | None = None) -> None:
        self.function_name = function_name
        self.policy = policy
        self._retry_count = 0
        self._previous: RpcException | None = None
        self._delays = policy.delays(rng) if policy is not None else None

    @property
    def context(self) -> RetryContext:
        if self.policy is None:
            return RetryContext()
        return RetryContext(self._retry_count, self.policy.max_retry_count, self._previous)

    def failed(self, exc: BaseException) -> float | None:
        if self.policy is None or self._delays is None:
            return None
        if not self.policy.allows_retry(self._retry_count + 1):
            logger.error("Function execution failed after '%d' retries.", self._retry_count)
            return None
        self._retry_count += 1
        self._previous = failure_of(self.function_name, exc)
        delay = next(self._delays)
        logger.info(
            "Waiting for `%s` before retrying function execution. Next attempt: '%d'. Max retry count: '%d'.",
            timespan_text(delay),
            self._retry_count,
            self.policy.max_retry_count,
        )
        return delay


def wait_unless_stopping(delay: float, stopping: Any | None) -> bool:
    """Wait ``delay`` seconds on a ``threading.Event``-like ``stopping``; True when it was set (stop retrying)."""
    if stopping is None:
        time.sleep(delay)
        return False
    return bool(stopping.wait(delay))
