"""A hub restarted on a durable store (SQLite, a real redis-server) brings its sessions back.

The hub runs as a real process (``acp-hub serve``) with the scripted agent; clients are real
WebSocket clients. A clean restart (SIGINT) keeps every session's epoch: a client's cursor
resumes with no reset, no gap and no duplicate. A crash (SIGKILL) continues each log under a
new epoch that serves cursors up to the last stored event exactly, and gives a cursor past it
(an event the crash lost) a ``_hub_reset`` and the state. Sessions come back with their
history and policies; the agent takes them back with ``session/resume`` where it can (the
scripted agent keeps its sessions in ``--state-dir``), and they are promptable again; where it
cannot, the session is ``lost``: listed, readable, replayable, and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.protocol.state import SessionState
from hub.sessions.session import snapshot_phase
from hub.store import open_store
from hub.store.base import Snapshot, Store
from tests.hubproc import hub_process, scripted
from tests.redis_server import RedisServer
from tests.server.harness import AcpClient, RpcFailure, acp_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SESSION_LOST = -32043


NODE = {"node_name": "node-a", "node_lease": 2.0}
"""The same node name at every start: a restarted node takes its own sessions back at once."""


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/data/hub.db"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def resumable_agent(tmp_path: Path) -> str:
    """The scripted agent keeping its sessions in a directory: a new process resumes them."""
    state = tmp_path / "agent-state"
    state.mkdir()
    return scripted("--state-dir", str(state))


def meta(params: dict[str, Any]) -> dict[str, Any]:
    return dict(params.get("_meta", {}).get("acp-hub", {}))


def resets(client: AcpClient, session_id: str) -> int:
    return sum(
        1
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "_hub_reset"
    )


async def resume(client: AcpClient, session_id: str, epoch: int, seq: int) -> dict[str, Any]:
    result = await client.call(
        "session/resume",
        {
            "sessionId": session_id,
            "cwd": "/",
            "replayFrom": {"type": "_hub_after", "epoch": epoch, "seq": seq},
        },
    )
    return meta(result)


async def replay_state(url: str, session_id: str) -> tuple[SessionState, dict[str, Any]]:
    """The state a late joiner folds from a full replay, and the cursor it got."""
    async with acp_client(url) as late:
        result = await late.call(
            "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": {"type": "start"}}
        )
        cursor = meta(result)
        # Only what the cursor covers: live events (its own arrival) may already follow it.
        state = SessionState().apply_all(
            p["update"]
            for p in late.session_updates(session_id)
            if meta(p).get("seq", 0) <= cursor["seq"]
        )
        return state, cursor


def without_presence(state: SessionState) -> dict[str, Any]:
    """``state``'s snapshot without who is attached: a late joiner's compacted replay may
    already list the joiner itself, whose live arrival comes after the replay's cursor."""
    snapshot = state.snapshot()
    snapshot["hub"].pop("_hub_presence", None)
    return snapshot


async def held_at(
    client: AcpClient, before: SessionState, session_id: str, seq: int
) -> SessionState:
    """The state ``client`` holds at event ``seq`` (``before`` and its events up to it): what a
    replay answered at ``seq`` must equal (later events, a late joiner's presence, may follow)."""
    await client.wait_for(lambda: client.last_seq(session_id) >= seq)
    return before.apply_all(
        p["update"] for p in client.session_updates(session_id) if meta(p).get("seq", 0) <= seq
    )


async def stored_up_to(store_url: str, session_id: str, seq: int) -> None:
    """Wait until the store holds event ``seq`` of ``session_id`` (written by the hub)."""
    store = open_store(store_url)
    async with store.running():
        with anyio.fail_after(20):
            # Another process's write: there is nothing to wait on but the store itself.
            while await store.read_after(session_id, seq - 1) is None:  # noqa: ASYNC110
                await anyio.sleep(0.02)


async def snapshot_from(store: Store, session_id: str, seq: int) -> Snapshot:
    """The stored snapshot of ``session_id`` once it is as of event ``seq`` or later."""
    with anyio.fail_after(20):
        # Another process's write: there is nothing to wait on but the store itself.
        while (snap := await store.latest_snapshot(session_id)) is None or snap.seq < seq:  # noqa: ASYNC110
            await anyio.sleep(0.02)
    return snap


async def first_turn(url: str, cwd: Path) -> tuple[str, int, int, SessionState]:
    """A session with one finished turn; its id, the cursor and the state a client holds."""
    async with acp_client(url) as client:
        session_id = await client.new_session(cwd=str(cwd))
        await client.call(
            "_hub/set_policy", {"sessionId": session_id, "prompt": "reject", "permission": "owner"}
        )
        await client.prompt(session_id, "say hello from before the restart\ntitle Before")
        await client.wait_for(lambda: client.idle_count(session_id) == 1)
        last = client.session_updates(session_id)[-1]
        cursor = meta(last)
        return session_id, int(cursor["epoch"]), int(cursor["seq"]), client.fold(session_id)


def contiguous_after(client: AcpClient, session_id: str, seq: int) -> list[int]:
    seqs = client.seqs(session_id)
    assert seqs, "no live event after the resume"
    assert seqs == list(range(seq + 1, seq + 1 + len(seqs))), seqs
    return seqs


async def test_clean_restart_resumes_cursors_exactly(tmp_path: Path, store_url: str) -> None:
    agent = resumable_agent(tmp_path)
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with hub_process(tmp_path, store_url, agent, hub=NODE) as hub:
        session_id, epoch, seq, before = await first_turn(hub.url, cwd)
        assert await hub.interrupt() == 0
        assert "Traceback" not in hub.log()
    async with (
        hub_process(tmp_path, store_url, agent, hub=NODE) as hub,
        acp_client(hub.url) as client,
    ):
        listed = await client.call("session/list", {})
        (entry,) = [s for s in listed["sessions"] if s["sessionId"] == session_id]
        assert entry["title"] == "Before"
        assert entry["_meta"]["acp-hub"]["epoch"] == epoch
        assert entry["_meta"]["acp-hub"]["promptPolicy"] == "reject"
        assert entry["_meta"]["acp-hub"]["permissionPolicy"] == "owner"
        cursor = await resume(client, session_id, epoch, seq)
        assert cursor["epoch"] == epoch
        assert resets(client, session_id) == 0
        # The agent took the session back: promptable again, on the same history.
        await client.prompt(session_id, "say hello after the restart")
        await client.wait_for(lambda: client.idle_count(session_id) == 1)
        contiguous_after(client, session_id, seq)
        state, cursor = await replay_state(hub.url, session_id)
        held = await held_at(client, before, session_id, cursor["seq"])
        assert without_presence(held) == without_presence(state)
        agent_status = state.hub("_hub_agent")
        assert agent_status is not None
        assert agent_status["status"] == "restarted"
        assert len(state.message_ids) == 4  # two prompts, two answers
        assert await hub.interrupt() == 0
        assert "Traceback" not in hub.log()


async def test_crash_continues_under_a_new_epoch(tmp_path: Path, store_url: str) -> None:
    agent = resumable_agent(tmp_path)
    cwd = tmp_path / "project"
    cwd.mkdir()
    async with hub_process(tmp_path, store_url, agent, hub=NODE) as hub:
        session_id, epoch, seq, before = await first_turn(hub.url, cwd)
        await stored_up_to(store_url, session_id, seq)
        async with acp_client(hub.url) as client:
            await client.call("session/resume", {"sessionId": session_id, "cwd": "/"})
            await client.prompt(session_id, "permission Edit it?")
            await client.wait_for(lambda: bool(client.requests))
            pending = client.requests[0]["params"]["_meta"]["acp-hub"]["permissionId"]
            # Killed once the store holds the pending request (what is not written yet when
            # the hub dies is lost: that window is the other half of this test).
            (record,) = [
                p
                for p in client.session_updates(session_id)
                if p["update"].get("permissionId") == pending
            ]
            await stored_up_to(store_url, session_id, meta(record)["seq"])
            await hub.kill()
    async with hub_process(tmp_path, store_url, agent, hub=NODE) as hub:
        async with acp_client(hub.url) as client, acp_client(hub.url) as ahead:
            cursor = await resume(client, session_id, epoch, seq)
            assert cursor["epoch"] != epoch  # a new epoch continues the stored history
            # A cursor past what was stored names events the crash may have lost: a reset.
            await resume(ahead, session_id, epoch, cursor["seq"] + 5)
            await ahead.wait_for(lambda: resets(ahead, session_id) == 1)
            await client.wait_for(
                lambda: any(
                    p["update"].get("sessionUpdate") == "_hub_permission"
                    and p["update"].get("permissionId") == pending
                    and p["update"].get("status") == "cancelled"
                    for p in client.session_updates(session_id)
                )
            )
            # The checks after the restart of the test above, for another way to stop.
            assert resets(client, session_id) == 0
            await client.prompt(session_id, "say hello after the crash")
            await client.wait_for(lambda: client.idle_count(session_id) == 1)
            contiguous_after(client, session_id, seq)
            state, cursor = await replay_state(hub.url, session_id)
            held = await held_at(client, before, session_id, cursor["seq"])
            assert without_presence(held) == without_presence(state)
            last = client.last_seq(session_id)
            await ahead.wait_for(lambda: ahead.last_seq(session_id) >= last)
            assert ahead.fold(session_id).snapshot() == state.snapshot()
        assert await hub.interrupt() == 0


async def test_periodic_snapshots_fall_at_each_sessions_phase_and_rebuild_it(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path}/hub.db"
    every = 4
    agent = resumable_agent(tmp_path)
    async with (
        hub_process(tmp_path, store_url, agent, hub={**NODE, "snapshot_events": every}) as hub,
        acp_client(hub.url) as client,
    ):
        # Sessions until two have different phases (a quarter of pairs share one).
        sessions = [await client.new_session(cwd=str(tmp_path))]
        while len({snapshot_phase(s, every) for s in sessions}) < 2:
            sessions.append(await client.new_session(cwd=str(tmp_path)))
        sessions = [sessions[0], sessions[-1]]
        for session_id in sessions:
            await client.prompt(session_id, "\n".join(f"say line {n}" for n in range(6)))
        await client.wait_for(lambda: all(client.idle_count(s) == 1 for s in sessions))
        before = {s: client.fold(s).snapshot()["timeline"] for s in sessions}
        store = open_store(store_url)
        async with store.running():
            for session_id in sessions:
                last = client.last_seq(session_id)
                phase = snapshot_phase(session_id, every)
                due = max(n for n in range(1, last + 1) if (n + phase) % every == 0)
                snap = await snapshot_from(store, session_id, due)
                assert snap.seq == due, (snap.seq, due, phase)
        await hub.kill()
    # A crash: the restart folds each session's snapshot and the events after it.
    async with hub_process(tmp_path, store_url, agent, hub=NODE) as hub:
        for session_id in sessions:
            state, _ = await replay_state(hub.url, session_id)
            assert state.snapshot()["timeline"] == before[session_id]
        assert await hub.interrupt() == 0
        assert "Traceback" not in hub.log()


async def test_a_session_the_agent_cannot_take_back_is_lost(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/hub.db"
    agent = scripted()  # no --state-dir: a new agent process does not know the session
    async with hub_process(tmp_path, store, agent, hub=NODE) as hub:
        session_id, epoch, seq, before = await first_turn(hub.url, tmp_path)
        assert await hub.interrupt() == 0
    async with hub_process(tmp_path, store, agent, hub=NODE) as hub, acp_client(hub.url) as client:
        await resume(client, session_id, epoch, seq)
        await client.wait_for(
            lambda: any(
                p["update"].get("sessionUpdate") == "_hub_agent"
                and p["update"].get("status") == "lost"
                for p in client.session_updates(session_id)
            )
        )
        listed = await client.call("session/list", {})
        (entry,) = [s for s in listed["sessions"] if s["sessionId"] == session_id]
        assert entry["_meta"]["acp-hub"]["state"] == "lost"
        state, _ = await replay_state(hub.url, session_id)
        assert state.message_ids == before.message_ids  # readable, replayable
        status = state.hub("_hub_agent")
        assert status is not None
        assert status["status"] == "lost"
        with pytest.raises(RpcFailure) as failure:
            await client.prompt(session_id, "say anyone there?")
        assert failure.value.code == SESSION_LOST
        assert await hub.interrupt() == 0
        assert "Traceback" not in hub.log()


async def test_session_rules_come_back_and_answer(tmp_path: Path, store_url: str) -> None:
    agent = resumable_agent(tmp_path)
    cwd = tmp_path / "project"
    cwd.mkdir()
    rule = {"match": {"kind": "edit", "path": "src/**"}, "answer": "allow"}
    async with hub_process(tmp_path, store_url, agent, hub=NODE) as hub:
        async with acp_client(hub.url) as client:
            session_id = await client.new_session(cwd=str(cwd))
            added = await client.call("_hub/rules/add", {"sessionId": session_id, **rule})
        assert await hub.interrupt() == 0
    async with (
        hub_process(tmp_path, store_url, agent, hub=NODE) as hub,
        acp_client(hub.url) as client,
    ):
        listed = await client.call("_hub/rules/list", {"sessionId": session_id})
        assert [(r["ruleId"], r["match"], r["answer"]) for r in listed["rules"]] == [
            (added["ruleId"], rule["match"], "allow")
        ]
        await client.call("session/resume", {"sessionId": session_id, "cwd": "/"})
        await client.prompt(session_id, "permission-edit src/main.py")
        await client.wait_for(lambda: client.idle_count(session_id) == 1)
        assert not client.requests  # nobody was asked: the stored rule answered
        decided = [
            p["update"]
            for p in client.session_updates(session_id)
            if p["update"].get("sessionUpdate") == "_hub_permission"
            and p["update"].get("status") == "resolved"
        ]
        assert [d["by"]["rule"] for d in decided] == [added["ruleId"]]
        said = [
            p["update"]["content"]["text"]
            for p in client.session_updates(session_id)
            if p["update"].get("sessionUpdate") == "agent_message_chunk"
        ]
        assert said == ["permission: selected allow"]
        assert await hub.interrupt() == 0
        assert "Traceback" not in hub.log()
