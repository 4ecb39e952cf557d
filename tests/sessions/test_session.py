"""The session's rules without sockets: fan-out, presence, prompts and the queue, the lease,
permission requests and elicitations, against an in-process agent and list-backed clients.

The wire (real sockets, real agent processes) is tested in ``tests/server``; these tests pin
the arbitration rules (``docs/arbitration.md``) one by one and run in milliseconds.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from hub.agents import AgentError
from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    FORBIDDEN,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    NOT_LEASE_HOLDER,
    QUEUE_FULL,
    REQUEST_CANCELLED,
    SESSION_BUSY,
    RpcError,
    hub_error,
)
from hub.sessions import presence
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from tests.sessions.harness import (
    ALLOW,
    OPTIONS,
    Agent,
    Client,
    ask,
    failure,
    hub_session,
    idle,
    join,
    record,
    text,
    until,
)

pytestmark = pytest.mark.anyio


# -- the log and fan-out -----------------------------------------------------------------------


async def test_every_client_gets_every_event_once_in_seq_order_and_v1_its_rendering() -> None:
    async with hub_session() as (session, _, _):
        v2, v1 = Client("c-2"), Client("c-1", version=1, hub_events=False)
        join(session, v2)
        join(session, v1)
        chunk = {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m-1",
            "content": {"type": "text", "text": "hello"},
        }
        seq = session.emit(chunk)
        assert seq is not None
        assert v2.updates("agent_message_chunk") == [chunk]
        assert v1.updates("agent_message_chunk")[0]["content"]["text"] == "hello"
        assert v2.seqs() == list(range(v2.seqs()[0], seq + 1))
        assert not v1.updates("_hub_presence")  # no hub events for a v1 client that did not ask
        assert session.emit({"sessionUpdate": "agent_message", "messageId": 3}) is None
        assert len(v2.messages()) == len(v2.seqs())  # the malformed update went nowhere


async def test_a_late_joiner_replays_the_state_and_a_cursor_resumes_exactly() -> None:
    async with hub_session() as (session, _, _):
        first = Client("c-1")
        join(session, first)
        for i in range(5):
            session.emit(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m-1",
                    "content": {"type": "text", "text": f"{i} "},
                }
            )
        late = Client("c-2")
        cursor = join(session, late, "start")
        replayed = [m for m in late.messages() if m["params"]["_meta"]["acp-hub"].get("replay")]
        assert replayed
        assert late.fold().message("m-1") == first.fold().message("m-1")
        session.detach(late)
        session.emit({"sessionUpdate": "session_info_update", "title": "T"})
        back = Client("c-2")
        session.attach(back, replay="after", after=(cursor["epoch"], cursor["seq"]))
        assert back.seqs() == list(range(cursor["seq"] + 1, session.log.last_seq + 1))
        stale = Client("c-3")
        session.attach(stale, replay="after", after=(cursor["epoch"] - 1, 1))
        assert stale.updates()[0] == {
            "sessionUpdate": "_hub_reset",
            "reason": "epoch changed",
            "epoch": session.log.epoch,
        }
        # A cursor past the log's end (events a dead owner sent and never wrote) says so.
        ahead = Client("c-4")
        session.attach(ahead, replay="after", after=(cursor["epoch"], session.log.last_seq + 5))
        assert ahead.updates()[0]["reason"] == "cursor ahead of the log"


# -- presence ----------------------------------------------------------------------------------


async def test_presence_says_who_joined_and_left_and_coalesces_a_burst() -> None:
    async with hub_session() as (session, _, _):
        watcher = Client("c-0", name="watcher")
        join(session, watcher)
        assert watcher.updates("_hub_presence")[-1]["joined"] == "c-0"
        for i in range(1, 4):
            join(session, Client(f"c-{i}", role="viewer"))
        await until(lambda: session.settled)
        deltas = watcher.updates("_hub_presence")
        assert len(deltas) == 2  # c-0 at once, then the three joins in one coalesced event
        assert [c["joined"] for c in deltas[-1]["changes"]] == ["c-1", "c-2", "c-3"]
        session.detach(session.attached["c-2"].client, reason="disconnected")
        await until(lambda: session.settled)
        clients = record(watcher, "_hub_presence")["clients"]
        assert [c["clientId"] for c in clients] == ["c-0", "c-1", "c-3"]
        assert watcher.updates("_hub_presence")[-1]["count"] == 3


async def test_an_audience_past_presence_viewers_is_counted_not_listed() -> None:
    async with hub_session(presence_viewers=1) as (session, _, _):
        owner = Client("c-0")
        join(session, owner)
        for i in range(1, 4):
            join(session, Client(f"c-{i}", role="viewer"))
        await until(lambda: session.settled)
        presence = record(owner, "_hub_presence")
        assert [c["clientId"] for c in presence["clients"]] == ["c-0"]
        assert (presence["count"], presence["viewers"]) == (4, 3)


async def test_presence_follows_a_role_change_and_the_viewer_limit_both_ways() -> None:
    # A flush looks only at the clients that joined or left; the folded list is still what
    # the attachments say after a re-attach with another role, and as the viewers' number
    # crosses `presence_viewers` one way and back.
    async with hub_session(presence_viewers=2) as (session, _, _):
        owner = Client("c-0")
        join(session, owner)
        viewers = [Client(f"c-{i}", role="viewer") for i in range(1, 4)]

        async def listed() -> list[tuple[str, str]]:
            await until(lambda: session.settled)
            clients = record(owner, "_hub_presence")["clients"]
            return [(c["clientId"], c["role"]) for c in clients]

        join(session, viewers[0])
        join(session, viewers[1])
        assert await listed() == [("c-0", "owner"), ("c-1", "viewer"), ("c-2", "viewer")]
        join(session, viewers[2])
        assert await listed() == [("c-0", "owner")]
        session.detach(viewers[0], reason="disconnected")
        assert await listed() == [("c-0", "owner"), ("c-2", "viewer"), ("c-3", "viewer")]
        session.attach(viewers[1], replay=None, role="viewer")  # the same role: no change
        session.announce(viewers[1])
        session.attach(owner, replay=None, role="viewer")
        session.announce(owner)
        assert await listed() == []
        presence = record(owner, "_hub_presence")
        assert (presence["count"], presence["viewers"]) == (3, 3)
        session.attach(owner, replay=None, role="owner")
        session.announce(owner)
        assert await listed() == [("c-0", "owner"), ("c-2", "viewer"), ("c-3", "viewer")]
        assert record(owner, "_hub_presence")["viewers"] == 2


def test_presence_events_of_a_large_audience_are_further_apart() -> None:
    # Each event is a frame for every client: past a thousand clients, fewer of them.
    assert presence.interval(1) == presence.interval(1000) == presence.PRESENCE_INTERVAL
    assert presence.interval(10_000) == 10 * presence.interval(1000)


# -- roles -------------------------------------------------------------------------------------


async def test_roles_decide_who_may_prompt_and_an_attachment_may_ask_for_less() -> None:
    async with hub_session() as (session, agent, _):
        viewer, owner = Client("c-v", role="viewer"), Client("c-o")
        join(session, viewer)
        session.attach(owner, replay=None, role="viewer")
        assert session.role_of(owner) == "viewer"
        for client in (viewer, owner):
            error = await failure(session.prompt(client, text("hi")))
            assert error.code == FORBIDDEN
            assert "driver" in error.message
        session.attach(owner, replay=None, role="owner")
        assert session.role_of(owner) == "owner"
        assert (await failure(session.prompt(owner, []))).code == INVALID_PARAMS
        assert agent.prompts == []


# -- prompts and the queue ---------------------------------------------------------------------


async def test_prompts_queue_behind_the_turn_and_start_in_order_when_it_ends() -> None:
    async with hub_session() as (session, agent, _):
        a, b, c = Client("c-a"), Client("c-b"), Client("c-c")
        for client in (a, b, c):
            join(session, client)
        first = await session.prompt(a, text("one"))
        assert first["messageId"] == "u-1"
        assert not first["_meta"]["acp-hub"]["queued"]
        assert session.turns.busy
        second = await session.prompt(b, text("two"))
        third = await session.prompt(c, text("three"))
        for answer in (second, third):
            # Named when queued: every v2 answer carries the user message's id.
            assert answer["_meta"]["acp-hub"]["queued"]
            assert answer["messageId"] == answer["_meta"]["acp-hub"]["messageId"]
        queue = record(a, "_hub_queue")["entries"]
        assert [e["clientId"] for e in queue] == ["c-b", "c-c"]
        assert [e["preview"] for e in queue] == ["two", "three"]
        idle(session)
        await until(lambda: len(agent.prompts) == 2)
        await until(lambda: session.turns.current is not None and session.turns.current.attributed)
        assert agent.prompts[1] == text("two")
        # The agent called the user message u-2; every client sees it under the queued id.
        users = [u["messageId"] for u in a.updates("user_message")]
        assert users == ["u-1", second["messageId"]]
        prompts = a.updates("_hub_prompt")
        assert [(p["messageId"], p["clientId"]) for p in prompts] == [
            ("u-1", "c-a"),
            (second["messageId"], "c-b"),
        ]
        assert a.fold().message(second["messageId"]) is not None
        assert [e["clientId"] for e in record(a, "_hub_queue")["entries"]] == ["c-c"]


async def test_a_v1_sender_is_answered_with_the_stop_reason_of_its_turn() -> None:
    async with hub_session() as (session, _, tg):
        v1 = Client("c-1", version=1)
        # A session and clients set up as in the tests around it: each reads alone.
        join(session, v1)
        answers: list[dict[str, Any]] = []

        async def send() -> None:
            answers.append(await session.prompt(v1, text("hi")))

        tg.start_soon(send)
        await until(lambda: session.turns.current is not None)
        await until(lambda: bool(v1.updates("_hub_prompt")))
        assert answers == []
        idle(session, "max_tokens")
        await until(lambda: bool(answers))
        assert answers == [{"stopReason": "max_tokens"}]
        # Its own prompt is not echoed back to it (it rendered it itself).
        assert v1.updates("user_message_chunk") == []


async def test_the_reject_policy_refuses_a_prompt_while_busy_and_the_queue_is_bounded() -> None:
    async with hub_session(max_queued_prompts=1) as (session, _, _):
        owner = Client("c-o")
        join(session, owner)
        await session.prompt(owner, text("one"))
        await session.prompt(owner, text("two"))  # queued
        assert (await failure(session.prompt(owner, text("three")))).code == QUEUE_FULL
        session.set_policy(owner, "reject", None)
        assert record(owner, "_hub_policy")["prompt"] == "reject"
        assert (await failure(session.prompt(owner, text("four")))).code == SESSION_BUSY
        with pytest.raises(SessionFailure) as info:
            session.set_policy(owner, "everyone", None)
        assert info.value.error.code == INVALID_PARAMS


async def test_only_the_sender_or_an_owner_withdraws_a_queued_prompt() -> None:
    async with hub_session() as (session, _, _):
        owner, a, b = Client("c-o"), Client("c-a", role="driver"), Client("c-b", role="driver")
        for client in (owner, a, b):
            join(session, client)
        await session.prompt(owner, text("running"))
        mine = (await session.prompt(a, text("a's")))["_meta"]["acp-hub"]["queueId"]
        theirs = (await session.prompt(b, text("b's")))["_meta"]["acp-hub"]["queueId"]
        with pytest.raises(SessionFailure) as info:
            session.withdraw_prompt(b, mine)
        assert info.value.error.code == FORBIDDEN
        session.withdraw_prompt(a, mine)
        session.withdraw_prompt(owner, theirs)
        assert record(owner, "_hub_queue")["entries"] == []
        with pytest.raises(SessionFailure):
            session.withdraw_prompt(a, mine)


async def test_a_detaching_client_loses_its_queued_prompts() -> None:
    async with hub_session() as (session, agent, _):
        owner, leaver = Client("c-o"), Client("c-l")
        join(session, owner)
        join(session, leaver)
        await session.prompt(owner, text("running"))
        await session.prompt(leaver, text("queued"))
        session.detach(leaver)
        assert record(owner, "_hub_queue")["entries"] == []
        idle(session)
        await anyio.sleep(0.01)
        assert len(agent.prompts) == 1


@pytest.mark.parametrize(
    ("failure_", "code"),
    [
        (RuntimeError("a bug"), INTERNAL_ERROR),
        (ValueError("cannot encode"), INTERNAL_ERROR),
        (AgentError(hub_error(AGENT_UNAVAILABLE, "gone")), AGENT_UNAVAILABLE),
    ],
)
async def test_a_turn_that_fails_to_start_is_released_and_the_session_stays_usable(
    failure_: BaseException, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    async with hub_session() as (session, agent, _):
        owner = Client("c-o")
        join(session, owner)
        agent.fail_with = failure_
        agent.session = None  # fails before the agent sees anything
        assert (await failure(session.prompt(owner, text("one")))).code == code
        assert not session.turns.busy
        assert session.turns.current is None
        agent.fail_with = None
        agent.session = session
        assert (await session.prompt(owner, text("two")))["messageId"] == "u-2"


async def test_a_queued_prompt_that_fails_to_start_lets_the_next_one_run() -> None:
    async with hub_session() as (session, agent, _):
        owner = Client("c-o")
        join(session, owner)
        await session.prompt(owner, text("one"))
        await session.prompt(owner, text("two"))
        await session.prompt(owner, text("three"))
        agent.fail_with = RuntimeError("a bug")
        idle(session)
        await until(lambda: len(agent.prompts) == 2)
        agent.fail_with = None
        await until(lambda: len(agent.prompts) == 3)
        assert agent.prompts[2] == text("three")


async def test_a_prompt_cancelled_while_the_agent_takes_it_releases_the_turn() -> None:
    async with hub_session(Agent(gate=anyio.Event())) as (session, agent, _):
        owner = Client("c-o")
        join(session, owner)
        with anyio.move_on_after(0.01):
            await session.prompt(owner, text("one"))  # the sender went away meanwhile
        assert session.turns.current is None
        assert agent.gate is not None
        agent.gate.set()
        # A session and clients set up as in the tests around it: each reads alone.
        assert (await session.prompt(owner, text("two")))["messageId"] == "u-2"


async def test_cancel_goes_to_the_agent_once_and_cancels_pending_permissions() -> None:
    async with hub_session() as (session, agent, tg):
        owner = Client("c-o")
        join(session, owner)
        await session.prompt(owner, text("one"))
        outcomes: list[dict[str, Any]] = []

        async def ask() -> None:
            outcomes.append(await session.on_permission({"options": OPTIONS}))

        tg.start_soon(ask)
        await until(lambda: bool(owner.permission_copies()))
        await session.cancel(owner)
        await session.cancel(owner)
        assert agent.cancels == 1
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert owner.updates("_hub_permission")[-1]["status"] == "cancelled"


# -- the lease ---------------------------------------------------------------------------------


async def test_under_the_lease_policy_only_the_holder_prompts_and_the_lease_expires() -> None:
    async with hub_session(prompt_policy="lease", lease_timeout=0.05) as (session, _, _):
        owner, a, b = Client("c-o"), Client("c-a", role="driver"), Client("c-b", role="driver")
        for client in (owner, a, b):
            join(session, client)
        assert (await failure(session.prompt(a, text("hi")))).code == NOT_LEASE_HOLDER
        assert session.lease_action(a, "request") == {"holder": "c-a"}
        with pytest.raises(SessionFailure) as info:
            session.lease_action(b, "request")
        assert info.value.error.code == NOT_LEASE_HOLDER
        await session.prompt(a, text("hi"))
        idle(session)
        # Nobody renews it: the watch takes it away.
        await until(lambda: record(owner, "_hub_lease")["holder"] is None)
        assert owner.updates("_hub_lease")[-1]["reason"] == "expired"
        session.lease_action(owner, "grant", "c-b")
        assert record(owner, "_hub_lease")["holder"]["clientId"] == "c-b"
        session.detach(b, reason="disconnected")
        assert owner.updates("_hub_lease")[-1] == {
            "sessionUpdate": "_hub_lease",
            "holder": None,
            "reason": "disconnected",
        }
        with pytest.raises(SessionFailure) as info:
            session.lease_action(a, "grant", "c-o")
        assert info.value.error.code == FORBIDDEN


async def test_the_holders_running_turn_keeps_the_lease() -> None:
    async with hub_session(prompt_policy="lease", lease_timeout=0.02) as (session, _, _):
        holder, owner = Client("c-h", role="driver"), Client("c-o")
        join(session, holder)
        join(session, owner)
        session.lease_action(holder, "request")
        await session.prompt(holder, text("long"))
        await anyio.sleep(0.1)  # five timeouts: the turn counts as activity
        assert session.lease.held_by("c-h")
        idle(session)
        await until(lambda: not session.lease.held_by("c-h"))


# -- permission requests -----------------------------------------------------------------------


async def test_the_first_valid_answer_wins_and_the_other_copies_are_withdrawn() -> None:
    async with hub_session() as (session, _, tg):
        a, b = Client("c-a", role="approver"), Client("c-b", role="driver")
        viewer = Client("c-v", role="viewer")
        for client in (a, b, viewer):
            join(session, client)
        outcomes = await ask(session, tg)
        assert len(a.permission_copies()) == len(b.permission_copies()) == 1
        assert viewer.asked == {}
        b.answer(b.permission_copies()[0], {"outcome": {"outcome": "selected", "optionId": "deny"}})
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "selected", "optionId": "deny"}]
        assert a.withdrawn
        assert a.asked == {}
        record = viewer.updates("_hub_permission")[-1]
        assert record["status"] == "resolved"
        assert record["resolvedBy"]["clientId"] == "c-b"


async def test_a_malformed_answer_is_refused_and_asked_again() -> None:
    async with hub_session() as (session, _, tg):
        a = Client("c-a", role="approver")
        join(session, a)
        outcomes = await ask(session, tg)
        a.answer(a.permission_copies()[0], {"outcome": {"outcome": "selected", "optionId": "x"}})
        assert [m for m, _ in a.notes] == ["_hub/answer_refused"]
        assert len(a.permission_copies()) == 1  # a fresh copy
        a.answer(a.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"


# A session and clients set up as in the tests around it: each reads alone.
async def test_a_request_nobody_may_answer_any_more_is_cancelled() -> None:
    async with hub_session() as (session, _, tg):
        a, viewer = Client("c-a", role="approver"), Client("c-v", role="viewer")
        join(session, a)
        join(session, viewer)
        outcomes = await ask(session, tg)
        a.answer(a.permission_copies()[0], error=RpcError(REQUEST_CANCELLED, "dismissed"))
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert viewer.updates("_hub_permission")[-1]["status"] == "cancelled"


async def test_the_owner_policy_offers_owners_only_and_a_late_owner_gets_a_copy() -> None:
    async with hub_session(permission_policy="owner") as (session, _, tg):
        driver, owner = Client("c-d", role="driver"), Client("c-o")
        join(session, driver)
        join(session, owner)
        outcomes = await ask(session, tg)
        assert driver.asked == {}
        assert len(owner.permission_copies()) == 1
        late = Client("c-late")
        join(session, late)
        assert len(late.permission_copies()) == 1
        session.detach(owner)
        late.answer(late.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"


async def test_the_lease_policy_moves_the_copy_with_the_lease() -> None:
    async with hub_session(permission_policy="lease", answer_grace=0) as (session, _, tg):
        a, b = Client("c-a", role="driver"), Client("c-b", role="driver")
        owner = Client("c-o")
        for client in (a, b, owner):
            join(session, client)
        session.lease_action(a, "request")
        outcomes = await ask(session, tg)
        assert len(a.permission_copies()) == 1
        assert b.asked == {}
        session.lease_action(owner, "grant", "c-b")
        assert a.asked == {}
        assert len(b.permission_copies()) == 1
        b.answer(b.permission_copies()[0], ALLOW)
        await until(lambda: bool(outcomes))
        assert outcomes[0]["optionId"] == "allow"
        assert owner.asked == {}  # the owner's copy was withdrawn too
        session.lease_action(owner, "grant", None)
        outcomes = await ask(session, tg)
        session.detach(owner)  # nobody else may answer, and no grace: cancelled at once
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]


async def test_an_unanswered_request_times_out() -> None:
    async with hub_session(permission_timeout=0.02) as (session, _, tg):
        a = Client("c-a", role="approver")
        join(session, a)
        outcomes = await ask(session, tg)
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert a.updates("_hub_permission")[-1]["status"] == "timed_out"
        assert a.withdrawn


async def test_the_agent_going_away_ends_the_turn_and_its_requests() -> None:
    async with hub_session() as (session, _, tg):
        owner = Client("c-o")
        join(session, owner)
        await session.prompt(owner, text("one"))
        outcomes = await ask(session, tg)
        session.on_agent_event({"status": "exited", "exitCode": 1, "signal": None})
        await until(lambda: bool(outcomes))
        assert outcomes == [{"outcome": "cancelled"}]
        assert not session.turns.busy
        # A session and clients set up as in the tests around it: each reads alone.
        assert owner.updates("_hub_agent")[-1]["status"] == "exited"


# -- elicitations ------------------------------------------------------------------------------


async def test_an_elicitation_goes_to_the_turns_sender_and_a_detach_answers_cancel() -> None:
    async with hub_session(answer_grace=0) as (session, _, tg):
        owner, driver = Client("c-o"), Client("c-d", role="driver")
        join(session, owner)
        # The elicitation of test_answer_grace.py, here with no grace: each test reads alone.
        join(session, driver)
        await session.prompt(driver, text("one"))
        answers: list[dict[str, Any]] = []

        async def elicit() -> None:
            answers.append(await session.on_elicitation({"elicitationId": "e-1", "message": "?"}))

        tg.start_soon(elicit)
        await until(lambda: bool(driver.asked))
        assert owner.asked == {}
        session.detach(driver)
        await until(lambda: bool(answers))
        assert answers == [{"action": "cancel"}]
        tg.start_soon(elicit)
        await until(lambda: bool(owner.asked))
        (request_id,) = owner.asked
        owner.answer(request_id, {"action": "accept", "content": {"x": 1}})
        await until(lambda: len(answers) == 2)
        assert answers[1] == {"action": "accept", "content": {"x": 1}}


async def test_config_changes_go_through_the_session_and_reach_every_client() -> None:
    async with hub_session() as (session, _, _):
        driver, viewer = Client("c-d", role="driver"), Client("c-v", role="viewer")
        join(session, driver)
        join(session, viewer)
        options = await session.set_config_option(driver, "model", "select", "fast")
        assert viewer.fold().config_options == options
        with pytest.raises(SessionFailure) as info:
            await session.set_mode(viewer, "code")
        assert info.value.error.code == FORBIDDEN


def test_the_stand_ins_are_what_the_session_expects() -> None:
    client: ClientHandle = Client("c-1")
    assert client.outbox.push(b"x")
