"""A v2 editor (a plain stdio client speaking ACP v2 line by line) through ``acp-hub bridge``:
v2 is negotiated end to end, the hub's own ``_hub_*`` updates stay in the bridge, and a
dropped hub connection mid-turn loses and duplicates nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import Process

from tests.bridge.harness import ROOT, TIMEOUT, bridge_command, bridge_env, listener_hub
from tests.bridge.test_reconnect import editors_connections, wait_attached
from tests.server.harness import scripted_agent

pytestmark = pytest.mark.anyio


@dataclass
class V2Editor:
    """A v2 editor on the bridge's stdio: records every message, answers nothing itself."""

    process: Process
    messages: list[dict[str, Any]] = field(default_factory=list)
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _next_id: int = 0

    async def reader(self) -> None:
        assert self.process.stdout is not None
        buffer = b""
        async for chunk in self.process.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                self.messages.append(orjson.loads(line))
                self._changed.set()
                self._changed = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(orjson.dumps(message) + b"\n")

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not predicate():
                await self._changed.wait()

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        request_id = self._next_id
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        await self.wait_for(
            lambda: any(m.get("id") == request_id and "method" not in m for m in self.messages)
        )
        answer = next(m for m in self.messages if m.get("id") == request_id and "method" not in m)
        assert answer is not None
        assert "result" in answer, answer
        return dict(answer["result"])

    def _answer(self, request_id: int) -> dict[str, Any] | None:
        return next(
            (m for m in self.messages if m.get("id") == request_id and "method" not in m), None
        )

    def updates(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == "session/update"]

    def texts(self) -> list[str]:
        out = []
        for params in self.updates():
            update = params["update"]
            if update["sessionUpdate"] == "agent_message_chunk":
                out.append(str(update["content"]["text"]))
        return out

    def idle(self) -> bool:
        return any(
            p["update"]["sessionUpdate"] == "state_update" and p["update"].get("state") == "idle"
            for p in self.updates()
        )


@asynccontextmanager
async def v2_editor(url: str, log: Path) -> AsyncIterator[V2Editor]:
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            list(bridge_command(url)),
            stdin=-1,
            stdout=-1,
            stderr=stderr,
            cwd=ROOT,
            env={**bridge_env(), "PATH": "/usr/bin:/bin"},
        )
        async with process, anyio.create_task_group() as tg:
            editor = V2Editor(process)
            tg.start_soon(editor.reader)
            try:
                yield editor
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(TIMEOUT):
                    await process.wait()
                tg.cancel_scope.cancel()
    assert_clean(log)


def assert_clean(log: Path) -> None:
    assert "Traceback" not in log.read_text()


async def test_a_v2_editor_through_the_bridge_across_a_dropped_connection(tmp_path: Path) -> None:
    async with (
        listener_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as listener,
        v2_editor(listener.url, tmp_path / "bridge.log") as editor,
    ):
        init = await editor.call(
            "initialize",
            {
                "protocolVersion": 2,
                "info": {"name": "sdk-editor", "version": "1"},
                "capabilities": {"fs": {"readTextFile": True}, "terminal": True},
            },
        )
        assert init["protocolVersion"] == 2
        assert init["info"]["name"] == "acp-hub"
        created = await editor.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        session_id = created["sessionId"]
        (first,) = editors_connections(listener)
        answer = await editor.call(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "slow 40 30\nsay end"}]},
        )
        assert answer["messageId"]
        await editor.wait_for(lambda: "slow 5\n" in editor.texts())
        first.close(1012, "restarting")
        await wait_attached(listener, session_id, first)
        await editor.wait_for(editor.idle)

        assert editor.texts() == [f"slow {i}\n" for i in range(40)] + ["end"]
        variants = [p["update"]["sessionUpdate"] for p in editor.updates()]
        assert not [v for v in variants if v.startswith("_hub_")]
        assert "state_update" in variants
        seqs = [
            p["_meta"]["acp-hub"]["seq"] for p in editor.updates() if "seq" in p["_meta"]["acp-hub"]
        ]
        assert seqs == sorted(set(seqs))
        assert all(p["sessionId"] == session_id for p in editor.updates())


async def test_a_batch_from_the_editor_is_refused_with_a_reason(tmp_path: Path) -> None:
    async with (
        listener_hub([scripted_agent("scripted", 2)]) as listener,
        v2_editor(listener.url, tmp_path / "bridge.log") as editor,
    ):
        assert editor.process.stdin is not None
        await editor.process.stdin.send(b'[{"jsonrpc":"2.0","id":1,"method":"session/list"}]\n')
        await editor.wait_for(lambda: any("error" in m for m in editor.messages))
        (refusal,) = editor.messages
        assert refusal["id"] is None
        assert refusal["error"]["code"] == -32600
        assert "not batches" in refusal["error"]["data"]
        # The bridge goes on: the next message is served.
        init = await editor.call("initialize", {"protocolVersion": 2, "capabilities": {}})
        assert init["protocolVersion"] == 2
