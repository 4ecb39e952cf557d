"""Arbitration end to end: roles, prompt policies, permission routing, presence, attach.

Real hub on a loopback port, real agent subprocesses (the scripted agent, the TypeScript SDK's
example agent), real WebSocket clients of both protocol versions in every scenario.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import orjson
import pytest

from hub.agents.spec import AgentSpec
from hub.settings import Settings
from tests.peers.paths import ts_agent_js
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent
from tests.support import require_binary

pytestmark = pytest.mark.anyio

FORBIDDEN = -32040
SESSION_BUSY = -32041
NOT_LEASE_HOLDER = -32045
STALE_ANSWER = -32049


# -- reading what a client saw -------------------------------------------------------------------


def hub_updates(client: AcpClient, sid: str, variant: str) -> list[dict[str, Any]]:
    """The updates of ``variant`` a client saw (v1 clients get v2-only ones as ``_hub_v2``)."""
    out = []
    for params in client.session_updates(sid):
        update = params["update"]
        if update.get("sessionUpdate") == "_hub_v2":
            update = update["update"]
        if update.get("sessionUpdate") == variant:
            out.append(update)
    return out


def texts(client: AcpClient, sid: str, prefix: str) -> list[str]:
    """Agent message chunk texts starting with ``prefix`` (the scripted agent's reports)."""
    out = []
    for update in hub_updates(client, sid, "agent_message_chunk"):
        content = update.get("content") or {}
        text = content.get("text") if isinstance(content, dict) else None
        if isinstance(text, str) and text.startswith(prefix):
            out.append(text)
    return out


def said(client: AcpClient, sid: str, fragment: str) -> bool:
    """Whether an agent message the client saw (live chunks or replayed whole) holds it."""
    messages = [
        u
        for u in (p["update"] for p in client.session_updates(sid))
        if str(u.get("sessionUpdate", "")).startswith("agent_message")
    ]
    return fragment in orjson.dumps(messages).decode()


def permission_requests(client: AcpClient) -> list[dict[str, Any]]:
    return [r for r in client.requests if r["method"] == "session/request_permission"]


def records(client: AcpClient, sid: str, permission_id: str) -> list[dict[str, Any]]:
    return [
        u for u in hub_updates(client, sid, "_hub_permission") if u["permissionId"] == permission_id
    ]


def final_record(client: AcpClient, sid: str, permission_id: str) -> dict[str, Any] | None:
    done = [r for r in records(client, sid, permission_id) if r["status"] != "pending"]
    return done[-1] if done else None


def last_permission_id(client: AcpClient, sid: str) -> str:
    pending = [u for u in hub_updates(client, sid, "_hub_permission") if u["status"] == "pending"]
    return str(pending[-1]["permissionId"])


def refusals(client: AcpClient, method: str = "_hub/answer_refused") -> list[dict[str, Any]]:
    return [n["params"] for n in client.notifications if n["method"] == method]


def refusal_count(client: AcpClient) -> int:
    return len(refusals(client))


def client_id(client: AcpClient) -> str:
    return str(client.init_result["_meta"]["acp-hub"]["clientId"])


def states(client: AcpClient, sid: str) -> list[tuple[str, str | None]]:
    return [(u["state"], u.get("stopReason")) for u in hub_updates(client, sid, "state_update")]


def idle_with(client: AcpClient, sid: str, reason: str) -> int:
    return sum(1 for s in states(client, sid) if s == ("idle", reason))


async def wait_count(client: AcpClient, count: Callable[[], int], n: int) -> None:
    await client.wait_for(lambda: count() >= n)


def allow(option: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option}}


async def resume(client: AcpClient, sid: str, **params: Any) -> Any:
    return await client.call("session/resume", {"sessionId": sid, "cwd": "/tmp", **params})


# -- permission races ----------------------------------------------------------------------------


async def race(
    hub_url: str,
    agent_name: str,
    rounds: int,
    prompt: str,
    reports: dict[str, str],
) -> None:
    """Two approvers (v2 and v1) answer every permission request at the same moment, with
    different options; an owner (v2) and a viewer (v1) watch. ``reports`` maps each option
    to the text the agent says when it receives that option."""
    async with (
        acp_client(hub_url, 2, name="owner") as owner,
        acp_client(hub_url, 2, role="approver", name="approver-a") as a,
        acp_client(hub_url, 1, events=True, role="approver", name="approver-b") as b,
        acp_client(hub_url, 1, events=True, role="viewer", name="viewer") as viewer,
    ):
        sid = await owner.new_session(agent_name)
        for client in (a, b, viewer):
            await resume(client, sid)
        for n in range(1, rounds + 1):
            await race_round(n, sid, prompt, reports, owner, a, b, viewer)


async def got_request(client: AcpClient, before: int) -> dict[str, Any]:
    """Wait for the next permission copy ``client`` receives after ``before`` of them."""
    await client.wait_for(lambda: len(permission_requests(client)) > before)
    return permission_requests(client)[-1]


async def sees_final(client: AcpClient, sid: str, pid: str) -> dict[str, Any]:
    """Wait until ``client`` saw permission ``pid`` leave ``pending``; return that record."""
    await client.wait_for(lambda: final_record(client, sid, pid) is not None)
    record = final_record(client, sid, pid)
    assert record is not None
    return record


async def race_round(
    n: int,
    sid: str,
    prompt: str,
    reports: dict[str, str],
    owner: AcpClient,
    a: AcpClient,
    b: AcpClient,
    viewer: AcpClient,
) -> None:
    choice = {client_id(a): "allow", client_id(b): "reject"}
    seen = [len(permission_requests(c)) for c in (owner, a, b)]
    await owner.prompt(sid, prompt)
    owner_copy, copy_a, copy_b = [
        await got_request(c, before) for c, before in zip((owner, a, b), seen, strict=True)
    ]
    async with anyio.create_task_group() as tg:  # both answers leave together
        tg.start_soon(a.answer, copy_a["id"], allow("allow"))
        tg.start_soon(b.answer, copy_b["id"], allow("reject"))
    await owner.wait_for(lambda: owner.idle_count(sid) >= n)
    pid = last_permission_id(owner, sid)
    final = await sees_final(owner, sid, pid)
    assert final["status"] == "resolved", final
    winner = final["resolvedBy"]["clientId"]
    option = choice[winner]
    assert final["outcome"] == {"outcome": "selected", "optionId": option}
    # Exactly one answer reached the agent: the winner's.
    assert texts_count(owner, sid, reports) == n
    assert last_report(owner, sid, reports) == reports[option]
    # Every other copy was withdrawn; the losing answer was refused as stale.
    loser, loser_copy = (b, copy_b) if winner == client_id(a) else (a, copy_a)
    await loser.wait_for(lambda: loser_copy["id"] in loser.cancelled)
    await owner.wait_for(lambda: owner_copy["id"] in owner.cancelled)
    await loser.wait_for(
        lambda: any(
            x["requestId"] == loser_copy["id"] and x["error"]["code"] == STALE_ANSWER
            for x in refusals(loser)
        )
    )
    # Everyone, the viewer too, sees who resolved it.
    for client in (a, b, viewer):
        assert (await sees_final(client, sid, pid))["resolvedBy"]["clientId"] == winner
    assert not permission_requests(viewer)


def texts_count(client: AcpClient, sid: str, reports: dict[str, str]) -> int:
    return sum(
        1
        for u in hub_updates(client, sid, "agent_message_chunk")
        if any(t in str((u.get("content") or {}).get("text", "")) for t in reports.values())
    )


def last_report(client: AcpClient, sid: str, reports: dict[str, str]) -> str:
    for update in reversed(hub_updates(client, sid, "agent_message_chunk")):
        text = str((update.get("content") or {}).get("text", ""))
        for report in reports.values():
            if report in text:
                return report
    raise AssertionError("no report")


@pytest.mark.parametrize("agent_protocol", [1, 2])
async def test_two_approvers_answer_at_once_exactly_one_answer_reaches_the_agent(
    agent_protocol: int,
) -> None:
    async with running_hub([scripted_agent(protocol=agent_protocol)]) as hub:
        await race(
            hub.url,
            "scripted",
            20,
            "permission",
            {"allow": "permission: selected allow", "reject": "permission: selected reject"},
        )


async def test_two_approvers_race_on_the_typescript_sdk_agent() -> None:
    node = require_binary("node")
    agent = AgentSpec(name="ts", command=node, args=(str(ts_agent_js()),))
    async with running_hub([agent]) as hub:
        await race(
            hub.url,
            "ts",
            2,
            "change the configuration",
            {
                "allow": "I've successfully updated the configuration",
                "reject": "I understand you prefer not to make that change",
            },
        )


# -- roles ---------------------------------------------------------------------------------------

MUTATING: list[tuple[str, dict[str, Any], str]] = [
    ("session/prompt", {"prompt": [{"type": "text", "text": "say hi"}]}, "driver"),
    ("session/set_config_option", {"configId": "mode", "value": "code"}, "driver"),
    ("session/set_mode", {"modeId": "code"}, "driver"),
    ("_hub/queue/withdraw", {"queueId": "q-1"}, "driver"),
    ("_hub/lease/request", {}, "driver"),
    ("_hub/lease/release", {}, "driver"),
    ("_hub/lease/grant", {"clientId": "c-x"}, "owner"),
    ("_hub/set_policy", {"prompt": "reject"}, "owner"),
    ("session/close", {}, "owner"),
    ("session/delete", {}, "owner"),
    ("session/new", {"cwd": "/tmp", "mcpServers": []}, "owner"),
    ("_hub/agent_stderr", {}, "owner"),
]


@pytest.mark.parametrize("viewer_version", [1, 2])
async def test_a_viewer_is_refused_every_mutation_and_every_answer(viewer_version: int) -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="approver", name="approver") as approver,
        acp_client(hub.url, viewer_version, events=True, role="viewer", name="viewer") as viewer,
    ):
        sid = await owner.new_session()
        await resume(approver, sid)
        await resume(viewer, sid)
        await owner.prompt(sid, "permission")
        await approver.wait_for(lambda: bool(permission_requests(approver)))
        pid = last_permission_id(owner, sid)
        for method, params, needed in MUTATING:
            with pytest.raises(RpcFailure) as info:
                await viewer.call(method, {"sessionId": sid, **params})
            assert info.value.code == FORBIDDEN, method
            assert f"'{needed}'" in info.value.error["message"], info.value.error
            assert info.value.error["data"]["needed"] == needed
        # session/cancel is a notification: its refusal comes as a notification too.
        await viewer.notify("session/cancel", {"sessionId": sid})
        await viewer.wait_for(lambda: bool(refusals(viewer, "_hub/refused")))
        refused = refusals(viewer, "_hub/refused")[0]
        assert refused["method"] == "session/cancel"
        assert refused["error"]["code"] == FORBIDDEN
        # Every kind of answer, to every id the hub could have used: none counts.
        copy_id = permission_requests(approver)[-1]["id"]
        answers: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": copy_id, "result": allow("allow")},
            {"jsonrpc": "2.0", "id": copy_id + 1, "result": allow("reject")},
            {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}},
            {"jsonrpc": "2.0", "id": 1, "result": {"outcome": {"outcome": "maybe"}}},
            {"jsonrpc": "2.0", "id": 2, "result": "yes"},
            {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "no"}},
        ]
        for answer in answers:
            await viewer.send(answer)
        await viewer.wait_for(lambda: len(refusals(viewer)) >= len(answers))
        for refusal in refusals(viewer):
            assert refusal["error"]["code"] == FORBIDDEN
            assert "'approver'" in refusal["error"]["message"]
        # Nothing reached the agent: the request is still pending, the turn still running.
        assert final_record(owner, sid, pid) is None
        assert not texts(owner, sid, "permission:")
        assert not permission_requests(viewer)
        # The approver's answer is the one that counts; the viewer's cancel never happened.
        await approver.answer(permission_requests(approver)[-1]["id"], allow("reject"))
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert texts(owner, sid, "permission:") == ["permission: selected reject"]
        assert states(owner, sid)[-1] == ("idle", "end_turn")


async def test_a_role_taken_at_attach_is_the_role_in_that_session() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 2, name="second owner") as other,
    ):
        sid = await owner.new_session()
        result = await other.call(
            "session/attach", {"sessionId": sid, "role": "observer", "historyPolicy": "none"}
        )
        assert result["role"] == "viewer"
        with pytest.raises(RpcFailure) as info:
            await other.prompt(sid, "say hi")
        assert info.value.code == FORBIDDEN
        assert "'driver'" in info.value.error["message"]
        # Asking for more than the connection has gives the connection's role, no more.
        async with acp_client(hub.url, 1, events=True, role="approver") as approver:
            result = await approver.call(
                "session/attach", {"sessionId": sid, "role": "controller", "historyPolicy": "none"}
            )
            assert result["role"] == "approver"
            with pytest.raises(RpcFailure) as info:
                await approver.prompt(sid, "say hi")
            assert info.value.code == FORBIDDEN


# -- prompt policies -----------------------------------------------------------------------------


def queue_snapshots(client: AcpClient, sid: str) -> list[list[str]]:
    return [[e["clientId"] for e in u["entries"]] for u in hub_updates(client, sid, "_hub_queue")]


def prompt_senders(client: AcpClient, sid: str) -> list[str]:
    return [u["clientId"] for u in hub_updates(client, sid, "_hub_prompt")]


async def test_three_drivers_prompt_at_once_under_queue() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 2, role="driver", name="d1") as d1,
        acp_client(hub.url, 1, events=True, role="driver", name="d2") as d2,
        acp_client(hub.url, 2, role="driver", name="d3") as d3,
        acp_client(hub.url, 1, events=True, role="viewer", name="viewer") as viewer,
    ):
        sid = await owner.new_session()
        drivers = (d1, d2, d3)
        for client in (*drivers, viewer):
            await resume(client, sid)
        ids: dict[str, int] = {}
        async with anyio.create_task_group() as tg:

            async def send(client: AcpClient) -> None:
                ids[client_id(client)] = await client.start(
                    "session/prompt",
                    {
                        "sessionId": sid,
                        "prompt": [
                            {"type": "text", "text": f"slow 5 60\nsay turn of {client_id(client)}"}
                        ],
                    },
                )

            for client in drivers:
                tg.start_soon(send, client)
        results = {client_id(c): await c.result(ids[client_id(c)]) for c in (d1, d3)}
        await owner.wait_for(lambda: owner.idle_count(sid) >= 3)
        assert await d2.result(ids[client_id(d2)]) == {
            "stopReason": "end_turn"
        }  # v1: its own turn's end
        # The arrival order as the hub saw it: the first started, the others queued in order.
        senders = prompt_senders(owner, sid)
        full = max(queue_snapshots(owner, sid), key=len)
        assert len(full) == 2
        assert senders[1:] == full
        assert sorted(senders) == sorted(client_id(c) for c in drivers)
        for client in (d1, d3):
            meta = results[client_id(client)]["_meta"]["acp-hub"]
            assert meta["queued"] is (client_id(client) in full)
            if meta["queued"]:
                assert meta["queueId"].startswith("q-")
        # One turn at a time: every turn starts after the previous one went idle.
        order = []
        for params in owner.session_updates(sid):
            update = params["update"]
            variant = update["sessionUpdate"]
            if variant == "_hub_prompt":
                order.append(("prompt", update["clientId"]))
            elif variant == "state_update" and update.get("stopReason") is not None:
                order.append(("idle", None))
        assert [kind for kind, _ in order] == ["prompt", "idle"] * 3
        # Each turn's words are its sender's.
        for sender in senders:
            assert said(owner, sid, f"turn of {sender}")
        # Every client saw the queue grow and drain.
        for client in (owner, *drivers, viewer):
            snapshots = queue_snapshots(client, sid)
            assert full in snapshots
            assert snapshots[-1] == []


async def test_a_queued_prompt_is_withdrawn_by_its_sender_only() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, role="owner", name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="driver", name="d2") as d2,
        acp_client(hub.url, 2, role="driver", name="d3") as d3,
    ):
        sid = await owner.new_session()
        await resume(d2, sid)
        await resume(d3, sid)
        await owner.prompt(sid, "slow 20 50")
        first = await d2.start(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "say d2"}]}
        )
        await d2.wait_for(lambda: [client_id(d2)] in queue_snapshots(d2, sid))
        ack = await d3.prompt(sid, "say d3")
        assert ack["_meta"]["acp-hub"]["queued"] is True
        entries = hub_updates(d2, sid, "_hub_queue")[-1]["entries"]
        mine = next(e["queueId"] for e in entries if e["clientId"] == client_id(d2))
        # Another driver cannot withdraw it; its sender can.
        with pytest.raises(RpcFailure) as info:
            await d3.call("_hub/queue/withdraw", {"sessionId": sid, "queueId": mine})
        assert info.value.code == FORBIDDEN
        assert "'owner'" in info.value.error["message"]
        assert await d2.call("_hub/queue/withdraw", {"sessionId": sid, "queueId": mine}) == {}
        with pytest.raises(RpcFailure) as info:
            await d2.result(first)
        assert info.value.code == -32800  # the v1 prompt ends: withdrawn
        await d3.wait_for(lambda: [client_id(d3)] in queue_snapshots(d3, sid))
        await owner.wait_for(lambda: owner.idle_count(sid) >= 2)
        assert prompt_senders(owner, sid) == [client_id(owner), client_id(d3)]
        assert said(owner, sid, "d3")
        assert not said(owner, sid, "d2")
        # A v1 client that cancels its queued prompt request withdraws it too.
        await owner.prompt(sid, "slow 20 50")
        seen = len(queue_snapshots(d2, sid))
        again = await d2.start(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "say d2"}]}
        )
        await d2.wait_for(lambda: [client_id(d2)] in queue_snapshots(d2, sid)[seen:])
        await d2.notify("$/cancel_request", {"requestId": again})
        with pytest.raises(RpcFailure) as info:
            await d2.result(again)
        assert info.value.code == -32800
        await owner.wait_for(lambda: queue_snapshots(owner, sid)[-1] == [])
        await owner.wait_for(lambda: owner.idle_count(sid) >= 3)
        assert not said(owner, sid, "d2")


async def test_reject_policy_answers_busy_clearly() -> None:
    async with (
        running_hub([scripted_agent()], Settings(prompt_policy="reject")) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="driver", name="d1") as d1,
        acp_client(hub.url, 2, role="driver", name="d2") as d2,
    ):
        sid = await owner.new_session()
        await resume(d1, sid)
        await resume(d2, sid)
        assert hub_updates(owner, sid, "_hub_policy")[-1]["prompt"] == "reject"
        await owner.prompt(sid, "slow 10 50")
        for client in (d1, d2):
            with pytest.raises(RpcFailure) as info:
                await client.prompt(sid, "say too early")
            assert info.value.code == SESSION_BUSY
            assert "busy" in info.value.error["message"]
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert await d1.prompt(sid, "say in time") == {"stopReason": "end_turn"}
        assert said(owner, sid, "in time")
        assert not said(owner, sid, "too early")
        assert not any(queue_snapshots(owner, sid))


# -- leases --------------------------------------------------------------------------------------


def lease_events(client: AcpClient, sid: str) -> list[tuple[str | None, str | None]]:
    return [
        ((u["holder"] or {}).get("clientId"), u.get("reason"))
        for u in hub_updates(client, sid, "_hub_lease")
    ]


async def lease_ends(client: AcpClient, sid: str, reason: str) -> None:
    await client.wait_for(lambda: (None, reason) in lease_events(client, sid))


async def refused(code: int, call: Any) -> dict[str, Any]:
    """Await ``call`` and return its error object, which must carry ``code``."""
    with pytest.raises(RpcFailure) as info:
        await call
    assert info.value.code == code, info.value.error
    return info.value.error


async def test_lease_policy_request_release_grant_and_expiry() -> None:
    settings = Settings(prompt_policy="lease", lease_timeout=4.0)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 2, role="driver", name="d1") as d1,
        acp_client(hub.url, 1, events=True, role="driver", name="d2") as d2,
        acp_client(hub.url, 2, role="viewer", name="viewer") as viewer,
    ):
        sid = await owner.new_session()
        for client in (d1, d2, viewer):
            await resume(client, sid)
        one, two = client_id(d1), client_id(d2)
        lease = {"sessionId": sid}
        error = await refused(NOT_LEASE_HOLDER, d1.prompt(sid, "say without the lease"))
        assert "lease" in error["message"]
        assert await d1.call("_hub/lease/request", lease) == {"holder": one}
        await refused(NOT_LEASE_HOLDER, d2.call("_hub/lease/request", lease))
        await refused(NOT_LEASE_HOLDER, d2.prompt(sid, "say not mine"))
        await refused(NOT_LEASE_HOLDER, d2.call("_hub/lease/release", lease))
        await refused(FORBIDDEN, viewer.call("_hub/lease/request", lease))
        await d1.prompt(sid, "say by the holder")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert await d1.call("_hub/lease/release", lease) == {"holder": None}
        # An owner grants it; only to a driver.
        await refused(FORBIDDEN, d1.call("_hub/lease/grant", {**lease, "clientId": two}))
        await refused(
            FORBIDDEN, owner.call("_hub/lease/grant", {**lease, "clientId": client_id(viewer)})
        )
        assert await owner.call("_hub/lease/grant", {**lease, "clientId": two}) == {"holder": two}
        assert await d2.prompt(sid, "say by the grantee") == {"stopReason": "end_turn"}
        # No activity from the holder: the lease expires, and everyone sees it go.
        for client in (owner, d1, d2, viewer):
            await lease_ends(client, sid, "expired")
        await refused(NOT_LEASE_HOLDER, d2.prompt(sid, "say after expiry"))
        assert said(owner, sid, "by the holder")
        assert said(owner, sid, "by the grantee")
        assert not said(owner, sid, "without the lease")
        assert not said(owner, sid, "not mine")
        assert not said(owner, sid, "after expiry")
        changes = [e for e in lease_events(viewer, sid) if e[1] != "renewed"]
        assert changes == [
            (one, "requested"),
            (None, "released"),
            (two, "granted"),
            (None, "expired"),
        ]
        # The holders' prompts and turns renewed their leases.
        assert (one, "renewed") in lease_events(viewer, sid)
        assert (two, "renewed") in lease_events(viewer, sid)


# -- permission routing --------------------------------------------------------------------------


def notices(client: AcpClient, method: str) -> list[dict[str, Any]]:
    return [n["params"] for n in client.notifications if n["method"] == method]


async def got_notice(client: AcpClient, method: str) -> dict[str, Any]:
    await client.wait_for(lambda: bool(notices(client, method)))
    return notices(client, method)[-1]


async def test_a_pending_request_goes_to_approvers_that_attach_later() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
    ):
        sid = await owner.new_session()
        await owner.prompt(sid, "say before the question\npermission")
        await got_request(owner, 0)
        pid = last_permission_id(owner, sid)
        async with (
            acp_client(hub.url, 1, events=True, role="approver", name="late v1") as late_v1,
            acp_client(hub.url, 2, role="approver", name="late v2") as late_v2,
            acp_client(hub.url, 2, role="viewer", name="late viewer") as late_viewer,
        ):
            await resume(late_v1, sid)
            v1_copy = await got_request(late_v1, 0)
            assert v1_copy["params"]["toolCall"]["toolCallId"]  # the v1 shape
            result = await late_v2.call(
                "session/attach",
                {"sessionId": sid, "role": "controller", "historyPolicy": "pending_only"},
            )
            assert result["role"] == "approver"
            # pending_only: the pending record and the state, none of the conversation.
            replayed = [p["update"]["sessionUpdate"] for p in late_v2.session_updates(sid)]
            assert "_hub_permission" in replayed
            assert "agent_message_chunk" not in replayed
            assert "agent_message" not in replayed
            assert ("requires_action", None) in states(late_v2, sid)
            v2_copy = await got_request(late_v2, 0)
            assert v2_copy["params"]["title"]
            await late_viewer.call(
                "session/attach", {"sessionId": sid, "role": "observer", "historyPolicy": "none"}
            )
            await late_v1.answer(v1_copy["id"], allow("allow"))
            await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
            assert texts(owner, sid, "permission:") == ["permission: selected allow"]
            final = await sees_final(late_v2, sid, pid)
            assert final["resolvedBy"]["clientId"] == client_id(late_v1)
            await late_v2.wait_for(lambda: v2_copy["id"] in late_v2.cancelled)
            assert permission_requests(owner)[-1]["id"] in owner.cancelled
            # Clients of the attach proposal also get its permission_resolved notice.
            for client in (late_v2, late_viewer):
                notice = await got_notice(client, "_hub/permission_resolved")
                assert notice["permissionId"] == pid
                assert notice["resolvedBy"]["clientId"] == client_id(late_v1)
            assert not permission_requests(late_viewer)
            assert ("running", None) in states(late_viewer, sid)


async def test_an_unanswered_request_times_out_cancelled() -> None:
    settings = Settings(permission_timeout=0.5)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="approver", name="approver") as approver,
    ):
        sid = await owner.new_session()
        await resume(approver, sid)
        await owner.prompt(sid, "permission")
        copy = await got_request(approver, 0)
        pid = last_permission_id(owner, sid)
        final = await sees_final(approver, sid, pid)
        assert final["status"] == "timed_out"
        assert final["outcome"] == {"outcome": "cancelled"}
        await approver.wait_for(lambda: copy["id"] in approver.cancelled)
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert texts(owner, sid, "permission:") == ["permission: cancelled"]
        # A late answer does not count.
        await approver.answer(copy["id"], allow("allow"))
        await approver.wait_for(lambda: bool(refusals(approver)))
        assert refusals(approver)[-1]["error"]["code"] == STALE_ANSWER


async def test_cancel_resolves_pending_requests_and_everyone_sees_cancelled() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="driver", name="v1 driver") as driver,
        acp_client(hub.url, 2, role="viewer", name="viewer") as viewer,
    ):
        sid = await owner.new_session()
        await resume(driver, sid)
        await resume(viewer, sid)
        turn = await driver.start(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "permission\nsay never"}]},
        )
        copies = [await got_request(c, 0) for c in (owner, driver)]
        pid = last_permission_id(owner, sid)
        # Two drivers cancel at the same moment.
        async with anyio.create_task_group() as tg:
            tg.start_soon(owner.notify, "session/cancel", {"sessionId": sid})
            tg.start_soon(driver.notify, "session/cancel", {"sessionId": sid})
        assert await driver.result(turn) == {"stopReason": "cancelled"}
        for client in (owner, viewer, driver):
            final = await sees_final(client, sid, pid)
            assert final["status"] == "cancelled"
            await wait_count(client, partial(idle_with, client, sid, "cancelled"), 1)
            assert idle_with(client, sid, "cancelled") == 1
        for client, copy in zip((owner, driver), copies, strict=True):
            assert copy["id"] in client.cancelled
        assert not said(owner, sid, "never")
        # The turn after it runs to its end: no cancel was left over for it.
        assert await driver.prompt(sid, "sleep 100\nsay afterwards") == {"stopReason": "end_turn"}
        assert said(owner, sid, "afterwards")


async def test_answers_that_are_not_valid_never_count() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 1, events=True, name="v1 owner") as owner,
        acp_client(hub.url, 2, role="approver", name="approver") as approver,
    ):
        sid = await owner.new_session()
        await resume(approver, sid)
        turn = await owner.start(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "permission"}]},
        )
        bad: list[Any] = [
            {"outcome": {"outcome": "maybe"}},  # unknown outcome
            {"outcome": {"outcome": "selected", "optionId": "always"}},  # unknown option
            {"outcome": {"outcome": "selected"}},  # no option
            {"outcome": "allow"},  # malformed
            "yes",
            None,
        ]
        for n, answer in enumerate(bad, start=1):
            copy = await got_request(approver, n - 1)
            await approver.answer(copy["id"], answer)
            await wait_count(approver, partial(refusal_count, approver), n)
            refusal = refusals(approver)[-1]
            assert refusal["requestId"] == copy["id"]
            assert refusal["error"]["code"] == -32602
        # Each refusal brought a fresh copy; a valid answer on it counts.
        copy = await got_request(approver, len(bad))
        pid = last_permission_id(approver, sid)
        assert final_record(approver, sid, pid) is None
        await approver.answer(copy["id"], allow("reject"))
        assert await owner.result(turn) == {"stopReason": "end_turn"}
        assert texts(approver, sid, "permission:") == ["permission: selected reject"]
        final = await sees_final(owner, sid, pid)
        assert final["resolvedBy"]["clientId"] == client_id(approver)


async def test_no_eligible_client_resolves_cancelled_and_policies_route_copies() -> None:
    # Without a grace (`answer_grace = 0`): a request nobody may answer is cancelled at once.
    async with (
        running_hub([scripted_agent()], Settings(answer_grace=0)) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="driver", name="d1") as d1,
        acp_client(hub.url, 2, role="driver", name="d2") as d2,
        acp_client(hub.url, 2, role="approver", name="approver") as approver,
    ):
        sid = await owner.new_session()
        for client in (d1, d2, approver):
            await resume(client, sid)
        # `owner`: only owners may answer; with none attached the request resolves cancelled.
        await owner.call("_hub/set_policy", {"sessionId": sid, "permission": "owner"})
        await owner.call("session/detach", {"sessionId": sid})
        assert await d1.prompt(sid, "permission") == {"stopReason": "end_turn"}
        assert texts(d2, sid, "permission:") == ["permission: cancelled"]
        assert hub_updates(d2, sid, "_hub_permission")[-1]["status"] == "cancelled"
        for client in (d1, d2, approver):
            assert not permission_requests(client)
        # `lease`: the lease holder and owners; the copy follows the lease.
        await resume(owner, sid)
        await owner.call(
            "_hub/set_policy", {"sessionId": sid, "permission": "lease", "prompt": "queue"}
        )
        await d2.call("_hub/lease/request", {"sessionId": sid})
        await d2.prompt(sid, "permission")
        holder_copy = await got_request(d2, 0)
        await got_request(owner, 0)
        assert not permission_requests(d1)
        assert not permission_requests(approver)
        await owner.call("_hub/lease/grant", {"sessionId": sid, "clientId": client_id(d1)})
        await d2.wait_for(lambda: holder_copy["id"] in d2.cancelled)
        new_copy = await got_request(d1, 0)
        await d1.answer(new_copy["id"], allow("allow"))
        await d2.wait_for(lambda: len(texts(d2, sid, "permission:")) == 2)
        assert texts(d2, sid, "permission:")[-1] == "permission: selected allow"
        # `first` again: every approver and above gets a copy.
        await owner.call("_hub/set_policy", {"sessionId": sid, "permission": "first"})
        await d2.wait_for(lambda: d2.idle_count(sid) >= 2)
        everyone = (owner, d1, d2, approver)
        before = [len(permission_requests(c)) for c in everyone]
        await owner.prompt(sid, "permission")
        for client, count in zip(everyone, before, strict=True):
            await got_request(client, count)
        await approver.answer(permission_requests(approver)[-1]["id"], allow("reject"))
        await d2.wait_for(lambda: len(texts(d2, sid, "permission:")) == 3)
        assert texts(d2, sid, "permission:")[-1] == "permission: selected reject"


# -- elicitation, presence, the attach proposal --------------------------------------------------


def elicitations(client: AcpClient) -> list[dict[str, Any]]:
    return [r for r in client.requests if r["method"] == "elicitation/create"]


async def test_elicitation_goes_to_the_prompts_sender_only() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="driver", name="d1") as d1,
        acp_client(hub.url, 2, role="driver", name="d2") as d2,
        acp_client(hub.url, 2, role="approver", name="approver") as approver,
    ):
        sid = await owner.new_session()
        for client in (d1, d2, approver):
            await resume(client, sid)
        await d2.prompt(sid, "elicit")
        await d2.wait_for(lambda: bool(elicitations(d2)))
        request = elicitations(d2)[-1]
        await d2.answer(request["id"], {"action": "accept", "content": {"name": "Ada"}})
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert texts(owner, sid, "elicit:") == ['elicit: accept {"name": "Ada"}']
        turn = await d1.start(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "elicit"}]}
        )
        await d1.wait_for(lambda: bool(elicitations(d1)))
        await d1.answer(elicitations(d1)[-1]["id"], {"action": "decline"})
        assert await d1.result(turn) == {"stopReason": "end_turn"}
        assert texts(owner, sid, "elicit:")[-1] == "elicit: decline"
        assert len(elicitations(d2)) == 1
        assert not elicitations(owner)
        assert not elicitations(approver)


async def test_an_elicitation_is_withdrawn_when_its_client_detaches() -> None:
    async with (
        running_hub([scripted_agent()], Settings(answer_grace=0)) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 2, role="driver", name="asked") as asked,
    ):
        sid = await owner.new_session()
        await resume(asked, sid)
        await asked.prompt(sid, "elicit")
        await asked.wait_for(lambda: bool(elicitations(asked)))
        request_id = elicitations(asked)[-1]["id"]
        await asked.call("session/detach", {"sessionId": sid})
        await asked.wait_for(lambda: request_id in asked.cancelled)
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert texts(owner, sid, "elicit:")[-1] == "elicit: cancel"


def presence(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    return hub_updates(client, sid, "_hub_presence")


def listed(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    """The client list folded from a v2 client's presence deltas."""
    folded = client.fold(sid).hub("_hub_presence") or {}
    clients: list[dict[str, Any]] = folded.get("clients", [])
    return clients


async def test_presence_lists_clients_and_records_joins_and_leaves() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="alice") as alice,
    ):
        sid = await alice.new_session()
        async with acp_client(hub.url, 1, events=True, role="approver", name="bob") as bob:
            await resume(bob, sid)
            watcher_cm = acp_client(hub.url, 2, role="viewer")
            async with watcher_cm as watcher:
                await watcher.call("session/attach", {"sessionId": sid, "historyPolicy": "none"})
                await alice.wait_for(lambda: client_id(watcher) in str(listed(alice, sid)))
                clients = {c["clientId"]: c for c in listed(alice, sid)}
                assert clients[client_id(alice)]["name"] == "alice"
                assert clients[client_id(alice)]["role"] == "owner"
                assert clients[client_id(bob)]["name"] == "bob"
                assert clients[client_id(bob)]["role"] == "approver"
                assert clients[client_id(bob)]["protocolVersion"] == 1
                assert clients[client_id(watcher)]["name"] == "test-owner"  # its credential's name
                assert clients[client_id(watcher)]["program"] == "test-client"  # a detail
                assert clients[client_id(watcher)]["role"] == "viewer"
                assert all(c["since"].endswith("Z") for c in clients.values())
                # Joins close together may share one (coalesced) presence event.
                joins = [
                    change["joined"]
                    for p in presence(alice, sid)
                    for change in (p.get("changes") or [p])
                    if "joined" in change
                ]
                assert joins == [client_id(alice), client_id(bob), client_id(watcher)]
                # Each event carries what changed, not the whole list again.
                added = [c["clientId"] for p in presence(alice, sid) for c in p["added"]]
                assert added == [client_id(alice), client_id(bob), client_id(watcher)]
                assert all("clients" not in p for p in presence(alice, sid))
            await bob.wait_for(
                lambda: any(p.get("left") == client_id(watcher) for p in presence(bob, sid))
            )
            left = next(p for p in presence(bob, sid) if p.get("left") == client_id(watcher))
            assert left["reason"] == "disconnected"
            assert left["removed"] == [client_id(watcher)]
            assert left["count"] == 2
        await alice.wait_for(
            lambda: any(p.get("left") == client_id(bob) for p in presence(alice, sid))
        )
        # A late joiner's replay holds the current list.
        async with acp_client(hub.url, 2) as late:
            await resume(late, sid, replayFrom={"type": "start"})
            replayed = presence(late, sid)[0]
            assert [c["clientId"] for c in replayed["clients"]] == [client_id(alice)]


async def test_presence_counts_an_audience_instead_of_listing_it() -> None:
    settings = Settings(presence_viewers=2)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url, 2, name="alice") as alice,
    ):
        sid = await alice.new_session()
        async with contextlib.AsyncExitStack() as stack:
            viewers = []
            for n in range(3):
                viewer = await stack.enter_async_context(
                    acp_client(hub.url, 2, role="viewer", name=f"v{n}")
                )
                await resume(viewer, sid)
                viewers.append(viewer)
                if n < 2:
                    # Up to the limit, viewers are listed one by one.
                    await alice.wait_for(
                        partial(lambda want: len(listed(alice, sid)) == want, n + 2)
                    )
            # The third viewer passes the limit: viewers are counted, not listed.
            await alice.wait_for(lambda: (presence(alice, sid) or [{}])[-1].get("viewers") == 3)
            last = presence(alice, sid)[-1]
            assert last["count"] == 4
            assert [c["clientId"] for c in listed(alice, sid)] == [client_id(alice)]
            assert sorted(last["removed"]) == sorted(client_id(v) for v in viewers[:2])
            # A driver is listed whatever the size of the audience.
            async with acp_client(hub.url, 2, role="driver", name="dan") as dan:
                await resume(dan, sid)
                await alice.wait_for(lambda: len(listed(alice, sid)) == 2)
                assert listed(alice, sid)[-1]["name"] == "dan"
                # A late joiner's replay holds the same list and counts.
                async with acp_client(hub.url, 2) as late:
                    await resume(late, sid, replayFrom={"type": "start"})
                    replayed = presence(late, sid)[0]
                    assert [c["name"] for c in replayed["clients"]] == ["alice", "dan"]
                    assert replayed["viewers"] == 3
                    assert replayed["count"] == 5
        # Back under the limit, the remaining viewers are listed again.
        await alice.wait_for(lambda: (presence(alice, sid) or [{}])[-1].get("viewers") == 0)
        assert [c["clientId"] for c in listed(alice, sid)] == [client_id(alice)]


async def test_attach_history_policies_and_disconnect_notices() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
    ):
        sid = await owner.new_session()
        await owner.prompt(sid, "say the first message")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        await owner.prompt(sid, "say the second message")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 2)
        first = next(
            u["messageId"]
            for u in hub_updates(owner, sid, "agent_message_chunk")
            if "first" in u["content"]["text"]
        )
        last_of_first = max(
            p["_meta"]["acp-hub"]["seq"]
            for p in owner.session_updates(sid)
            if p["update"].get("messageId") == first
        )
        async with (
            acp_client(hub.url, 2, role="driver") as after,
            acp_client(hub.url, 1, events=True) as full,
            acp_client(hub.url, 2) as none,
            acp_client(hub.url, 2) as unknown,
        ):
            result = await after.call(
                "session/attach",
                {"sessionId": sid, "historyPolicy": {"type": "after", "messageId": first}},
            )
            assert result["role"] == "driver"
            end = result["_meta"]["acp-hub"]["seq"]
            got = after.seqs(sid)[: end - last_of_first]
            assert got == list(range(last_of_first + 1, end + 1))
            assert said(after, sid, "second message")
            assert not said(after, sid, "first message")
            await full.call("session/attach", {"sessionId": sid, "historyPolicy": "full"})
            assert said(full, sid, "first message")
            assert said(full, sid, "second message")
            result = await none.call("session/attach", {"sessionId": sid, "historyPolicy": "none"})
            assert none.session_updates(sid) == [] or all(
                p["_meta"]["acp-hub"].get("seq", 0) > result["_meta"]["acp-hub"]["seq"]
                for p in none.session_updates(sid)
            )
            await unknown.call(
                "session/attach",
                {"sessionId": sid, "historyPolicy": {"type": "after", "messageId": "msg-nope"}},
            )
            assert hub_updates(unknown, sid, "_hub_reset")
            assert said(unknown, sid, "first message")
            await refused(
                -32602,
                unknown.call("session/attach", {"sessionId": sid, "historyPolicy": "some"}),
            )
            await refused(
                -32602, unknown.call("session/attach", {"sessionId": sid, "role": "admin"})
            )
            # session/detach; the others that attached this way are told.
            assert await after.call("session/detach", {"sessionId": sid}) == {}
            await full.wait_for(lambda: bool(notices(full, "_hub/client_disconnected")))
            notice = notices(full, "_hub/client_disconnected")[-1]
            assert notice["clientId"] == client_id(after)
            assert notice["reason"] == "detached"
            await refused(-32047, after.prompt(sid, "say detached"))
        # The initialize results advertise the attach capability to both versions.
        assert owner.init_result["capabilities"]["session"]["attach"]["roles"]
        async with acp_client(hub.url, 1) as v1:
            caps = v1.init_result["agentCapabilities"]["sessionCapabilities"]
            assert "observer" in caps["attach"]["roles"] or "viewer" in caps["attach"]["roles"]


async def test_a_lost_agent_resolves_its_pending_request_cancelled() -> None:
    # Set up like the tests around it: each test spells out its own scenario.
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2, name="owner") as owner,
        acp_client(hub.url, 1, events=True, role="approver", name="approver") as approver,
    ):
        sid = await owner.new_session()
        await resume(approver, sid)
        await owner.prompt(sid, "permission")
        copy = await got_request(approver, 0)
        pid = last_permission_id(owner, sid)
        supervisor = hub.app.supervisor
        assert supervisor is not None
        agent_pid = supervisor.get("scripted").pid
        assert agent_pid is not None
        os.kill(agent_pid, signal.SIGKILL)
        for client in (owner, approver):
            assert (await sees_final(client, sid, pid))["status"] == "cancelled"
        await approver.wait_for(lambda: copy["id"] in approver.cancelled)
        await owner.wait_for(lambda: states(owner, sid)[-1][0] == "idle")
