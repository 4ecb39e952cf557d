"""The hub end to end: real uvicorn on a loopback port, real agents, real WebSocket clients."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import orjson
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from hub.sessions.session import Session
from hub.settings import Settings

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

TURN = "\n".join(
    [
        "say hello there from the scripted agent",
        "tool diff",
        "plan",
        "tool terminal",
        "usage",
        "title A",
    ]
)


def hub_session(hub: HubHandle, sid: str) -> Session:
    """The hub's own session object (to know its last seq)."""
    registry = hub.app.registry
    assert registry is not None
    return registry.sessions[sid]


def contiguous(seqs: list[int]) -> bool:
    return seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True


def update_seqs(frames: list[Any]) -> list[int]:
    """The seqs of the ``session/update`` notifications among raw ``frames``."""
    return [
        f["params"]["_meta"]["acp-hub"]["seq"]
        for f in frames
        if f.get("method") == "session/update"
    ]


async def wait_idle(client: AcpClient, session_id: str, count: int = 1) -> None:
    await client.wait_for(lambda: client.idle_count(session_id) >= count)


@pytest.mark.parametrize("agent_protocol", [1, 2])
async def test_three_clients_mixed_versions_see_the_same_ordered_stream(
    agent_protocol: int,
) -> None:
    async with (
        running_hub([scripted_agent(protocol=agent_protocol)]) as hub,
        acp_client(hub.url, 2) as a,
        acp_client(hub.url, 1, events=True) as b,
        acp_client(hub.url, 2) as c,
    ):
        sid = await a.new_session()
        await b.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await c.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await a.prompt(sid, TURN + "\nstream 300")
        await wait_idle(a, sid)
        await wait_idle(c, sid)
        session = hub_session(hub, sid)
        for client in (a, b, c):
            await client.wait_for(
                lambda client=client: (
                    session.settled  # type: ignore[misc]
                    and client.last_seq(sid) == session.log.last_seq
                )
            )
        for client in (a, b, c):
            assert contiguous(client.seqs(sid)), client.seqs(sid)
        # From the point where the last client joined, everyone saw the same seqs, and
        # the two v2 clients the very same updates.
        start = c.seqs(sid)[0]
        tail_a = [p for p in a.session_updates(sid) if p["_meta"]["acp-hub"]["seq"] >= start]
        tail_c = c.session_updates(sid)
        assert tail_a == tail_c
        b_seqs = [s for s in b.seqs(sid) if s >= start]
        assert sorted(set(b_seqs)) == [p["_meta"]["acp-hub"]["seq"] for p in tail_c]
        # The v1 client got v1 shapes only (no v2-only variants outside `_hub_` updates).
        v1_variants = {p["update"]["sessionUpdate"] for p in b.session_updates(sid)}
        assert "state_update" not in v1_variants
        assert "tool_call" in v1_variants
        assert "agent_message_chunk" in v1_variants


async def test_late_joiner_replay_folds_to_the_live_state() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as live:
        sid = await live.new_session()
        await live.prompt(sid, TURN + "\nstream 3000 16\nthink a long thought\nwhole done")
        await wait_idle(live, sid)
        await live.prompt(sid, "permission")
        await live.wait_for(lambda: bool(live.requests))
        request = live.requests[-1]
        await live.answer(request["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}})
        await wait_idle(live, sid, 2)
        log_length = live.last_seq(sid)
        assert log_length > 3000
        async with acp_client(hub.url, batches=True) as late:
            frames_before = len(late.frames)
            result = await late.call(
                "session/resume",
                {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}},
            )
            replay_frames = len(late.frames) - frames_before - 1
            cursor = result["_meta"]["acp-hub"]
            assert cursor["seq"] == log_length
            # The joiner's own presence event is the next event for everyone.
            await late.wait_for(lambda: late.last_seq(sid) == log_length + 1)
            await live.wait_for(lambda: live.last_seq(sid) == log_length + 1)
            assert late.fold(sid).snapshot() == live.fold(sid).snapshot()
            replayed = [p for p in late.session_updates(sid) if p["_meta"]["acp-hub"].get("replay")]
            assert 0 < len(replayed) < log_length / 50
            assert replay_frames <= 3  # batched into pages


async def test_reconnect_with_cursor_gets_exactly_the_missed_events() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        async with acp_client(hub.url) as first:
            await first.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            await watcher.prompt(sid, "stream 50")
            await wait_idle(first, sid)
            cursor = {
                "epoch": first.updates[-1]["_meta"]["acp-hub"]["epoch"],
                "seq": first.last_seq(sid),
            }
        await watcher.prompt(sid, "stream 80\ntool diff")
        await wait_idle(watcher, sid, 2)
        async with acp_client(hub.url) as again:
            result = await again.call(
                "session/resume",
                {
                    "sessionId": sid,
                    "cwd": "/tmp",
                    "replayFrom": {"type": "_hub_after", **cursor},
                },
            )
            missed = again.seqs(sid)
            end = result["_meta"]["acp-hub"]["seq"]
            assert missed[0] == cursor["seq"] + 1
            assert missed[: end - cursor["seq"]] == list(range(cursor["seq"] + 1, end + 1))
            expected = [
                p
                for p in watcher.session_updates(sid)
                if cursor["seq"] < p["_meta"]["acp-hub"]["seq"] <= end
            ]
            assert again.session_updates(sid)[: len(expected)] == expected
            assert not any(
                p["update"]["sessionUpdate"] == "_hub_reset" for p in again.session_updates(sid)
            )


async def test_cursor_older_than_the_log_gets_a_reset_and_a_snapshot() -> None:
    settings = Settings(retained_events=40)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        epoch = watcher.updates[0]["_meta"]["acp-hub"]["epoch"]
        await watcher.prompt(sid, "stream 200\ntool diff\nplan")
        await wait_idle(watcher, sid)
        async with acp_client(hub.url) as again:
            result = await again.call(
                "session/resume",
                {
                    "sessionId": sid,
                    "cwd": "/tmp",
                    "replayFrom": {"type": "_hub_after", "epoch": epoch, "seq": 3},
                },
            )
            first = again.session_updates(sid)[0]["update"]
            assert first["sessionUpdate"] == "_hub_reset"
            last = result["_meta"]["acp-hub"]["seq"] + 1  # the joiner's presence
            await again.wait_for(lambda: again.last_seq(sid) == last)
            await watcher.wait_for(lambda: watcher.last_seq(sid) == last)
            assert again.fold(sid).snapshot() == watcher.fold(sid).snapshot()
        # A different epoch is reset too.
        async with acp_client(hub.url) as stale:
            await stale.call(
                "session/resume",
                {
                    "sessionId": sid,
                    "cwd": "/tmp",
                    "replayFrom": {"type": "_hub_after", "epoch": epoch - 1, "seq": 0},
                },
            )
            assert stale.session_updates(sid)[0]["update"]["sessionUpdate"] == "_hub_reset"


async def test_v1_client_cursor_in_meta_and_load() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, "say one two three four\nstream 20")
        await wait_idle(owner, sid)
        async with acp_client(hub.url, 1) as v1:
            result = await v1.call(
                "session/load", {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
            )
            variants = [p["update"]["sessionUpdate"] for p in v1.session_updates(sid)]
            assert "agent_message_chunk" in variants
            assert not any(v.startswith("_hub_") for v in variants)  # not opted in
            cursor = result["_meta"]["acp-hub"]
        await owner.prompt(sid, "stream 5")
        await wait_idle(owner, sid, 2)
        async with acp_client(hub.url, 1, events=True) as v1b:
            await v1b.call(
                "session/resume",
                {"sessionId": sid, "cwd": "/tmp", "_meta": {"acp-hub": {"after": cursor}}},
            )
            seqs = v1b.seqs(sid)
            assert seqs[0] == cursor["seq"] + 1
            assert contiguous(seqs)


async def test_slow_consumer_is_closed_with_1013_and_resumes_with_its_cursor() -> None:
    settings = Settings(outbox_bytes=128 * 1024)
    async with running_hub([scripted_agent()], settings) as hub:
        async with acp_client(hub.url) as fast, RawClient(hub.url) as slow:
            # `slow` has a tiny receive buffer and stops reading after attaching.
            sid = await fast.new_session()
            epoch = fast.updates[0]["_meta"]["acp-hub"]["epoch"]
            await slow.call(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 2, "info": {"name": "slow", "version": "1"}},
                }
            )
            await slow.call(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/resume",
                    "params": {"sessionId": sid, "cwd": "/tmp"},
                }
            )
            await fast.prompt(sid, "stream 4000 1000")
            await wait_idle(fast, sid)
            # The fast client got everything, with contiguous seqs, while the slow one stalled.
            assert contiguous(fast.seqs(sid))
            # The hub kept its promise on memory: no connection holds more than the bound.
            for conn in hub.app.connections:
                assert conn.outbox.queued_bytes <= settings.outbox_bytes
            frames, code = await slow.drain()
            assert code == 1013
            seen = update_seqs(frames)
            assert seen
            assert contiguous(seen)
            assert seen[-1] < fast.last_seq(sid)
        async with acp_client(hub.url) as back:
            await back.call(
                "session/resume",
                {
                    "sessionId": sid,
                    "cwd": "/tmp",
                    "replayFrom": {"type": "_hub_after", "epoch": epoch, "seq": seen[-1]},
                },
            )
            assert back.seqs(sid)[0] == seen[-1] + 1
            assert contiguous(back.seqs(sid))


async def hub_closes_one(hub: HubHandle) -> None:
    """Wait until the hub has written a close frame to one of its clients (or dropped one)."""
    before = len(hub.app.connections)

    def closed() -> bool:
        server = hub.server.server_state.connections
        return any(getattr(p, "close_sent", False) for p in server) or (
            len(hub.app.connections) < before
        )

    with anyio.fail_after(60):
        while not closed():  # noqa: ASYNC110 - the server offers no event for this
            await anyio.sleep(0.05)


async def test_a_reader_stuck_past_the_keepalive_still_gets_its_frames_and_1013() -> None:
    # The client stops reading behind more than the kernel holds for it (the server's
    # transport still holds data too), and its ping, stuck behind that data, times out long
    # before its outbox passes the bound: the full-size S7 benchmark. It is a slow consumer all
    # the same, and once it reads again it must get every frame already written to it and then
    # the 1013 close frame; not a reset (its pong left unread by a transport that was closed
    # when the ping timed out made the kernel reset the connection, dropping what was unsent).
    settings = Settings(outbox_bytes=256 * 1024 * 1024, ping_interval=2.0, ping_timeout=2.0)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url) as fast,
        RawClient(hub.url) as slow,
    ):
        sid = await fast.new_session()
        await slow.attach(sid)
        await fast.prompt(sid, "stream 8000 1000")
        await hub_closes_one(hub)
        frames, code = await slow.drain()
        assert not slow.reset
        assert code == 1013
        seen = update_seqs(frames)
        assert seen
        assert contiguous(seen)


async def test_a_silent_reader_with_nothing_to_read_is_closed_with_1011() -> None:
    # No data waits for it: a client that does not answer is not called a slow consumer.
    settings = Settings(ping_interval=0.5, ping_timeout=0.5)
    # Set up like the tests around it: each test spells out its own scenario.
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url) as owner,
        RawClient(hub.url) as silent,
    ):
        sid = await owner.new_session()
        await silent.attach(sid)
        await hub_closes_one(hub)
        _, code = await silent.drain()
        assert code == 1011


def _crashed(client: AcpClient, sid: str, status: str = "exited") -> bool:
    return any(
        _variant(p) == "_hub_agent" and _inner(p).get("status") == status
        for p in client.session_updates(sid)
    )


def _idle_after_crash(client: AcpClient, sid: str) -> bool:
    return _crashed(client, sid) and client.fold(sid).foreground == "idle"


def _said(client: AcpClient, sid: str, text: str) -> bool:
    return text in orjson.dumps(client.fold(sid).snapshot()).decode()


async def test_agent_crash_mid_turn_is_seen_by_everyone_and_the_next_prompt_works(
    tmp_path: Any,
) -> None:
    agent = scripted_agent("scripted", 2, "--state-dir", str(tmp_path))
    async with (
        running_hub([agent]) as hub,
        acp_client(hub.url) as a,
        acp_client(hub.url, 1, events=True) as b,
    ):
        sid = await a.new_session()
        await b.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await a.prompt(sid, "say before the crash\nsleep 200\ncrash")
        await a.wait_for(lambda: _crashed(a, sid) and _idle_after_crash(a, sid))
        await b.wait_for(lambda: _crashed(b, sid))
        await a.prompt(sid, "say after the crash")
        await a.wait_for(lambda: _said(a, sid, "after the crash"))
        assert _crashed(a, sid, "restarted")
        assert contiguous(a.seqs(sid))
        assert contiguous(b.seqs(sid))


async def test_a_session_the_restarted_agent_cannot_resume_is_marked_lost() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as a:
        sid = await a.new_session()
        await a.prompt(sid, "say hello\ncrash")
        await a.wait_for(lambda: _crashed(a, sid) and _idle_after_crash(a, sid))
        with pytest.raises(RpcFailure) as info:
            await a.prompt(sid, "say after the crash")
        assert info.value.code == -32043
        await a.wait_for(lambda: _crashed(a, sid, "lost"))
        listed = await a.call("session/list", {})
        entry = next(e for e in listed["sessions"] if e["sessionId"] == sid)
        assert entry["_meta"]["acp-hub"]["state"] == "lost"
        # Nothing was silently emptied: the history is still there for everyone.
        assert _said(a, sid, "hello")


async def test_protocol_errors_get_clear_answers() -> None:
    async with running_hub([scripted_agent()]) as hub:
        async with acp_client(hub.url) as a:
            await a.ws.send("{not json")
            await a.wait_for(
                lambda: any(
                    f.get("error", {}).get("code") == -32700
                    for f in a.frames
                    if isinstance(f, dict)
                )
            )
            with pytest.raises(RpcFailure) as info:
                await a.call("no/such_method", {})
            assert info.value.code == -32601
            with pytest.raises(RpcFailure) as info:
                await a.call("session/prompt", {"sessionId": "s-nope", "prompt": []})
            assert info.value.code == -32002
            # A batch on a v2 connection is answered as a batch.
            await a.send(
                [
                    {"jsonrpc": "2.0", "id": 7, "method": "session/list", "params": {}},
                    {"jsonrpc": "2.0", "method": "_hub/unknown_notification", "params": {}},
                    {"jsonrpc": "2.0", "id": 8, "method": "nope"},
                ]
            )
            await a.wait_for(lambda: any(isinstance(f, list) for f in a.frames))
            batch = next(f for f in a.frames if isinstance(f, list))
            assert sorted(e["id"] for e in batch) == [7, 8]
        async with acp_client(hub.url, 1) as v1:
            await v1.send([{"jsonrpc": "2.0", "id": 1, "method": "session/list"}])
            await v1.wait_for(
                lambda: any(
                    isinstance(f, dict) and f.get("error", {}).get("code") == -32600
                    for f in v1.frames
                )
            )
        # Before initialize, only initialize is accepted; binary frames close with 1003.
        async with RawWs(hub.url) as raw:
            await raw.ws.send(
                orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "session/list"}).decode()
            )
            reply = orjson.loads(await raw.ws.recv())
            assert reply["error"]["code"] == -32600
            await raw.ws.send(b"\x00\x01")
            with pytest.raises(ConnectionClosed):
                await raw.ws.recv()
            assert raw.ws.protocol.close_rcvd is not None
            assert raw.ws.protocol.close_rcvd.code == 1003


async def test_oversized_frame_closes_with_1009() -> None:
    settings = Settings(max_frame_bytes=64 * 1024)
    async with running_hub([scripted_agent()], settings) as hub, RawWs(hub.url) as raw:
        await raw.ws.send("x" * (100 * 1024))
        with pytest.raises(ConnectionClosed):
            await raw.ws.recv()
        assert raw.ws.protocol.close_rcvd is not None
        assert raw.ws.protocol.close_rcvd.code == 1009


async def test_upgrade_response_carries_the_connection_id() -> None:
    async with running_hub([scripted_agent()]) as hub, RawWs(hub.url) as raw:
        assert raw.ws.response is not None
        header = raw.ws.response.headers.get("Acp-Connection-Id")
        assert header
        await raw.ws.send(
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 2},
                }
            ).decode()
        )
        reply = orjson.loads(await raw.ws.recv())
        assert reply["result"]["_meta"]["acp-hub"]["connectionId"] == header
        assert reply["result"]["protocolVersion"] == 2


def _variant(params: dict[str, Any]) -> str:
    return str(params["update"].get("sessionUpdate"))


def _inner(params: dict[str, Any]) -> dict[str, Any]:
    update = params["update"]
    if update.get("sessionUpdate") == "_hub_v2":
        return dict(update["update"])
    return dict(update)


class RawWs:
    """A plain ``websockets`` connection without the recording client."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __aenter__(self) -> RawWs:
        from websockets.asyncio.client import connect

        self._cm = connect(self.url, max_size=None, compression=None)
        self.ws = await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._cm.__aexit__(None, None, None)


class RawClient:
    """A sans-I/O ``websockets`` client over a raw socket with a tiny receive buffer, which
    reads only when told: the slow consumer."""

    def __init__(self, url: str) -> None:
        host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
        self.url = url
        self.addr = (host, int(port))
        self.messages: list[dict[str, Any]] = []
        self.eof = False
        self.reset = False  # the server reset the connection (no close frame can follow)

    async def __aenter__(self) -> RawClient:
        try:
            await self.open()
        except BaseException:
            self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()  # on every path, so that no socket outlives its test

    def close(self) -> None:
        sock: socket.socket | None = getattr(self, "sock", None)
        if sock is not None:
            sock.close()

    async def open(self) -> None:
        from websockets.client import ClientProtocol
        from websockets.protocol import State
        from websockets.uri import parse_uri

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock = sock  # closed by `close` whatever happens next
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(self.addr)
        sock.setblocking(False)
        self.protocol = ClientProtocol(parse_uri(self.url), max_size=None)
        self.protocol.send_request(self.protocol.connect())
        self._flush()
        await self._pump(lambda: self.protocol.state is State.OPEN)

    def _flush(self) -> None:
        for chunk in self.protocol.data_to_send():
            if chunk and not self.reset:
                self.sock.setblocking(True)
                try:
                    self.sock.sendall(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    self.reset = True
                finally:
                    self.sock.setblocking(False)

    async def _pump(
        self, done: Any, timeout: float = 30.0, *, size: int = 65536, pace: float = 0.0
    ) -> None:
        """Read until ``done()`` or the end of the stream, ``size`` bytes a read at most and,
        with ``pace``, that many seconds after each read (a slow link's pace)."""
        with anyio.fail_after(timeout):
            while not done() and not self.eof:
                await anyio.wait_readable(self.sock)
                try:
                    data = self.sock.recv(size)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    self.reset = True
                    data = b""
                if data:
                    self.protocol.receive_data(data)
                else:
                    self.eof = True
                    self.protocol.receive_eof()
                for event in self.protocol.events_received():
                    if isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                        message = orjson.loads(event.data)
                        self.messages.extend(message if isinstance(message, list) else [message])
                self._flush()
                if pace:
                    await anyio.sleep(pace)  # the slow link's pace, not a wait for an event

    async def call(self, message: dict[str, Any]) -> None:
        self.protocol.send_text(orjson.dumps(message))
        self._flush()
        want = message["id"]
        await self._pump(
            lambda: any(m.get("id") == want and "method" not in m for m in self.messages)
        )

    async def attach(self, session_id: str) -> None:
        """Initialize (v2) and attach to ``session_id`` live, waiting for both answers."""
        await self.call(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}}
        )
        await self.call(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/resume",
                "params": {"sessionId": session_id, "cwd": "/"},
            }
        )

    async def drain(self) -> tuple[list[dict[str, Any]], int | None]:
        """Read everything until the server closes; return the messages and the close code."""
        await self._pump(lambda: self.protocol.close_rcvd is not None, timeout=60)
        rcvd = self.protocol.close_rcvd
        self.sock.close()
        return self.messages, None if rcvd is None else rcvd.code


async def test_replay_then_response_then_live_events_in_wire_order() -> None:
    """While updates stream, a joiner receives the replay, then its response, then every
    event after the response's cursor: nothing live before the response."""
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        async with anyio.create_task_group() as tg:
            # A burst, then a paced stream that lasts until the cancel below: every joiner has
            # live events after its cursor however long the machine takes to let it join.
            tg.start_soon(owner.prompt, sid, "stream 20000 64\nslow 1000000 2")
            await owner.wait_for(lambda: owner.last_seq(sid) > 500)
            for _ in range(3):
                async with acp_client(hub.url) as late:
                    start = len(late.frames)
                    result = await late.call(
                        "session/resume",
                        {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}},
                    )
                    cursor = result["_meta"]["acp-hub"]["seq"]
                    await late.wait_for(lambda: late.last_seq(sid) > cursor + 50)  # noqa: B023
                    frames = late.frames[start:]
                    index = next(i for i, f in enumerate(frames) if "result" in f)
                    before, after = frames[:index], frames[index + 1 :]
                    assert before
                    assert all(f["params"]["_meta"]["acp-hub"].get("replay") for f in before)
                    seqs = [f["params"]["_meta"]["acp-hub"]["seq"] for f in after if "params" in f]
                    assert seqs == list(range(cursor + 1, cursor + 1 + len(seqs)))
            await owner.notify("session/cancel", {"sessionId": sid})
            await wait_idle(owner, sid)
