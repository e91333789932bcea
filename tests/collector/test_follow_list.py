"""``list_follows`` over pages of the management API: every follower once, a page never cut, passes and other
instances skipped, the continuation handed back; and the tokens a list answer carries."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus

from http_api.follow_service import list_follows
from http_api.instance_pages import ListingError, next_token, valid_token
from shared import names
from shared.follow.plan import status
from shared.follow.state import FollowSpec, FollowState
from shared.requests.run_options import RunOptions

NOW = datetime(2024, 11, 18, 12, tzinfo=UTC)


def follower(number: int) -> DurableOrchestrationStatus:
    follow = f"follow-graph-{number:012x}"
    spec = FollowSpec(follow, "contoso.onmicrosoft.com", "graph", {}, RunOptions(max_concurrency=2), NOW,
                      timedelta(hours=1), timedelta(minutes=15), timedelta(minutes=90))  # fmt: skip
    published = status(spec, FollowState(covered_until=NOW), NOW)
    return DurableOrchestrationStatus(
        name=names.ORCHESTRATOR_FOLLOW, instanceId=follow, createdTime="2024-11-18T12:00:00Z",
        runtimeStatus="Running", customStatus=published,
    )  # fmt: skip


def other(instance: str, name: str = names.ORCHESTRATOR_COLLECT) -> DurableOrchestrationStatus:
    return DurableOrchestrationStatus(
        name=name, instanceId=instance, createdTime="2024-11-18T12:00:00Z", runtimeStatus="Completed"
    )


class Pages:
    """The hub's ``follow-`` instances in pages of ``top``, the token being the next index."""

    def __init__(self, instances: list[DurableOrchestrationStatus]) -> None:
        self.instances = instances
        self.calls: list[tuple[int, str | None]] = []

    async def page(self, *, prefix: str, top: int, token: str | None) -> tuple[list[Any], str | None]:
        assert prefix == "follow-"
        self.calls.append((top, token))
        start = int(token or 0)
        end = start + top
        return self.instances[start:end], (str(end) if end < len(self.instances) else None)


class NoClient:
    async def get_status(self, *args: Any) -> Any:
        raise AssertionError("every listed follower had published its status")


def listed(pages: Pages, **kwargs: Any) -> dict[str, Any]:
    answer = asyncio.run(list_follows(NoClient(), pages, NOW, **kwargs))  # type: ignore[arg-type]
    assert answer.status == 200, answer.body
    return answer.body  # type: ignore[no-any-return]


def test_every_follower_is_listed_across_pages_and_others_are_skipped() -> None:
    instances: list[DurableOrchestrationStatus] = []
    for n in range(250):
        instances.append(follower(n))
        instances.append(other(f"follow-graph-{n:012x}-20241118-p0"))  # its pass
    instances.append(other("follow-graph-notafollower", names.ORCHESTRATOR_FOLLOW))  # not a follower's id
    pages = Pages(instances)
    body = listed(pages)
    assert len(body["follows"]) >= 100 and body["continuationToken"] is not None
    seen = [f["followId"] for f in body["follows"]]
    token = body["continuationToken"]
    while token is not None:
        more = listed(pages, token=token)
        seen += [f["followId"] for f in more["follows"]]
        token = more["continuationToken"]
    assert sorted(seen) == [f"follow-graph-{n:012x}" for n in range(250)], "each follower once, none missed"


def test_a_small_page_asks_for_small_pages_and_never_cuts_one() -> None:
    pages = Pages([follower(n) for n in range(10)])
    body = listed(pages, top=3)
    assert [f["followId"] for f in body["follows"]] == [f"follow-graph-{n:012x}" for n in range(3)]
    assert body["continuationToken"] == "3" and pages.calls == [(3, None)]
    passes_first = Pages([other("follow-graph-000000000000-20241118-p0")] * 5 + [follower(0), follower(1)])
    body = listed(passes_first, top=2)
    assert [f["followId"] for f in body["follows"]] == ["follow-graph-000000000000", "follow-graph-000000000001"]
    assert body["continuationToken"] is None and len(passes_first.calls) == 4, "it reads on until it has two"


def test_a_failing_list_call_is_a_502_naming_it() -> None:
    class Broken:
        async def page(self, **_: Any) -> tuple[list[Any], str | None]:
            raise ListingError("the Durable list API answered 500: boom")

    answer = asyncio.run(list_follows(NoClient(), Broken(), NOW))  # type: ignore[arg-type]
    assert answer.status == 502 and "500: boom" in answer.body["error"]["message"]


def test_continuation_tokens() -> None:
    assert next_token(None) is None and next_token("") is None and next_token("bnVsbA==") is None
    assert next_token("eyJhIjoxfQ==") == "eyJhIjoxfQ=="
    assert valid_token("eyJhIjoxfQ==") and not valid_token("a b") and not valid_token("x" * 4097)
    assert not valid_token("ab\ncd") and not valid_token("é")
