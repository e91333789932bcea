"""An execution's first step and an input's last: admission and sealing (``shared.requests.admission``).

Both are activity calls (the activities read the secret; orchestrator code never does), so both replay from history
like any other step. ``admit`` is the first thing every execution of the collection and follower orchestrators does;
``sealed`` is how an orchestration hands on an input (continue-as-new, a settle pass, a follower's pass).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import azure.durable_functions as df

from shared import names
from shared.models import JsonDict
from shared.redact import redact
from shared.requests import admission


@dataclass(frozen=True, slots=True)
class Admitted:
    ok: bool
    budget_token: str = ""
    reason: JsonDict = field(default_factory=dict)

    def refused_output(self, **fields: Any) -> JsonDict:
        """The output of an execution that was refused: ``Failed`` with the reason, nothing run."""
        return {"status": "Failed", "reason": self.reason, "failures": [], "records": 0, **fields}


def admit(context: df.DurableOrchestrationContext, payload: JsonDict, owner: str) -> Generator[Any, Any, Admitted]:
    """Ask the admission activity whether this execution's input may run; ``owner``: the collection its budget
    token names ("" for a follower, which holds no slot itself)."""
    request = {
        "instance": context.instance_id,
        "digest": admission.digest(context.instance_id, payload),
        "seal": payload.get(admission.SEAL) or "",
        "owner": owner,
        "run": payload.get(admission.RUN) or "",
    }
    try:
        answer = yield context.call_activity(names.ACTIVITY_ADMIT, request)
    except Exception as exc:  # the activity itself failed: nothing is admitted on a failure
        message = f"the admission activity failed: {redact(str(exc))[:300]}"
        return Admitted(False, reason={"kind": admission.REFUSED_UNSEALED, "message": message})
    if isinstance(answer, dict) and answer.get("admitted") is True:
        return Admitted(True, str(answer.get("budgetToken") or ""))
    reason = answer.get("reason") if isinstance(answer, dict) else None
    if not isinstance(reason, dict):
        reason = {"kind": admission.REFUSED_UNSEALED, "message": "the admission activity gave no answer"}
    return Admitted(False, reason=reason)


def sealed(
    context: df.DurableOrchestrationContext, instance_id: str, payload: JsonDict
) -> Generator[Any, Any, JsonDict]:
    """``payload`` sealed for ``instance_id`` by the seal activity (which holds the secret)."""
    answer = yield context.call_activity(names.ACTIVITY_SEAL, admission.seal_request(instance_id, payload))
    seal = str(answer.get("seal") or "") if isinstance(answer, dict) else ""
    body = {key: value for key, value in payload.items() if key != admission.SEAL}
    return {**body, admission.SEAL: seal} if seal else body


def collection_of(payload: JsonDict) -> str:
    """The collection an input names (read before the input is admitted: only as the owner of its budget token)."""
    spec = payload.get("spec")
    found = spec.get("collectionId") if isinstance(spec, dict) else None
    return found if isinstance(found, str) else ""


def new_run(context: df.DurableOrchestrationContext) -> str:
    """A run id for a run this orchestration hands on (deterministic: the SDK's replay-safe uuid)."""
    return str(context.new_uuid()).replace("-", "")
