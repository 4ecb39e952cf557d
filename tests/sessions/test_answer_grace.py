"""A pending request outlives its answerers' connections for ``answer_grace`` (issue 25, B).

The session's side, policy by policy: who gets the request again when they come back, which
votes are kept, and when it ends ``cancelled`` with its reason. Over the wire, per transport and
across nodes, in ``tests/server/test_answer_grace.py`` and ``tests/store/``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hub.protocol.errors import REQUEST_CANCELLED, RpcError
from hub.sessions.session import Session
from tests.sessions.harness import ALLOW, OPTIONS, Client, ask, hub_session, join, text, until

pytestmark = pytest.mark.anyio

REJECT = {"outcome": {"outcome": "selected", "optionId": "deny"}}
TOOL = {"toolCallId": "call-1", "title": "Write to config.toml", "kind": "edit"}


def records(client: Client) -> list[dict[str, Any]]:
    return client.updates("_hub_permission")


async def ask_tool(session: Session, tg: anyio.abc.TaskGroup) -> list[dict[str, Any]]:
    """A permission request about a tool call; its outcome lands in the returned list."""
    outcomes: list[dict[str, Any]] = []
    params = {
        "sessionId": "a-1",
        "options": OPTIONS,
        "subject": {"type": "tool_call", "toolCall": TOOL},
    }

    async def run() -> None:
        outcomes.append(await session.on_permission(params))

    tg.start_soon(run)
    await until(lambda: bool(session.permissions.pending))
    return outcomes


async def test_the_only_approver_comes_back_and_its_answer_counts() -> None:
    async with hub_session(answer_grace=60) as (session, _, tg):
        first, viewer = Client("c-1", role="approver"), Client("c-v", role="viewer")
        join(session, first)
        join(session, viewer)
        outcomes = await ask_tool(session, tg)
        (copy,) = first.permission_copies()
        offered = first.asked[copy][1]
        session.detach(first, reason="disconnected")
        await anyio.sleep(0.05)  # time passes; nothing may resolve it meanwhile
        assert not outcomes
        assert session.permissions.pending
        waiting = records(viewer)[-1]
        assert waiting["status"] == "pending"
        assert waiting["waiting"]["reason"] == "no_answerer"
        assert waiting["waiting"]["until"].endswith("Z")
        # The state a late joiner replays still holds the request, marked waiting.
        (pending,) = viewer.fold().pending_permissions.values()
        assert pending["request"]["subject"]["toolCall"]["toolCallId"] == "call-1"
        again = Client("c-2", role="approver")
        join(session, again)
        (copy2,) = again.permission_copies()
        assert again.asked[copy2][1]["subject"] == offered["subject"]
        assert records(viewer)[-1]["waiting"] is None
        again.answer(copy2, ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "selected", "optionId": "allow"}]
        final = records(viewer)[-1]
        assert final["status"] == "resolved"
        assert final["resolvedBy"]["clientId"] == "c-2"
        assert "reason" not in final


# A session and clients set up as in the tests around it: each reads alone.
async def test_the_grace_ends_cancelled_with_its_reason() -> None:
    async with hub_session(answer_grace=0.1) as (session, _, tg):
        approver, viewer = Client("c-a", role="approver"), Client("c-v", role="viewer")
        join(session, approver)
        join(session, viewer)
        outcomes = await ask(session, tg)
        session.detach(approver, reason="disconnected")
        with anyio.fail_after(5):
            await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        final = records(viewer)[-1]
        assert final["status"] == "cancelled"
        assert final["reason"] == "no_answerer"
        assert final["waiting"] is None


async def test_a_request_with_nobody_attached_waits_for_someone() -> None:
    async with hub_session(answer_grace=60) as (session, _, tg):
        viewer = Client("c-v", role="viewer")
        join(session, viewer)
        outcomes = await ask(session, tg)
        assert records(viewer)[-1]["waiting"]["reason"] == "no_answerer"
        owner = Client("c-o")
        join(session, owner)
        owner.answer(owner.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"


async def test_a_refusal_by_those_present_still_ends_it_at_once() -> None:
    async with hub_session(answer_grace=60) as (session, _, tg):
        approver, viewer = Client("c-a", role="approver"), Client("c-v", role="viewer")
        join(session, approver)
        join(session, viewer)
        outcomes = await ask(session, tg)
        approver.answer(approver.permission_copies()[0], error=RpcError(REQUEST_CANCELLED, "no"))
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert "reason" not in records(viewer)[-1]


async def test_the_turn_ending_during_the_grace_cancels_it() -> None:
    async with hub_session(answer_grace=60) as (session, _, tg):
        driver, viewer = Client("c-d", role="driver"), Client("c-v", role="viewer")
        join(session, driver)
        join(session, viewer)
        await session.prompt(driver, text("one"))
        outcomes = await ask(session, tg)
        session.detach(driver, reason="disconnected")
        assert not outcomes
        session.on_update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "x"})
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert records(viewer)[-1]["status"] == "cancelled"


async def test_consensus_keeps_the_votes_cast_while_a_voter_is_away() -> None:
    async with hub_session(answer_grace=60, permission_policy="consensus") as (session, _, tg):
        alice = Client("c-a", role="approver", principal="alice")
        bob = Client("c-b", role="approver", principal="bob")
        viewer = Client("c-v", role="viewer", principal="carol")
        for client in (alice, bob, viewer):
            join(session, client)
        outcomes = await ask(session, tg)
        alice.answer(alice.permission_copies()[0], ALLOW)
        assert records(viewer)[-1]["approvals"][0]["principal"] == "alice"
        session.detach(bob, reason="disconnected")
        # Alice stays, her allow counted; nobody who could still allow is attached: it waits.
        assert not outcomes
        assert records(viewer)[-1]["waiting"]["reason"] == "no_answerer"
        # Alice's other tab is not asked again: her vote stands.
        alice2 = Client("c-a2", role="approver", principal="alice")
        join(session, alice2)
        assert alice2.permission_copies() == []
        bob2 = Client("c-b2", role="approver", principal="bob")
        join(session, bob2)
        bob2.answer(bob2.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"
        final = records(viewer)[-1]
        assert [a["principal"] for a in final["approvals"]] == ["alice", "bob"]


async def test_designated_waits_for_the_sender_then_offers_it_again() -> None:
    async with hub_session(answer_grace=60, permission_policy="designated") as (
        session,
        _,
        tg,
    ):
        sender = Client("c-s", role="driver", principal="sam")
        viewer = Client("c-v", role="viewer", principal="vic")
        join(session, sender)
        join(session, viewer)
        await session.prompt(sender, text("one"))
        outcomes = await ask(session, tg)
        assert len(sender.permission_copies()) == 1
        session.detach(sender, reason="disconnected")
        # No client of the sender attached, and no owner: nobody may answer; it waits.
        assert records(viewer)[-1]["waiting"]["reason"] == "no_answerer"
        back = Client("c-s2", role="driver", principal="sam")
        join(session, back)
        back.answer(back.permission_copies()[0], REJECT)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "deny"


async def test_lease_the_holder_loses_the_lease_and_an_owner_answers() -> None:
    async with hub_session(answer_grace=60, permission_policy="lease") as (session, _, tg):
        holder, viewer = Client("c-h", role="driver"), Client("c-v", role="viewer")
        join(session, holder)
        join(session, viewer)
        session.lease_action(holder, "request")
        outcomes = await ask(session, tg)
        assert len(holder.permission_copies()) == 1
        session.detach(holder, reason="disconnected")
        assert records(viewer)[-1]["waiting"]["reason"] == "no_answerer"
        # Back without the lease: not eligible until it takes the lease again.
        back = Client("c-h2", role="driver")
        join(session, back)
        assert back.permission_copies() == []
        session.lease_action(back, "request")
        back.answer(back.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"


async def test_an_elicitation_waits_for_its_user_to_come_back() -> None:
    async with hub_session(answer_grace=60) as (session, _, tg):
        driver = Client("c-d", role="driver", principal="dana")
        other = Client("c-o", role="driver", principal="otto")
        join(session, driver)
        join(session, other)
        await session.prompt(driver, text("one"))
        answers: list[dict[str, Any]] = []
        params = {"elicitationId": "e-1", "mode": "form", "message": "Name?"}

        async def elicit() -> None:
            answers.append(await session.on_elicitation(params))

        tg.start_soon(elicit)
        await until(lambda: bool(driver.asked))
        session.detach(driver, reason="disconnected")
        await anyio.sleep(0.05)
        assert not answers
        assert other.asked == {}  # another user is not asked in its place
        back = Client("c-d2", role="driver", principal="dana")
        join(session, back)
        ((request_id, (method, asked, _)),) = back.asked.items()
        assert method == "elicitation/create"
        assert asked["message"] == "Name?"
        back.answer(request_id, {"action": "accept", "content": {"name": "x"}})
        await until(lambda: bool(answers))
        assert answers == [{"action": "accept", "content": {"name": "x"}}]


async def test_an_elicitation_nobody_comes_back_for_is_answered_cancel() -> None:
    async with hub_session(answer_grace=0.1) as (session, _, tg):
        driver = Client("c-d", role="driver")
        join(session, driver)
        await session.prompt(driver, text("one"))
        answers: list[dict[str, Any]] = []

        async def elicit() -> None:
            answers.append(await session.on_elicitation({"elicitationId": "e-1", "message": "?"}))

        tg.start_soon(elicit)
        await until(lambda: bool(driver.asked))
        session.detach(driver, reason="disconnected")
        with anyio.fail_after(5):
            await until(lambda: bool(answers))
        assert answers == [{"action": "cancel"}]
