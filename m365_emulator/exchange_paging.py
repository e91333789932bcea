"""How InvokeCommand hands a cmdlet call's rows out: HTTP pages with an ``@odata.nextLink``, and the anchor check.

A ``Search-UnifiedAuditLog`` call takes the next block of ``ResultSize`` rows from its session. The service sends
that block in pages of its own size (``ExchangeSettings.page_size``; ``Prefer: odata.maxpagesize`` is not honoured)
and each page but the last carries an ``@odata.nextLink``. Public clients POST that link with the same body again
(CIPP ``New-ExoRequest.ps1``, GreyCorbel ExoHelper ``Invoke-ExoCommand.ps1``), so this emulator requires exactly
that: a GET is a 405, a different or missing body a 400.

Page tokens are stateless: they carry where the page starts in the record stream, its first ``ResultIndex`` and
how many rows of the block remain, so reading a page again returns the same rows. A block's first call is not
repeatable: it advances the session.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from m365_emulator.config import ExchangeSettings, TenantSpec
from m365_emulator.synth import Cursor
from m365_emulator.wire import Reply, Request, api_error

SYSTEM_MAILBOX = "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}"


@dataclass(frozen=True)
class PageToken:
    session_id: str
    first_index: int
    remaining: int
    """Rows of the block from this page on."""
    result_count: int
    cursor: Cursor
    body_hash: str
    more: bool = False
    """The call's ``moreRecordsAvailable`` (sent on every page of the call when that knob is on)."""
    block: ShuffledBlock | None = None
    """Set when the call's whole block was shuffled before it was cut into pages: where to rebuild it from."""

    def encode(self) -> str:
        block = self.block.to_list() if self.block is not None else None
        raw = json.dumps(
            [
                self.session_id, self.first_index, self.remaining, self.result_count, list(self.cursor),
                self.body_hash, self.more, block,
            ]
        )  # fmt: skip
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> PageToken:
        values = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        session_id, first, remaining, count, cursor, body_hash, more = values[:7]
        block = ShuffledBlock.from_list(values[7]) if len(values) > 7 and values[7] is not None else None
        cursor_at = (int(cursor[0]), int(cursor[1]))
        return cls(str(session_id), int(first), int(remaining), int(count), cursor_at, body_hash, bool(more), block)


@dataclass(frozen=True)
class ShuffledBlock:
    """A call's block whose rows were shuffled as a whole before being cut into pages (``unsorted_across_pages``):
    the stream cursor before its first row, its first ``ResultIndex``, its length and where the next page starts."""

    start: Cursor | None
    first_index: int
    length: int
    offset: int

    def to_list(self) -> list[Any]:
        return [list(self.start) if self.start is not None else None, self.first_index, self.length, self.offset]

    @classmethod
    def from_list(cls, data: list[Any]) -> ShuffledBlock:
        start = (int(data[0][0]), int(data[0][1])) if data[0] is not None else None
        return cls(start, int(data[1]), int(data[2]), int(data[3]))


def body_hash(body: bytes) -> str:
    """A stable digest of the request's CmdletInput (key order does not matter)."""
    try:
        cmdlet = json.loads(body or b"{}").get("CmdletInput")
    except (json.JSONDecodeError, AttributeError):
        cmdlet = None
    return hashlib.sha256(json.dumps(cmdlet, sort_keys=True).encode()).hexdigest()[:16]


def page_size(settings: ExchangeSettings, seed: int, key: str, first_index: int) -> int:
    """Rows in the page that starts at ``first_index``: fixed, or a stable draw per page in "mix" mode."""
    if settings.page_size_mode != "mix":
        return max(1, settings.page_size)
    rng = random.Random(f"{seed}:{key}:{first_index}")
    return rng.choice((1000, 5000, rng.randint(1, 5000)))


def anchor_problem(request: Request, spec: TenantSpec, settings: ExchangeSettings) -> Reply | None:
    """A reply for a wrong ``X-AnchorMailbox`` (what a misrouted request gets), or None when it routes."""
    if not settings.check_anchor:
        return None
    value = request.headers.get("x-anchormailbox", "")
    kind, _, rest = value.partition(":")
    mailbox, _, domain = rest.partition("@")
    targets = {(settings.anchor_domain or spec.domain).casefold()}
    if settings.anchor_accepts_tenant_id:
        targets.add(spec.tenant_id.casefold())
    if kind.upper() == "APP" and mailbox.casefold() == SYSTEM_MAILBOX.casefold() and domain.casefold() in targets:
        return None
    if settings.anchor_error == "stale":
        return api_error(503, "MailboxInfoStale", "Mailbox info is stale.", request=request)
    message = f"The x-anchor mailbox '{value}' does not match the target of the request."
    return api_error(400, "ErrorIncorrectRoutingHint", message, request=request)


def role_denied(request: Request, client_id: str, settings: ExchangeSettings, role: str) -> Reply:
    """The app's service principal holds no Exchange role that runs Search-UnifiedAuditLog."""
    text = (
        "[AuthZRequestId=" + hashlib.sha256(client_id.encode()).hexdigest()[:8] + "]"
        "[FailureCategory=AuthZ-CmdletAccessDeniedException] The role assigned to application "
        f"{client_id} isn't supported in this scenario. Please check online documentation for assigning correct "
        "Directory Roles to Azure AD Application for EXO App-Only Authentication."
    )
    if settings.error_style == "plain":
        message = f"{text} Assign the '{role}' (or 'Audit Logs') role to the app's service principal."
        return api_error(403, "AccessDenied", message, request=request)
    reply = api_error(400, "BadRequest", "Error executing cmdlet", request=request)
    error: dict[str, Any] = dict(reply.body["error"])
    error["details"] = [
        {
            "code": "Ex6F9304",
            "target": "",
            "message": f"Ex6F9304|Microsoft.Exchange.Management.Tasks.CmdletAccessDeniedException|{text}",
        }
    ]
    error["innererror"] = {
        "message": "Error executing cmdlet",
        "type": "Microsoft.Exchange.Admin.OData.Core.ODataServiceException",
        "internalException": {
            "message": text,
            "type": "Microsoft.Exchange.Management.Tasks.CmdletAccessDeniedException",
        },
    }
    return Reply(reply.status, {"error": error}, (("X-ExceptionType", "CmdletAccessDeniedException"),))
