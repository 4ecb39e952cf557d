"""``_hub/subscribe_sessions``: one connection watches every session's card, live.

Real hub, real scripted agents, real sockets: a watcher that attaches to no session sees
sessions appear, stream, wait for a permission, finish and go away, with one notification per
pass, and nothing once it unsubscribed.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hub.server.watch import watch_of
from hub.settings import Settings
from tests.server.harness import TIMEOUT, AcpClient, acp_client, running_hub, scripted_agent
from tests.server.http_client import http_acp

pytestmark = pytest.mark.anyio


ANSWERS: dict[int, list[dict[str, Any]]] = {}


async def subscribe(watcher: AcpClient) -> list[dict[str, Any]]:
    sessions: list[dict[str, Any]] = (await watcher.call("_hub/subscribe_sessions", {}))["sessions"]
    ANSWERS[id(watcher)] = sessions
    return sessions


def cards(watcher: AcpClient) -> dict[str, dict[str, Any]]:
    """The latest card of every session the watcher was told about (the subscription's answer,
    then every notification), without the removed ones."""
    latest = {card["sessionId"]: card for card in ANSWERS.get(id(watcher), [])}
    for note in watcher.notifications:
        if note["method"] != "_hub/sessions_changed":
            continue
        for card in note["params"]["sessions"]:
            latest[card["sessionId"]] = card
        for session_id in note["params"]["removed"]:
            latest.pop(session_id, None)
    return latest


async def test_a_watcher_sees_every_session_live_without_attaching() -> None:
    async with (
        running_hub([scripted_agent(), scripted_agent("other")]) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
    ):
        first = await driver.new_session()
        answer = await subscribe(watcher)
        assert [c["sessionId"] for c in answer] == [first]
        card = answer[0]
        assert card["agent"] == "scripted"
        assert card["state"] == "idle"
        assert card["cwd"] == "/tmp"
        assert card["pendingPermissions"] == []
        assert card["turnStartedAt"] is None
        assert [c["name"] for c in card["clients"]] == ["test-owner"]  # the credential's name

        # A second session on the other agent appears; a turn streams into the first.
        second = await driver.new_session("other")
        await watcher.wait_for(lambda: second in cards(watcher))
        assert cards(watcher)[second]["agent"] == "other"
        await driver.prompt(first, "say one\nsay two\nsay three\nsay four\nsay the last line")
        await watcher.wait_for(
            lambda: (
                cards(watcher)[first]["answer"].endswith("the last line")
                and cards(watcher)[first]["state"] == "idle"
            )
        )

        # A permission request waits: the card says so, with what it takes to answer it.
        await driver.prompt(first, "permission Deploy now?")
        await watcher.wait_for(lambda: bool(cards(watcher)[first]["pendingPermissions"]))
        waiting = cards(watcher)[first]
        assert waiting["state"] == "requires_action"
        assert waiting["turnStartedAt"] is not None
        (pending,) = waiting["pendingPermissions"]
        assert "Deploy now?" in pending["title"]
        assert [o["optionId"] for o in pending["options"]] == ["allow", "reject"]
        request = next(r for r in driver.requests if r["method"] == "session/request_permission")
        await driver.answer(
            request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
        )
        await watcher.wait_for(
            lambda: (
                not cards(watcher)[first]["pendingPermissions"]
                and cards(watcher)[first]["state"] == "idle"
            )
        )
        assert cards(watcher)[first]["turnStartedAt"] is None

        # The watcher is attached to nothing: it got no session updates at all.
        assert watcher.updates == []

        # A closed session is removed.
        await driver.call("session/close", {"sessionId": second})
        await watcher.wait_for(lambda: second not in cards(watcher))

        # After unsubscribing, nothing more arrives: a second watcher, still subscribed, sees
        # the next change; the same pass would have told the first one in the same moment,
        # and a round trip on its connection flushes anything queued for it before.
        await watcher.call("_hub/unsubscribe_sessions", {})
        told = len(watcher.notifications)
        async with acp_client(hub.url) as control:
            await subscribe(control)
            await driver.prompt(first, "say after")
            await control.wait_for(lambda: cards(control)[first]["answer"] == "after")
        await watcher.call("session/list", {})
        assert len(watcher.notifications) == told


async def test_one_notification_per_pass_for_a_burst() -> None:
    """A turn that streams a hundred chunks is a few notifications, not a hundred."""
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
    ):
        session = await driver.new_session()
        await subscribe(watcher)
        await driver.prompt(session, "stream 100 8")
        await driver.wait_for(lambda: driver.idle_count(session) == 1)
        last = driver.last_seq(session)
        await watcher.wait_for(lambda: cards(watcher)[session]["seq"] >= last)
        assert cards(watcher)[session]["state"] == "idle"
        passes = [n for n in watcher.notifications if n["method"] == "_hub/sessions_changed"]
        assert 1 <= len(passes) < 20
        assert len(driver.session_updates(session)) > 100


async def test_a_closed_subscriber_is_dropped() -> None:
    async with running_hub([scripted_agent()]) as hub:
        assert hub.app.registry is not None
        watch = watch_of(hub.app.registry)
        async with acp_client(hub.url) as watcher:
            await watcher.call("_hub/subscribe_sessions", {})
            assert list(watch.subscribers) == [watcher.init_result["_meta"]["acp-hub"]["clientId"]]
        # The hub notices the close when it reads it: a round trip on another connection
        # after the close frame was sent is not enough, so wait for the hub's own bookkeeping.
        with anyio.fail_after(TIMEOUT):
            while hub.app.connections:  # noqa: ASYNC110 - the hub offers no event for this
                await anyio.sleep(0.01)
        assert watch.subscribers == {}


# Set up like the tests around it: each test spells out its own scenario.
async def test_a_subscriber_limited_to_some_sessions_hears_of_those_only() -> None:
    """The ``visible`` test a credential scoped to some sessions gives the watch."""
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
    ):
        mine = await driver.new_session()
        other = await driver.new_session()
        assert hub.app.registry is not None
        watch = watch_of(hub.app.registry)
        client_id = watcher.init_result["_meta"]["acp-hub"]["clientId"]
        (conn,) = [c for c in hub.app.connections if c.client_id == client_id]
        answer, more = watch.subscribe(conn, visible=lambda session_id: session_id == mine)
        assert [c["sessionId"] for c in answer] == [mine]
        assert not more
        await driver.prompt(other, "say not for you")
        await driver.prompt(mine, "say for you")
        await watcher.wait_for(lambda: cards(watcher).get(mine, {}).get("answer") == "for you")
        # A control watcher sees everything; once it hears that `other` is gone, the same
        # pass has been to the limited watcher too (a round trip flushes what it was sent).
        async with acp_client(hub.url) as control:
            await subscribe(control)
            await driver.call("session/close", {"sessionId": other})
            await control.wait_for(lambda: other not in cards(control))
        await watcher.call("session/list", {})
        told = {
            c["sessionId"]
            for n in watcher.notifications
            if n["method"] == "_hub/sessions_changed"
            for c in n["params"]["sessions"]
        } | {
            s
            for n in watcher.notifications
            if n["method"] == "_hub/sessions_changed"
            for s in n["params"]["removed"]
        }
        assert told == {mine}


@pytest.mark.parametrize("transport", ["websocket", "http"])
async def test_the_cards_come_in_pages_and_so_do_the_notifications(transport: str) -> None:
    # The whole picture of a full hub in one answer (1-2 MB) could pass outbox_bytes alone.
    settings = Settings(list_page_size=2)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as driver:
        created = sorted([await driver.new_session() for _ in range(5)])
        async with (
            acp_client(hub.url) if transport == "websocket" else http_acp(hub.http_acp)
        ) as watcher:
            pages: list[list[str]] = []
            params: dict[str, Any] = {}
            while True:
                answer = await watcher.call("_hub/subscribe_sessions", params)
                pages.append([c["sessionId"] for c in answer["sessions"]])
                if "nextCursor" not in answer:
                    break
                params = {"cursor": answer["nextCursor"]}
            assert pages == [created[0:2], created[2:4], created[4:]]
            bad = {"cursor": "c1.nope!"}
            with pytest.raises(Exception, match="cursor"):
                await watcher.call("_hub/subscribe_sessions", bad)
            # A pass that changes every session: notifications of at most two cards each.
            for session_id in created:
                await driver.call("_hub/set_policy", {"sessionId": session_id, "prompt": "lease"})

            def told() -> list[list[str]]:
                if isinstance(watcher, AcpClient):
                    notes = watcher.notifications
                else:
                    notes = [
                        e.data
                        for e in watcher.events
                        if isinstance(e.data, dict) and "method" in e.data
                    ]
                return [
                    [c["sessionId"] for c in n["params"]["sessions"]]
                    for n in notes
                    if n["method"] == "_hub/sessions_changed"
                ]

            await watcher.wait_for(lambda: {s for page in told() for s in page} == set(created))
            assert all(len(page) <= 2 for page in told())
