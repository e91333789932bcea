"""The admission and seal activities: the only code that checks or makes an orchestration input's seal
(``shared.requests.admission``), since orchestrators read no settings. Thin triggers over pure functions."""

from __future__ import annotations

from typing import Any

import azure.durable_functions as df

from activities import runtime
from shared import names
from shared.models import JsonDict
from shared.requests import admission

bp = df.Blueprint()


@bp.activity_trigger(input_name="request", activity=names.ACTIVITY_ADMIT)  # type: ignore[untyped-decorator]
def admit_activity(request: Any) -> JsonDict:
    """Check an execution's seal; answer ``admitted`` with its run's budget token, or the reason it is refused."""
    return admission.admit(runtime.settings().budget_secret or "", request)


@bp.activity_trigger(input_name="request", activity=names.ACTIVITY_SEAL)  # type: ignore[untyped-decorator]
def seal_activity(request: Any) -> JsonDict:
    """Seal an input an admitted orchestration hands on (its next execution, a settle or follower pass)."""
    return admission.seal_answer(runtime.settings().budget_secret or "", request)
