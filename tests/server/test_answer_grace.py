"""The only approver disconnects while a permission request waits, and comes back with its
cursor within ``answer_grace``: it gets the same request and its answer reaches the agent
(issue 25, B). Over WebSocket and Streamable HTTP here; the bridge in
``tests/bridge/test_reconnect.py``, several nodes in ``tests/store/test_failover.py``, the
session page in ``tests/web/test_reconnect.py``; the policies in
``tests/sessions/test_answer_grace.py``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hub.settings import Settings
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent
from tests.server.http_client import HttpAcp, http_acp

pytestmark = pytest.mark.anyio

TURN = "say before\npermission\nsay after"


def permission_requests(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("method") == "session/request_permission"]


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(
        str((u["update"].get("content") or {}).get("text", ""))
        for u in updates
        if u["update"].get("sessionUpdate") == "agent_message_chunk"
    )


def records(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u["update"] for u in updates if u["update"].get("sessionUpdate") == "_hub_permission"]


def cursor(client: AcpClient | HttpAcp, sid: str) -> dict[str, Any]:
    meta = client.session_updates(sid)[-1]["_meta"]["acp-hub"]
    return {"type": "_hub_after", "epoch": meta["epoch"], "seq": meta["seq"]}


AWAY = [
    pytest.param(2.0, 10.0, id="2s"),
    # Twenty seconds away, with a grace longer still (a slow test: run first).
    pytest.param(20.0, 30.0, id="20s", marks=pytest.mark.slow),
]
"""How long the only approver stays away, and the ``answer_grace`` it comes back within."""


@pytest.mark.parametrize(("away_s", "grace_s"), AWAY)
async def test_websocket_the_only_approver_resumes_and_its_answer_reaches_the_agent(
    away_s: float, grace_s: float
) -> None:
    async with running_hub([scripted_agent()], Settings(answer_grace=grace_s)) as hub:
        async with acp_client(hub.url) as first:
            sid = await first.new_session()
            await first.prompt(sid, TURN)
            await first.wait_for(lambda: bool(permission_requests(first.requests)))
            (offered,) = permission_requests(first.requests)
            after = cursor(first, sid)
        # Gone (a reload, a lost network): nobody may answer; the request waits.
        await anyio.sleep(away_s)  # the time the client is away, not a wait for an event
        async with acp_client(hub.url) as back:
            await back.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": after}
            )
            await back.wait_for(lambda: bool(permission_requests(back.requests)))
            (again,) = permission_requests(back.requests)
            assert again["params"]["subject"] == offered["params"]["subject"]
            assert again["params"]["_meta"] == offered["params"]["_meta"]  # the same permissionId
            # What it missed while away: the record marked waiting, then (it is back) not.
            missed = records(back.session_updates(sid))
            assert [r["status"] for r in missed] == ["pending", "pending"]
            assert missed[0]["waiting"]["reason"] == "no_answerer"
            assert missed[1]["waiting"] is None
            await back.answer(
                again["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            await back.wait_for(lambda: back.idle_count(sid) >= 1)
            assert said(back.session_updates(sid)) == "permission: selected allowafter"
            final = records(back.session_updates(sid))[-1]
            assert final["status"] == "resolved"


@pytest.mark.parametrize(("away_s", "grace_s"), AWAY)
async def test_streamable_http_the_only_approver_resumes_and_its_answer_reaches_the_agent(
    away_s: float, grace_s: float
) -> None:
    async with running_hub([scripted_agent()], Settings(answer_grace=grace_s)) as hub:
        async with http_acp(hub.http_acp) as first:
            sid = (await first.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
            first.open_stream(sid)
            await first.wait_for(lambda: first.statuses.get(sid) == 200)
            await first.call("session/prompt", {"sessionId": sid, "prompt": [text(TURN)]})
            await first.wait_for(lambda: bool(permission_requests(first.requests)))
            (offered,) = permission_requests(first.requests)
            after = cursor(first, sid)
        # `http_acp` ended the connection (DELETE): its session detached.
        await anyio.sleep(away_s)  # the time the client is away, not a wait for an event
        async with http_acp(hub.http_acp) as back:
            back.open_stream(sid)
            await back.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": after}
            )
            await back.wait_for(lambda: bool(permission_requests(back.requests)))
            (again,) = permission_requests(back.requests)
            assert again["params"]["subject"] == offered["params"]["subject"]
            await back.answer(
                again["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}, sid
            )
            await back.wait_for(lambda: "after" in said(back.session_updates(sid)))
            assert said(back.session_updates(sid)) == "permission: selected allowafter"


async def test_the_grace_ending_with_nobody_back_cancels_the_request_visibly() -> None:
    async with (
        running_hub([scripted_agent()], Settings(answer_grace=1)) as hub,
        acp_client(hub.url, role="viewer") as viewer,
    ):
        async with acp_client(hub.url) as first:
            sid = await first.new_session()
            await viewer.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            await first.prompt(sid, TURN)
            await first.wait_for(lambda: bool(permission_requests(first.requests)))
        await viewer.wait_for(lambda: viewer.idle_count(sid) >= 1)
        statuses = [(r["status"], r.get("reason")) for r in records(viewer.session_updates(sid))]
        assert statuses[-1] == ("cancelled", "no_answerer")
        assert said(viewer.session_updates(sid)) == "beforepermission: cancelledafter"


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


async def test_attaching_with_pending_only_gets_the_waiting_request_again() -> None:
    async with running_hub([scripted_agent()], Settings(answer_grace=10)) as hub:
        async with acp_client(hub.url) as first:
            sid = await first.new_session()
            await first.prompt(sid, TURN)
            await first.wait_for(lambda: bool(permission_requests(first.requests)))
            (offered,) = permission_requests(first.requests)
        async with acp_client(hub.url) as back:
            await back.call("session/attach", {"sessionId": sid, "historyPolicy": "pending_only"})
            await back.wait_for(lambda: bool(permission_requests(back.requests)))
            (again,) = permission_requests(back.requests)
            assert again["params"]["subject"] == offered["params"]["subject"]
            await back.answer(
                again["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            await back.wait_for(lambda: "after" in said(back.session_updates(sid)))
            assert said(back.session_updates(sid)).endswith("permission: selected allowafter")


async def test_an_elicitation_waits_for_its_user_to_reconnect() -> None:
    async with running_hub([scripted_agent()], Settings(answer_grace=10)) as hub:
        async with acp_client(hub.url) as first:
            sid = await first.new_session()
            await first.prompt(sid, "elicit\nsay after")
            await first.wait_for(
                lambda: any(r["method"] == "elicitation/create" for r in first.requests)
            )
            after = cursor(first, sid)
        async with acp_client(hub.url) as back:
            await back.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": after}
            )
            await back.wait_for(
                lambda: any(r["method"] == "elicitation/create" for r in back.requests)
            )
            (asked,) = [r for r in back.requests if r["method"] == "elicitation/create"]
            await back.answer(asked["id"], {"action": "accept", "content": {"name": "Ada"}})
            await back.wait_for(lambda: "after" in said(back.session_updates(sid)))
            assert said(back.session_updates(sid)) == 'elicit: accept {"name": "Ada"}after'


async def test_under_the_owner_policy_the_owner_comes_back_and_answers() -> None:
    # A driver stays connected and prompts, but only owners may answer: the owner leaves with
    # the request pending, the request waits for it (the driver does not get it), and the
    # owner's answer after its return reaches the agent.
    async with (
        running_hub([scripted_agent()], Settings(answer_grace=10)) as hub,
        acp_client(hub.url, role="driver") as driver,
    ):
        async with acp_client(hub.url) as owner:
            sid = await owner.new_session()
            await owner.call("_hub/set_policy", {"sessionId": sid, "permission": "owner"})
            await driver.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            await driver.prompt(sid, TURN)
            await owner.wait_for(lambda: bool(permission_requests(owner.requests)))
            (offered,) = permission_requests(owner.requests)
            await owner.wait_for(lambda: bool(records(owner.session_updates(sid))))
            after = cursor(owner, sid)
        await driver.wait_for(
            lambda: any(
                (r.get("waiting") or {}).get("reason") == "no_answerer"
                for r in records(driver.session_updates(sid))
            )
        )
        async with acp_client(hub.url) as back:
            await back.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": after}
            )
            await back.wait_for(lambda: bool(permission_requests(back.requests)))
            (again,) = permission_requests(back.requests)
            assert again["params"]["subject"] == offered["params"]["subject"]
            await back.answer(
                again["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            await driver.wait_for(lambda: driver.idle_count(sid) >= 1)
        assert said(driver.session_updates(sid)) == "beforepermission: selected allowafter"
        assert records(driver.session_updates(sid))[-1]["status"] == "resolved"
        assert not permission_requests(driver.requests)  # never the driver's to answer
