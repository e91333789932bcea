"""Token acquisition per audience, and the two claims the doctor reads from an app-only token.

The claims (``tid``, the tenant GUID; ``roles``, the application permissions consented) are read from the JWT payload
without verifying it: they only phrase notes and fixes, the APIs decide. The token itself never leaves this module.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from shared.audit.auth import TokenProvider
from shared.doctor.fixes import failure
from shared.doctor.model import ProbeResult, ok
from shared.errors import CollectorError


@dataclass(frozen=True, slots=True)
class TokenFacts:
    tenant_guid: str | None
    roles: tuple[str, ...] | None
    """None when the token's payload could not be read (an opaque or encrypted token)."""


def token_facts(token: str) -> TokenFacts:
    payload = _payload(token)
    if payload is None:
        return TokenFacts(None, None)
    tid = payload.get("tid")
    roles = payload.get("roles", [])
    return TokenFacts(
        tid if isinstance(tid, str) and tid else None,
        tuple(str(r) for r in roles) if isinstance(roles, list) else None,
    )


def _payload(token: str) -> dict[str, Any] | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    segment = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        value = json.loads(base64.urlsafe_b64decode(segment.encode("ascii")))
    except (ValueError, UnicodeError):
        return None
    return value if isinstance(value, dict) else None


def probe_token(
    probe: str, tokens: TokenProvider, scope: str, *, authority: str, wanted: str
) -> tuple[ProbeResult, TokenFacts | None]:
    """Acquire an app-only token for ``scope``; the detail lists the roles it carries and says when ``wanted``
    (a role name or prefix) is not among them.

    A token without ``wanted`` is asked for once more, fresh: the provider is process-wide, and a token minted before
    the permission was granted keeps its roles until it expires (about an hour), so the doctor run right after the
    tenant steps would otherwise report a consent that is already given."""
    try:
        facts = token_facts(tokens.get_token(scope))
        if facts.roles is not None and not any(r.startswith(wanted) for r in facts.roles):
            tokens.invalidate(scope)
            facts = token_facts(tokens.get_token(scope))
    except CollectorError as exc:
        return failure(probe, exc, endpoint=authority, endpoint_setting="AUDIT_AUTHORITY_HOST"), None
    if facts.roles is None:
        return ok(probe, f"app-only token for {scope} acquired (its claims are not readable here)"), facts
    roles = ", ".join(facts.roles) or "none"
    detail = f"app-only token for {scope} acquired (tenant {facts.tenant_guid or 'unknown'}; roles: {roles})"
    if not any(r.startswith(wanted) for r in facts.roles):
        detail += f"; the token carries no {wanted}* role: the permission or its admin consent is missing"
    return ok(probe, detail), facts
