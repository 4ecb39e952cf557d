"""The seam between the server and a session: a session this node owns (``Session``) and one it
follows for another node's owner (``MirrorSession``) are both ``SessionOps``, share one core
(state, log, fan-out, catch-up), and derive their policies and ``lost`` from the fold."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.errors import FORBIDDEN
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure
from hub.sessions.mirror import FORWARDED_METHODS, MirrorSession
from hub.sessions.ops import SessionOps
from hub.sessions.remote import RemoteClient
from hub.sessions.session import Session
from hub.settings import Settings
from hub.store import Restored, SessionRecord
from hub.store.log import EventLog
from tests.sessions.harness import Client, hub_session, idle, join, text

pytestmark = pytest.mark.anyio

Forwarded = list[tuple[str, str, dict[str, Any]]]


def follow(owner: Session, forwarded: Forwarded) -> MirrorSession:
    """A mirror of ``owner`` built from an empty store entry, that records what it forwards."""

    async def forward(
        mirror: MirrorSession, op: str, client: ClientHandle, params: dict[str, Any]
    ) -> Any:
        forwarded.append((op, client.client_id, params))
        return {"forwarded": op}

    record = SessionRecord(owner.id, owner.agent.name, owner.cwd, "a-1", "queue", "first")
    log = EventLog(max_events=1000, max_bytes=1 << 20)
    return MirrorSession(Restored(record, log, [], True), forward, settings=Settings())


def catch_up(mirror: MirrorSession, owner: Session) -> None:
    """What the follow task does: hand the mirror the owner's events it does not have."""
    mirror.ingest(owner.log.rows_after(mirror.log.last_seq))


def permissions(*sessions: SessionOps) -> list[str]:
    return [session.permission_policy for session in sessions]


def chunk(value: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "messageId": "m-1", "content": text(value)[0]}


def use(session: SessionOps, client: Client, replay: str | None = None) -> dict[str, Any]:
    """Attach through the seam only, as the connection does."""
    cursor = session.attach(client, replay=replay)
    session.announce(client)
    return cursor


async def test_both_kinds_fan_out_the_same_frames_through_the_seam() -> None:
    async with hub_session() as (owner, _, _tg):
        mirror = follow(owner, [])
        here, there = Client("c-here"), Client("c-there")
        sessions: list[SessionOps] = [owner, mirror]
        for session, client in zip(sessions, (here, there), strict=True):
            use(session, client)
        owner.on_update(chunk("hi"))
        idle(owner)
        catch_up(mirror, owner)
        events = [f for f in here.outbox.frames if b'"agent_message_chunk"' in f]
        assert events
        assert events == [f for f in there.outbox.frames if f in events]
        assert mirror.cursor == owner.cursor
        assert mirror.state.foreground == owner.state.foreground == "idle"
        # The summary has one shape; the presence is the owner's, the clients each node's.
        assert owner.summary().keys() == mirror.summary().keys()
        assert [c["clientId"] for c in mirror.summary()["clients"]] == ["c-there"]
        # A late client of the mirror catches up from the mirror's own log and state.
        late = Client("c-late")
        assert use(mirror, late, replay="start") == owner.cursor
        assert late.fold().snapshot() == here.fold().snapshot()
        for session, client in zip(sessions, (here, there), strict=True):
            session.detach(client)
        assert owner.summary()["clients"] == []
        assert [c["clientId"] for c in mirror.summary()["clients"]] == ["c-late"]


async def test_only_the_mirror_sends_hub_methods_to_the_owner() -> None:
    async with hub_session() as (owner, _, _tg):
        forwarded: Forwarded = []
        mirror = follow(owner, forwarded)
        client = Client("c-1")
        use(mirror, client)
        assert all(owner.answers_here(m) for m in FORWARDED_METHODS)
        assert not any(mirror.answers_here(m) for m in FORWARDED_METHODS)
        assert mirror.answers_here("session/detach")
        params = {"sessionId": owner.id, "prompt": "lease"}
        assert await mirror.forward_method(client, "_hub/set_policy", params) == {
            "forwarded": "method"
        }
        assert await mirror.prompt(client, text("go")) == {"forwarded": "prompt"}
        assert [op for op, _, _ in forwarded] == ["method", "prompt"]
        with pytest.raises(SessionFailure):
            await mirror.forward_method(client, "session/detach", {})
        # The role is checked on this node before anything is sent.
        viewer = Client("c-v", role="viewer")
        use(mirror, viewer)
        with pytest.raises(SessionFailure) as refused:
            await mirror.prompt(viewer, text("no"))
        assert refused.value.error.code == FORBIDDEN
        assert len(forwarded) == 2


async def test_policies_and_lost_are_derived_from_the_fold_on_both_kinds() -> None:
    async with hub_session() as (owner, _, _tg):
        mirror = follow(owner, [])
        boss = Client("c-o")
        join(owner, boss)
        owner.set_policy(boss, "lease", "owner")
        catch_up(mirror, owner)
        assert (owner.prompt_policy, owner.permission_policy) == ("lease", "owner")
        assert (mirror.prompt_policy, mirror.permission_policy) == ("lease", "owner")
        # Every policy set_policy accepts is one the log records, so other nodes see it too.
        owner.set_policy(boss, None, "designated", 3)  # the quorum waits for `consensus`
        catch_up(mirror, owner)
        assert permissions(owner, mirror) == ["designated", "designated"]
        assert boss.fold().hub("_hub_policy") == {"prompt": "lease", "permission": "designated"}
        owner.set_policy(boss, None, "consensus")
        catch_up(mirror, owner)
        assert permissions(owner, mirror) == ["consensus", "consensus"]
        expected = {"prompt": "lease", "permission": "consensus", "quorum": 3}
        assert boss.fold().hub("_hub_policy") == expected
        # The quorum is the fold's, whatever the session was started with.
        owner.core.defaults.quorum = 1
        assert owner.consensus_quorum == 3
        assert not owner.lost
        assert not mirror.lost
        owner.on_agent_event({"status": "lost", "message": "gone"})
        catch_up(mirror, owner)
        assert owner.lost
        assert mirror.lost
        assert owner.summary()["state"] == mirror.summary()["state"] == "lost"


async def test_a_client_of_another_node_is_in_the_presence_but_not_the_fan_out() -> None:
    async with hub_session() as (owner, _, _tg):
        local = Client("c-local")
        join(owner, local)
        remote = RemoteClient("c-remote", "far", "driver", 2)
        owner.attach(remote, replay="start", relayed=True)
        owner.announce(remote)
        assert [c["clientId"] for c in owner.summary()["clients"]] == ["c-local", "c-remote"]
        before = owner.metrics.deliveries
        owner.on_update(chunk("x"))
        assert owner.metrics.deliveries - before == 1  # the local client only
        owner.dismiss({"sessionId": owner.id}, "session closed")
        assert owner.attached == {}
        assert ("_hub/session_closed", {"sessionId": owner.id}) in local.notes
