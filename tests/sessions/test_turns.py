"""``hub.sessions.turns`` on its own: the turn in progress, the prompt queue and its previews,
the user message's attribution and the hub-minted id of a queued prompt, and the cancel
deadline, against the in-process stand-ins of ``tests/sessions/harness.py``."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from hub.protocol.errors import AGENT_UNAVAILABLE, FORBIDDEN, INVALID_PARAMS, REQUEST_CANCELLED
from hub.sessions.errors import SessionFailure
from hub.sessions.turns import _preview
from tests.sessions.harness import Agent, Client, hub_session, idle, join, text, until

pytestmark = pytest.mark.anyio


def refusal(call: Callable[[], object]) -> int:
    """The code of the error ``call`` is refused with."""
    with pytest.raises(SessionFailure) as info:
        call()
    return info.value.error.code


def test_the_preview_is_the_first_text_block_cut_to_its_limit() -> None:
    image = {"type": "image", "data": "", "mimeType": "image/png"}
    assert _preview([image, {"type": "text", "text": "hello"}]) == "hello"
    assert _preview([{"type": "text", "text": "x" * 200}], limit=10) == "x" * 9 + "\u2026"
    assert _preview([{"type": "text", "text": "x" * 10}], limit=10) == "x" * 10
    assert _preview([image, {"type": "text", "text": 3}]) == "(non-text prompt)"


async def test_the_turn_belongs_to_its_sender_until_the_agent_is_idle() -> None:
    async with hub_session() as (session, _, _):
        a, b = Client("c-a"), Client("c-b")
        join(session, a)
        join(session, b)
        turns = session.turns
        assert not turns.busy
        await session.prompt(a, text("one"))
        assert turns.busy
        assert turns.started_by("c-a")
        assert not turns.started_by("c-b")
        idle(session)
        assert not turns.busy
        assert turns.current is None
        assert not turns.started_by("c-a")


async def test_the_agents_own_turn_keeps_the_session_busy() -> None:
    async with hub_session(prompt_policy="reject") as (session, _, _):
        a = Client("c-a")
        join(session, a)
        session.on_update({"sessionUpdate": "state_update", "state": "running"})
        assert session.turns.busy
        assert session.turns.current is None  # no prompt of the hub's: nobody started it
        assert not session.turns.started_by("c-a")
        idle(session)
        assert not session.turns.busy


async def test_the_queue_says_who_waits_with_what_and_drops_what_is_withdrawn() -> None:
    async with hub_session() as (session, _, _):
        a, b = Client("c-a", name="Ann", principal="ann"), Client("c-b", principal="bob")
        join(session, a)
        join(session, b)
        await session.prompt(a, text("running"))
        first = await session.prompt(b, text("y" * 300))
        second = await session.prompt(a, [{"type": "image", "data": "", "mimeType": "image/png"}])
        (entry_1, entry_2) = b.updates("_hub_queue")[-1]["entries"]
        assert entry_1["queueId"] == first["_meta"]["acp-hub"]["queueId"]
        assert entry_2["queueId"] == second["_meta"]["acp-hub"]["queueId"]
        assert (entry_1["clientId"], entry_1["principal"]) == ("c-b", "bob")
        assert entry_1["preview"] == "y" * 119 + "\u2026"
        assert (entry_2["name"], entry_2["preview"]) == ("Ann", "(non-text prompt)")
        assert [e.queue_id for e in session.turns.queue] == [entry_1["queueId"], entry_2["queueId"]]
        # Only a driver withdraws, its own prompt, or anyone's as an owner; an unknown id is
        # a parameter error.
        viewer, driver = Client("c-v", role="viewer"), Client("c-d", role="driver")
        join(session, viewer)
        join(session, driver)
        assert refusal(lambda: session.withdraw_prompt(viewer, entry_1["queueId"])) == FORBIDDEN
        assert refusal(lambda: session.withdraw_prompt(driver, entry_1["queueId"])) == FORBIDDEN
        assert refusal(lambda: session.withdraw_prompt(b, "q-nope")) == INVALID_PARAMS
        session.withdraw_prompt(a, entry_1["queueId"])  # an owner withdraws another's
        assert [e["queueId"] for e in b.updates("_hub_queue")[-1]["entries"]] == [
            entry_2["queueId"]
        ]
        assert [e.queue_id for e in session.turns.queue] == [entry_2["queueId"]]
        session.turns.forget_client(a)
        assert session.turns.queue == []
        assert b.updates("_hub_queue")[-1]["entries"] == []


# A session and clients set up as in the tests around it: each reads alone.
async def test_a_queued_v2_prompt_keeps_the_id_the_hub_minted_for_its_user_message() -> None:
    async with hub_session() as (session, agent, _):
        a, b = Client("c-a"), Client("c-b")
        join(session, a)
        join(session, b)
        await session.prompt(a, text("one"))
        queued = await session.prompt(b, text("two"))
        minted = queued["messageId"]
        assert minted == queued["_meta"]["acp-hub"]["messageId"]
        assert minted.startswith("hub-")
        idle(session)
        # The queued prompt starts; the agent names its user message `u-2`, an alias of the
        # minted id, under which every client sees it and its attribution.
        await until(lambda: len(agent.prompts) == 2)
        await until(lambda: session.turns.started_by("c-b"))
        assert session.turns.aliases == {"u-2": minted}
        users = [u for u in a.updates("user_message") if u["messageId"] != "u-1"]
        assert [u["messageId"] for u in users] == [minted]
        prompts = {p["messageId"]: p["clientId"] for p in a.updates("_hub_prompt")}
        assert prompts == {"u-1": "c-a", minted: "c-b"}
        # A later update of the same user message is rewritten too.
        session.on_update({"sessionUpdate": "user_message", "messageId": "u-2", "content": []})
        assert a.updates("user_message")[-1]["messageId"] == minted


async def test_an_agent_that_names_no_message_is_attributed_its_first_user_message() -> None:
    agent = Agent(ack_id=lambda n: None)
    async with hub_session(agent) as (session, _, tg):
        a = Client("c-a")
        join(session, a)
        answers: list[dict[str, object]] = []

        async def prompt() -> None:
            answers.append(await session.prompt(a, text("one")))

        tg.start_soon(prompt)
        # The v2 answer waits for the user message (the stand-in sends it while prompting).
        await until(lambda: bool(answers))
        assert answers[0]["messageId"] == "u-1"
        (attribution,) = a.updates("_hub_prompt")
        assert (attribution["messageId"], attribution["clientId"]) == ("u-1", "c-a")
        # A user message of no turn is emitted, attributed to nobody.
        idle(session)
        assert session.turns.on_user_message(
            {"sessionUpdate": "user_message", "messageId": "u-x", "content": []}
        )
        assert len(a.updates("_hub_prompt")) == 1
        assert not session.turns.on_user_message({"sessionUpdate": "agent_message_chunk"})
        assert not session.turns.on_user_message({"sessionUpdate": "user_message"})


async def test_a_withdrawn_v1_prompt_is_answered_cancelled() -> None:
    async with hub_session() as (session, _, tg):
        a, v1 = Client("c-a"), Client("c-1", version=1)
        join(session, a)
        join(session, v1)
        await session.prompt(a, text("one"))
        errors: list[int] = []

        async def prompt() -> None:
            with pytest.raises(SessionFailure) as info:
                await session.prompt(v1, text("two"))
            errors.append(info.value.error.code)

        tg.start_soon(prompt)
        await until(lambda: bool(session.turns.queue))
        session.withdraw_prompt(v1, session.turns.queue[0].queue_id)
        await until(lambda: bool(errors))
        assert errors == [REQUEST_CANCELLED]


async def test_a_turn_the_agent_does_not_end_after_a_cancel_is_ended_by_the_hub() -> None:
    async with hub_session(agent_response_timeout=0.05) as (session, agent, _):
        a, b = Client("c-a"), Client("c-b")
        join(session, a)
        join(session, b)
        await session.prompt(a, text("one"))
        await session.prompt(b, text("two"))  # queued behind the turn
        await session.cancel(a)
        await session.cancel(a)  # a second cancel of the same turn goes nowhere
        assert agent.cancels == 1
        with anyio.fail_after(5):
            await until(lambda: len(agent.prompts) == 2)  # the queue moved on
        ended = [u for u in a.updates("state_update") if u.get("stopReason") == "cancelled"]
        assert ended[0]["_meta"]["acp-hub"]["error"]["code"] == AGENT_UNAVAILABLE
