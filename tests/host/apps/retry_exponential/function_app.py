"""A timer with an exponential back-off retry policy, written to behave as Microsoft's Python v2 retry sample
(SOURCE.md)."""

from __future__ import annotations

import logging

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.timer_trigger(schedule="*/1 * * * * *", arg_name="mytimer", run_on_startup=False, use_monitor=False)
@app.retry(
    strategy="exponential_backoff", max_retry_count="3", minimum_interval="00:00:01", maximum_interval="00:00:02"
)
def mytimer(mytimer: func.TimerRequest, context: func.Context) -> None:
    attempt = context.retry_context
    logging.info("Current retry count: %s", attempt.retry_count)
    if attempt.retry_count != attempt.max_retry_count:
        raise RuntimeError("This is a retryable exception")
    logging.info("Max retries of %s for function %s has been reached", attempt.max_retry_count, context.function_name)
