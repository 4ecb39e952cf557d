"""Chaos on a real hub: agents that stop answering or die at the worst moment, clients that
vanish holding what others wait for. Every wait is for an event; every process is resumed and
every socket closed on every path."""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson
import pytest
from websockets.asyncio.client import connect

from hub.protocol.errors import AGENT_UNAVAILABLE
from hub.protocol.state import SessionState
from hub.server.outbox import Outbox
from hub.sessions.session import Session
from hub.settings import PermissionPolicy, Settings

# The shared harness's names, imported by every test module that uses them.
from tests.server.harness import (
    AcpClient,
    HubHandle,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)

pytestmark = pytest.mark.anyio


def agent_pid(hub: HubHandle, name: str) -> int:
    supervisor = hub.app.supervisor
    assert supervisor is not None
    pid = supervisor.get(name).pid
    assert pid is not None
    return pid


def hub_session(hub: HubHandle, session_id: str) -> Session:
    registry = hub.app.registry
    assert registry is not None
    return registry.sessions[session_id]


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The agent process is stopped (SIGSTOP) for the block, then killed: whatever it would
    say after waking up is not what the test is about."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with suppress(ProcessLookupError):  # SIGKILL ends a stopped process too
            os.kill(pid, signal.SIGKILL)


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, bad[0].getMessage()


def contiguous(seqs: list[int]) -> bool:
    events = [s for i, s in enumerate(seqs) if i == 0 or s != seqs[i - 1]]
    return bool(events) and events == list(range(events[0], events[0] + len(events)))


def agent_status(client: AcpClient, session_id: str) -> str | None:
    statuses = [
        p["update"].get("status")
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "_hub_agent"
    ]
    return statuses[-1] if statuses else None


def queue_lengths(client: AcpClient, session_id: str) -> list[int]:
    return [
        len(p["update"]["entries"])
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "_hub_queue"
    ]


def said(client: AcpClient, session_id: str, text: str) -> bool:
    return any(
        isinstance(p["update"].get("content"), dict)
        and text in str(p["update"]["content"].get("text"))
        for p in client.session_updates(session_id)
    )


def forced_idles(client: AcpClient, session_id: str) -> list[dict[str, Any]]:
    """The ``idle`` states the hub made itself when the agent ignored a cancel (v1 clients
    with the hub's events get them wrapped in ``_hub_v2``)."""
    out = []
    for params in client.session_updates(session_id):
        update = params["update"]
        if update.get("sessionUpdate") == "_hub_v2":
            update = update["update"]
        error = update.get("_meta", {}).get("acp-hub", {}).get("error")
        if update.get("state") == "idle" and error is not None:
            out.append(update)
    return out


# -- an agent that stops answering ------------------------------------------------------------


async def test_a_stopped_agent_cannot_hold_a_turn_or_a_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    settings = Settings(agent_response_timeout=1.0)
    async with (
        running_hub([scripted_agent("frozen", 2)], settings) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
        acp_client(hub.url, 1, events=True) as old,
    ):
        sid = await driver.new_session()
        for client in (watcher, old):
            await client.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await driver.prompt(sid, "say ready\nsleep 600000")
        await driver.wait_for(lambda: said(driver, sid, "ready"))
        session = hub_session(hub, sid)
        with stopped(agent_pid(hub, "frozen")):
            # Mid-turn, the agent stops. A v1 client's prompt queues behind the turn.
            pending = await old.start(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "say again"}]},
            )
            await watcher.wait_for(lambda: queue_lengths(watcher, sid)[-1:] == [1])
            # The cancel goes out, nothing comes back, and after `agent_response_timeout`
            # the hub ends the turn itself, visibly for everyone.
            await driver.notify("session/cancel", {"sessionId": sid})
            for client in (driver, watcher, old):
                await client.wait_for(lambda c=client: len(forced_idles(c, sid)) == 1)  # type: ignore[misc]
            idle = forced_idles(driver, sid)[0]
            assert idle["stopReason"] == "cancelled"
            assert idle["_meta"]["acp-hub"]["error"]["code"] == AGENT_UNAVAILABLE

            # The queued prompt starts (the queue empties) and waits for an agent that never
            # accepts it.
            await watcher.wait_for(lambda: queue_lengths(watcher, sid)[-1:] == [0])
            assert session.turns.current is not None

            # A request with a deadline fails instead of hanging ...
            with pytest.raises(RpcFailure) as late:
                await driver.call(
                    "session/set_config_option",
                    {"sessionId": sid, "configId": "mode", "value": "code"},
                )
            assert late.value.code == AGENT_UNAVAILABLE
            assert "no answer to session/set_config_option" in late.value.error["message"]

            # ... and the prompt nobody accepted ends with the next cancel, whoever sends it.
            await watcher.notify("session/cancel", {"sessionId": sid})
            with pytest.raises(RpcFailure) as refused:
                await old.result(pending)
            assert refused.value.code == AGENT_UNAVAILABLE
            for client in (driver, watcher, old):
                await client.wait_for(lambda c=client: len(forced_idles(c, sid)) == 2)  # type: ignore[misc]
            assert session.turns.current is None
        # Killed at the end: the session says so, and nothing is pending any more.
        await driver.wait_for(lambda: agent_status(driver, sid) == "exited")
        for client in (driver, watcher, old):
            await client.wait_for(
                lambda c=client: session.settled and c.last_seq(sid) == session.log.last_seq
            )
            assert contiguous(client.seqs(sid))
        assert driver.fold(sid).snapshot() == session.state.snapshot()
    no_traceback(caplog)


# -- a client that vanishes holding a permission request --------------------------------------


def permission_status(client: AcpClient, session_id: str) -> list[str]:
    return [
        p["update"]["status"]
        for p in client.session_updates(session_id)
        if p["update"].get("sessionUpdate") == "_hub_permission"
    ]


@pytest.mark.parametrize("others", ["none", "approver"])
async def test_a_client_that_vanishes_with_a_permission_request(
    others: str, caplog: pytest.LogCaptureFixture
) -> None:
    # `none`: the vanished owner held the only copy (policy `owner`): the request waits for it
    # (`answer_grace`, short here), then resolves `cancelled`. `approver`: another eligible
    # client still holds its copy (policy `first`) and its answer is the one that counts.
    caplog.set_level(logging.WARNING)
    policy: PermissionPolicy = "owner" if others == "none" else "first"
    settings = Settings(permission_policy=policy, answer_grace=0.5)
    async with (
        running_hub([scripted_agent("asker", 2)], settings) as hub,
        acp_client(hub.url, role="viewer", name="viewer") as viewer,
        acp_client(hub.url, role="approver", name="approver") as approver,
    ):
        async with connect(hub.url, max_size=None, compression=None, ping_interval=None) as ws:
            holder = AcpClient(ws)
            async with anyio.create_task_group() as tg:
                tg.start_soon(holder.reader)
                await holder.initialize()
                sid = await holder.new_session()
                for client in (viewer, approver):
                    await client.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
                await holder.prompt(sid, "permission Write the file")
                await holder.wait_for(lambda: bool(holder.requests))
                if others == "approver":
                    await approver.wait_for(lambda: bool(approver.requests))
                else:
                    await viewer.wait_for(lambda: "pending" in permission_status(viewer, sid))
                    assert not approver.requests  # `owner` policy: only the owner's copy
                # Gone without a close frame, its copy unanswered.
                ws.transport.abort()
                await holder.wait_for(lambda: holder.close_code is not None)
                tg.cancel_scope.cancel()
        if others == "approver":
            request = approver.requests[0]
            await approver.answer(
                request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
            )
            verdict = "permission: selected allow"
            expected = ["pending", "resolved"]
        else:
            verdict = "permission: cancelled"
            # pending, pending marked waiting for an answerer, cancelled when the grace ended
            expected = ["pending", "pending", "cancelled"]
        await viewer.wait_for(lambda: said(viewer, sid, verdict))
        await viewer.wait_for(lambda: viewer.idle_count(sid) >= 1)
        assert permission_status(viewer, sid) == expected
        assert contiguous(viewer.seqs(sid))
    no_traceback(caplog)


# -- an agent killed while a late joiner's replay is being written ----------------------------


def _send_buffer_max() -> int:
    """The most a TCP socket's send buffer grows to here (Linux's tcp_wmem maximum)."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 * 2**20  # Linux's default


async def test_an_agent_killed_during_a_replay(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    async with (
        running_hub([scripted_agent("victim", 2)]) as hub,
        acp_client(hub.url) as owner,
    ):
        sid = await owner.new_session()
        # A history whose compacted replay is more than the hub's socket can hold (its send
        # buffer grows up to tcp_wmem's maximum): thousands of tool calls and messages.
        # Each prompt adds about 1.6 MB (its own text, replayed as the user's message, and
        # the agent's 400 messages of 2,000 bytes); a prompt is at most 1 MB.
        prompt = "\n".join(["tool text"] * 1500 + ["say " + "z" * 2000] * 400)
        turns = 1 + (_send_buffer_max() + 2**20) // (16 * 10**5)
        for _ in range(turns):
            await owner.prompt(sid, prompt)
        await owner.wait_for(lambda: owner.idle_count(sid) >= turns, timeout=120)
        session = hub_session(hub, sid)
        # The joiner asks for the whole replay and does not read (its library queues one
        # frame, then the socket fills up): the hub is in the middle of writing it. Its
        # receive buffer is fixed and small: autotuned (up to tcp_rmem's maximum, 32 MB on
        # some kernels) it could take the whole replay before the check below.
        url = urlsplit(hub.url)
        with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            sock.connect((url.hostname, url.port))  # loopback: accepted by the kernel at once
            sock.setblocking(False)
            async with connect(
                hub.url,
                sock=sock,
                max_size=None,
                compression=None,
                ping_interval=None,
                max_queue=1,
            ) as ws:
                init = {"protocolVersion": 2, "info": {"name": "joiner", "version": "1"}}
                await ws.send(
                    orjson.dumps(
                        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
                    ).decode()
                )
                assert orjson.loads(await ws.recv())["id"] == 1
                resume = {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}
                await ws.send(
                    orjson.dumps(
                        {"jsonrpc": "2.0", "id": 2, "method": "session/resume", "params": resume}
                    ).decode()
                )
                await owner.wait_for(lambda: len(session.attached) == 2)
                joiner_outbox = next(
                    a.client.outbox
                    for a in session.attached.values()
                    if a.client.program == "joiner"
                )
                assert isinstance(joiner_outbox, Outbox)
                assert joiner_outbox.catching_up  # the replay is under way, not all written

                os.kill(agent_pid(hub, "victim"), signal.SIGKILL)
                await owner.wait_for(lambda: agent_status(owner, sid) == "exited")
                joiner = AcpClient(ws)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(joiner.reader)
                    cursor = (await joiner.result(2))["_meta"]["acp-hub"]["seq"]
                    await joiner.wait_for(
                        lambda: session.settled and joiner.last_seq(sid) == session.log.last_seq,
                        timeout=120,
                    )
                    tg.cancel_scope.cancel()
    updates = joiner.session_updates(sid)
    replay = [p for p in updates if p["_meta"]["acp-hub"].get("replay")]
    live = [p for p in updates if not p["_meta"]["acp-hub"].get("replay")]
    assert updates[: len(replay)] == replay  # the replay first, all of it
    seqs = [p["_meta"]["acp-hub"]["seq"] for p in live]
    assert seqs[0] == cursor + 1
    assert contiguous(seqs)
    assert any(p["update"].get("sessionUpdate") == "_hub_agent" for p in live)
    state = SessionState()
    for params in updates:
        state.apply(params["update"])
    assert state.hub("_hub_agent") is not None
    assert state.hub("_hub_agent")["status"] == "exited"  # type: ignore[index]
    no_traceback(caplog)


async def test_an_agent_busy_on_its_own_ignoring_cancel(caplog: pytest.LogCaptureFixture) -> None:
    # The agent says the turn is over, then that it is running again, and ignores the cancel:
    # no turn of the hub's runs, yet the session is busy (prompts would queue for good). The
    # cancel deadline applies to the agent's own turn too.
    caplog.set_level(logging.WARNING)
    script = "\n".join(
        [
            'update {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}',
            'update {"sessionUpdate": "state_update", "state": "running"}',
            "say rogue-turn",
            "ignore-cancel",
            "sleep 600000",
        ]
    )
    async with (
        running_hub([scripted_agent("rogue", 2)], Settings(agent_response_timeout=1.0)) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
    ):
        sid = await driver.new_session()
        await watcher.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await driver.prompt(sid, script)
        await watcher.wait_for(lambda: said(watcher, sid, "rogue-turn"))
        session = hub_session(hub, sid)
        assert session.turns.current is None
        assert session.turns.busy
        await driver.notify("session/cancel", {"sessionId": sid})
        await driver.notify("session/cancel", {"sessionId": sid})  # one deadline, not two
        for client in (driver, watcher):
            await client.wait_for(lambda c=client: len(forced_idles(c, sid)) == 1)  # type: ignore[misc]
        assert not session.turns.busy
        # The next prompt is not queued behind a turn that will not end: it goes to the agent,
        # which refuses it (its own turn still runs), and the sender is told.
        with pytest.raises(RpcFailure):
            await driver.prompt(sid, "say hello")
        assert not session.turns.busy
        assert len(forced_idles(watcher, sid)) == 1
        assert contiguous(watcher.seqs(sid))
    no_traceback(caplog)
