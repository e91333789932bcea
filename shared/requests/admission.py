"""Which orchestration inputs may run: every execution's input is sealed, and only the collector can seal.

The task hub's system key (which every ``statusQueryGetUri`` carries) lets its holder start any orchestrator with any
input through the Durable HTTP API, e.g. ``collect_orchestrator`` with ``max_concurrency`` 40 and the tenant budget
off. So an input runs only with a **seal**: an HMAC-SHA256 under ``COLLECTOR_BUDGET_SECRET`` of the instance id and
the digest of the input (everything in it but the seal). The HTTP starters seal what they start (a collection, a
retry link, a follower); an orchestration seals what it hands on (its next execution's input at ``continue_as_new``,
a settle pass, a follower's passes) through the seal activity, since orchestrators read no settings. Every
execution's first step is the admission activity: it checks the seal against the digest the orchestrator computed
of its own input, and derives the run's budget token (``shared.budget.token``), which is therefore never in an
input. A refused input runs nothing and ends ``Failed`` with the reason.

The digest is the SHA-256 of the input's canonical JSON (keys sorted, no spaces, ASCII), which is the same whether
the starter computes it before sending or the orchestrator after the Durable extension stored and handed back the
input: the extension keeps strings as they are (``DateParseHandling.None``, Azure/azure-functions-durable-extension
#1440) and numbers by value.

Without a secret (a local run) nothing is sealed or checked, as nothing is authenticated on the budget either.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any

from shared.budget.token import collection_token, is_run_id
from shared.models import JsonDict

SEAL = "seal"
"""The input's key for its seal."""
RUN = "run"
"""The input's key for its run id: a new one per run (a start, a settle pass, a follower's pass), kept across the
run's executions; the run's budget token is derived from it."""
_PURPOSE = b"ual-collector/orchestration-input/v1\n"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

REFUSED_UNSEALED = "not_admitted"
"""The failure kind of an input that was refused."""


def digest(instance_id: str, payload: JsonDict) -> str:
    """SHA-256 (hex) of the instance id and the input's canonical JSON, its seal left out."""
    body = {key: value for key, value in payload.items() if key != SEAL}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(instance_id.encode() + b"\n" + text.encode()).hexdigest()


def seal_of(secret: str, instance_id: str, input_digest: str) -> str:
    """The seal of an input of ``instance_id`` whose digest is ``input_digest`` ("" without a secret)."""
    if not secret:
        return ""
    message = _PURPOSE + instance_id.encode() + b"\n" + input_digest.encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sealed(secret: str, instance_id: str, payload: JsonDict) -> JsonDict:
    """``payload`` with its seal, for ``instance_id`` (unchanged without a secret)."""
    seal = seal_of(secret, instance_id, digest(instance_id, payload))
    return {**payload, SEAL: seal} if seal else {k: v for k, v in payload.items() if k != SEAL}


def admit(secret: str, request: Any) -> JsonDict:
    """The admission activity's answer to ``{"instance", "digest", "seal", "owner", "run"}``: ``admitted`` and the
    run's ``budgetToken``, or the ``reason`` it was refused."""
    if not isinstance(request, dict):
        return refusal("the admission request is not an object")
    instance, found, seal = request.get("instance"), request.get("digest"), request.get("seal")
    owner, run = request.get("owner"), request.get("run") or ""
    if not isinstance(instance, str) or not isinstance(found, str) or not _HEX64.fullmatch(found):
        return refusal("the admission request names no instance or digest")
    if not isinstance(owner, str) or not isinstance(run, str) or (run and not is_run_id(run)):
        return refusal("the input names no collection or a malformed run id")
    if secret:
        if not isinstance(seal, str) or not seal:
            return refusal(
                "the input carries no seal: only the collector's own starters (POST /api/collections, retry-failed, "
                "POST /api/follows) may start this orchestrator; nothing was run"
            )
        if not hmac.compare_digest(seal_of(secret, instance, found), seal):
            return refusal(
                f"the input's seal does not match it for instance {instance}: it was changed after the collector "
                "sealed it, started under another id, or sealed under another COLLECTOR_BUDGET_SECRET; nothing was "
                "run"
            )
        if not run:
            return refusal("the input carries no run id; nothing was run")
    return {"admitted": True, "budgetToken": collection_token(secret, owner, run)}


def unsealed_reason(secret: str, instance_id: str, payload: Any) -> str | None:
    """Why an instance's stored input is not one the collector sealed (None: it is, or there is no secret). The HTTP
    routes that act on what an input says (retry-failed reads its options, cancel its collection, a follower's restart
    its state) check it first: an input someone started directly is never taken for the collector's."""
    if not secret:
        return None
    if not isinstance(payload, dict):
        return "it has no input object"
    seal = payload.get(SEAL)
    if not isinstance(seal, str) or not seal:
        return "its input carries no seal (it was not started by this app's API, or by a version before seals)"
    if not hmac.compare_digest(seal_of(secret, instance_id, digest(instance_id, payload)), seal):
        return "its input's seal does not match it (changed, started under another id, or sealed with another key)"
    return None


def refusal(message: str) -> JsonDict:
    return {"admitted": False, "reason": {"kind": REFUSED_UNSEALED, "message": message}}


def seal_request(instance_id: str, payload: JsonDict) -> JsonDict:
    """What an orchestration sends the seal activity for an input it hands on: the instance and the digest only."""
    return {"instance": instance_id, "digest": digest(instance_id, payload)}


def seal_answer(secret: str, request: Any) -> JsonDict:
    """The seal activity's answer: ``{"seal"}`` for the request's instance and digest."""
    if not isinstance(request, dict):
        raise ValueError("the seal request is not an object")
    instance, found = request.get("instance"), request.get("digest")
    if not isinstance(instance, str) or not isinstance(found, str) or not _HEX64.fullmatch(found):
        raise ValueError("the seal request names no instance or digest")
    return {"seal": seal_of(secret, instance, found)}
