"""Sessions across clients coming and going, real third-party agents, dead peers."""

from __future__ import annotations

import socket
from typing import Any

import anyio
import pytest

from hub.agents.spec import AgentSpec, ProtocolChoice
from hub.settings import Settings
from tests.credentials import token
from tests.peers.paths import ts_agent_js, ts_dual_agent_js
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.test_hub import RawClient, contiguous
from tests.support import require_binary

pytestmark = pytest.mark.anyio


def _texts(client: AcpClient, sid: str) -> str:
    return str(client.fold(sid).snapshot())


@pytest.mark.parametrize("protocol", [1, 2])
async def test_three_clients_on_the_typescript_dual_version_agent(protocol: ProtocolChoice) -> None:
    node = require_binary("node")
    agent = AgentSpec(name="ts", command=node, args=(str(ts_dual_agent_js()),), protocol=protocol)
    # Set up like the tests around it: each test spells out its own scenario.
    async with (
        running_hub([agent]) as hub,
        acp_client(hub.url, 2) as a,
        acp_client(hub.url, 1, events=True) as b,
        acp_client(hub.url, 2) as c,
    ):
        sid = await a.new_session()
        await b.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await c.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await a.prompt(sid, "hello from three clients")
        await a.wait_for(lambda: a.idle_count(sid) >= 1)
        await c.wait_for(lambda: c.idle_count(sid) >= 1)
        last = a.last_seq(sid)
        await b.wait_for(lambda: b.last_seq(sid) >= last)
        for client in (a, b, c):
            assert contiguous(client.seqs(sid))
        start = c.seqs(sid)[0]
        assert [p for p in a.session_updates(sid) if p["_meta"]["acp-hub"]["seq"] >= start] == (
            c.session_updates(sid)
        )
        variants = {p["update"]["sessionUpdate"] for p in a.session_updates(sid)}
        assert {"user_message", "state_update"} <= variants
        assert "agent_message" in variants or "agent_message_chunk" in variants


async def test_three_clients_on_the_typescript_permission_agent() -> None:
    node = require_binary("node")
    agent = AgentSpec(name="ts", command=node, args=(str(ts_agent_js()),))
    async with (
        running_hub([agent]) as hub,
        acp_client(hub.url, 2) as a,
        acp_client(hub.url, 1, events=True) as b,
        acp_client(hub.url, 2, role="viewer") as c,
    ):
        sid = await a.new_session()
        await b.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await c.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await a.prompt(sid, "please edit a file")
        await a.wait_for(lambda: bool(a.requests), timeout=30)
        request = a.requests[-1]
        options = request["params"]["options"]
        allow = next(o for o in options if o["kind"].startswith("allow"))
        await a.answer(
            request["id"], {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        )
        await a.wait_for(lambda: a.idle_count(sid) >= 1, timeout=30)
        last = a.last_seq(sid)
        await b.wait_for(lambda: b.last_seq(sid) >= last)
        await c.wait_for(lambda: c.last_seq(sid) >= last)
        assert not c.requests  # a viewer is never asked
        for client in (a, b, c):
            assert contiguous(client.seqs(sid))
        resolved = [
            p["update"]
            for p in c.session_updates(sid)
            if p["update"].get("sessionUpdate") == "_hub_permission"
            and p["update"].get("status") == "resolved"
        ]
        assert resolved
        assert (
            resolved[-1]["resolvedBy"]["clientId"] == a.init_result["_meta"]["acp-hub"]["clientId"]
        )
        # The copy named the record it belongs to.
        assert resolved[-1]["permissionId"] == request["params"]["_meta"]["acp-hub"]["permissionId"]


async def test_the_turn_goes_on_when_its_client_disconnects() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        async with acp_client(hub.url) as prompter:
            await prompter.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
            await prompter.prompt(sid, "slow 10 30\nsay the turn finished")
        await watcher.wait_for(lambda: watcher.idle_count(sid) >= 1)
        assert "the turn finished" in _texts(watcher, sid)
        assert contiguous(watcher.seqs(sid))


async def test_a_late_joiner_during_a_live_stream_misses_nothing() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        await watcher.prompt(sid, "slow 300 2")
        await watcher.wait_for(lambda: watcher.last_seq(sid) > 60)
        async with acp_client(hub.url) as late:
            result = await late.call(
                "session/resume", {"sessionId": sid, "cwd": "/tmp", "replayFrom": {"type": "start"}}
            )
            cursor = result["_meta"]["acp-hub"]["seq"]
            await watcher.wait_for(lambda: watcher.idle_count(sid) >= 1)
            final = watcher.last_seq(sid)
            await late.wait_for(lambda: late.last_seq(sid) >= final)
            live_seqs = late.seqs(sid)
            assert live_seqs[0] == cursor + 1
            assert contiguous(live_seqs)
            assert late.fold(sid).snapshot() == watcher.fold(sid).snapshot()


async def test_owner_closes_and_deletes_sessions() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, 2) as other,
    ):
        sid = await owner.new_session()
        await other.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await owner.call("session/close", {"sessionId": sid})
        await other.wait_for(
            lambda: any(n["method"] == "_hub/session_closed" for n in other.notifications)
        )
        listed = await owner.call("session/list", {})
        assert sid not in [s["sessionId"] for s in listed["sessions"]]
        with pytest.raises(RpcFailure) as info:
            await other.prompt(sid, "hello")
        assert info.value.code in (-32002, -32047)
        second = await owner.new_session()
        await owner.call("session/delete", {"sessionId": second})
        await owner.call("session/delete", {"sessionId": second})  # idempotent
        listed = await owner.call("session/list", {})
        assert second not in [s["sessionId"] for s in listed["sessions"]]


async def test_a_viewer_cannot_close_or_create() -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, role="viewer") as viewer,
    ):
        sid = await owner.new_session()
        with pytest.raises(RpcFailure) as info:
            await viewer.call("session/close", {"sessionId": sid})
        assert info.value.code == -32040
        assert "owner" in info.value.error["message"]
        with pytest.raises(RpcFailure) as info:
            await viewer.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        assert info.value.code == -32040


async def test_a_peer_that_stops_answering_pings_is_dropped() -> None:
    settings = Settings(ping_interval=0.2, ping_timeout=0.3)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        async with RawClient(hub.url) as dead:
            await dead.attach(sid)

            def attached() -> int:
                presence = watcher.fold(sid).hub("_hub_presence") or {}
                clients: list[Any] = presence.get("clients", [])
                return len(clients)

            await watcher.wait_for(lambda: attached() == 2)
            # The dead peer never reads again, so it never answers a ping: the hub drops it.
            await watcher.wait_for(lambda: attached() == 1, timeout=15)
            dead.sock.shutdown(socket.SHUT_RDWR)
            dead.sock.close()
            with anyio.fail_after(5):
                while len(hub.app.connections) > 1:  # noqa: ASYNC110 - no event for a drop
                    await anyio.sleep(0.05)


async def test_browser_upgrades_from_other_origins_are_refused() -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    settings = Settings(embed_origins=("https://app.example",))
    async with running_hub([scripted_agent()], settings) as hub:
        host = hub.http.split("//", 1)[1]
        # A foreign origin, the opaque "null" origin, and an embedding origin whose client
        # holds no embed token naming it (the owner token names no origin).
        for refused in ("https://evil.example", "null", "https://app.example"):
            with pytest.raises(InvalidStatus) as info:
                async with connect(hub.url, origin=refused):  # type: ignore[arg-type]
                    pass
            assert info.value.response.status_code == 403, refused
            assert b'"error":"origin"' in info.value.response.body
        embed = token("viewer", origins=["https://app.example"])
        for allowed, url in (
            (f"http://{host}", hub.url),
            ("https://app.example", hub.url_with(embed)),
        ):
            async with connect(url, origin=allowed) as ws:  # type: ignore[arg-type]
                await ws.send(
                    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}'
                )
                assert '"protocolVersion":2' in str(await ws.recv())
        async with connect(hub.url) as ws:  # no Origin: not a browser
            await ws.send(
                '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'
            )
            assert '"protocolVersion":1' in str(await ws.recv())


async def test_a_backed_up_client_that_vanishes_is_dropped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as watcher:
        sid = await watcher.new_session()
        async with RawClient(hub.url) as gone:
            await gone.attach(sid)
            await watcher.prompt(sid, "stream 3000 400")
            await watcher.wait_for(lambda: watcher.last_seq(sid) > 1500)
            gone.sock.close()  # mid-stream, with frames queued for it
            await watcher.wait_for(lambda: watcher.idle_count(sid) >= 1)
            assert contiguous(watcher.seqs(sid))
            with anyio.fail_after(10):
                while len(hub.app.connections) > 1:  # noqa: ASYNC110 - no event for a drop
                    await anyio.sleep(0.05)
        errors = [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
        assert errors == []


@pytest.mark.parametrize("ack_flags", [(), ("--ack-message-id",)])
async def test_prompt_answers_name_the_user_message_and_v1_senders_see_no_echo(
    ack_flags: tuple[str, ...],
) -> None:
    agent = scripted_agent("scripted", 2, *ack_flags)
    async with (
        running_hub([agent]) as hub,
        acp_client(hub.url, 2) as v2,
        acp_client(hub.url, 1, events=True) as v1,
    ):
        sid = await v2.new_session()
        await v1.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        answer = await v2.prompt(sid, "say first")
        await v2.wait_for(lambda: v2.idle_count(sid) >= 1)
        user_ids = [
            p["update"]["messageId"]
            for p in v2.session_updates(sid)
            if p["update"]["sessionUpdate"] in ("user_message", "user_message_chunk")
        ]
        assert answer["messageId"] == user_ids[-1]
        assert (await v1.prompt(sid, "say second"))["stopReason"] == "end_turn"
        mine = [
            p
            for p in v1.session_updates(sid)
            if p["update"]["sessionUpdate"] == "user_message_chunk"
            and "second" in str(p["update"].get("content"))
        ]
        assert mine == []  # the v1 sender rendered its prompt itself
        assert "second" in str(v2.fold(sid).snapshot())  # everyone else saw it
