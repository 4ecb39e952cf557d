"""The TypeScript SDK's example stdio client (``@agentclientprotocol/sdk`` 1.9.0,
``dist/examples/client.js``, unmodified) runs ``acp-hub bridge`` as its agent.

The example starts its agent as ``npx tsx .../agent.ts``; the test puts an ``npx`` first on the
client's ``PATH`` that runs ``acp-hub bridge URL`` instead, exactly as an editor's agent command
would. The client prints every update it gets and asks on stdin which permission option to
take (the test types ``1``). A WebSocket observer then replays the session from its start
with the cursor ``(epoch, 0)``: what the client printed is what the observer's updates render
to, in the same order.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process

from hub.agents.spec import AgentSpec
from tests.bridge.harness import ROOT, bridge_command
from tests.peers import paths
from tests.server.harness import acp_client, running_hub
from tests.support import require_binary

pytestmark = pytest.mark.anyio

RUN_TIMEOUT = 60.0


def demo_agent() -> AgentSpec:
    """The built-in demo agent (a whole turn: thoughts, plan, tools, a permission request),
    without its pauses."""
    return AgentSpec(
        name="demo",
        command=sys.executable,
        args=("-m", "hub.demo.agent", "--protocol", "auto"),
        env={"PYTHONPATH": str(ROOT), "ACP_HUB_DEMO_FAST": "1"},
    )


def fake_npx(bin_dir: Path, url: str, log: Path) -> None:
    """An ``npx`` that ignores ``tsx agent.ts`` and runs the bridge instead."""
    bin_dir.mkdir()
    command = " ".join(shlex.quote(part) for part in bridge_command(url))
    script = bin_dir / "npx"
    script.write_text(
        "#!/bin/sh\n"
        f"export PYTHONPATH={shlex.quote(str(ROOT))}\n"
        f"exec {command} 2>>{shlex.quote(str(log))}\n"
    )
    script.chmod(0o755)


def render(update: dict[str, Any]) -> str | None:
    """What ``client.js`` prints for one v1 update (its ``sessionUpdate`` switch)."""
    kind = update.get("sessionUpdate")
    if kind == "agent_message_chunk":
        content = update["content"]
        return f"{content['text']}\n" if content["type"] == "text" else f"[{content['type']}]\n"
    status = update.get("status", "undefined")  # as JavaScript prints a missing field
    if kind == "tool_call":
        return f"\n🔧 {update['title']} ({status})\n"
    if kind == "tool_call_update":
        return f"\n🔧 Tool call `{update['toolCallId']}` updated: {status}\n\n"
    if kind in ("plan", "agent_thought_chunk", "user_message_chunk"):
        return f"[{kind}]\n"
    return None


async def run_client(bin_dir: Path, cwd: Path) -> tuple[int, str, str]:
    """Run the example client; answer its permission question with option 1."""
    node = require_binary("node")
    script = paths.TS_SDK_V1 / "dist" / "examples" / "client.js"
    if not script.exists():
        paths.ts_agent_js()  # skips (or fails in CI) with the install hint
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = bytearray()
    process: Process
    async with await anyio.open_process(
        [node, str(script)], cwd=cwd, env=env, stdin=-1, stdout=-1, stderr=-1
    ) as process:
        assert process.stdout is not None
        assert process.stdin is not None
        with anyio.fail_after(RUN_TIMEOUT):
            async for chunk in process.stdout:
                before = out.count(b"Choose an option:")
                out.extend(chunk)
                if out.count(b"Choose an option:") > before:
                    await process.stdin.send(b"1\n")
            code = await process.wait()
        assert process.stderr is not None
        err = b"".join([c async for c in process.stderr]).decode(errors="replace")
    return code, out.decode(), err


async def test_the_typescript_example_client_runs_a_turn_through_the_bridge(
    tmp_path: Path,
) -> None:
    require_binary("node")
    log = tmp_path / "bridge.log"
    async with running_hub([demo_agent()]) as hub:
        fake_npx(tmp_path / "bin", hub.url, log)
        code, stdout, stderr = await run_client(tmp_path / "bin", tmp_path)
        assert code == 0, (stdout, stderr, log.read_text())
        assert "[Client] Error" not in stderr, stderr
        assert "✅ Connected to agent (protocol v1)" in stdout
        assert "🔐 Permission requested" in stdout
        assert stdout.rstrip().endswith("✅ Agent completed with: end_turn"), stdout
        session_id = stdout.split("📝 Created session: ", 1)[1].split("\n", 1)[0].strip()

        # The observer takes the session from its first event, as the client did.
        async with acp_client(hub.url, version=1) as observer:
            listed = await observer.call("session/list", {})
            (entry,) = [s for s in listed["sessions"] if s["sessionId"] == session_id]
            after = {"acp-hub": {"after": {"epoch": entry["_meta"]["acp-hub"]["epoch"], "seq": 0}}}
            resumed = await observer.call(
                "session/resume", {"sessionId": session_id, "cwd": str(tmp_path), "_meta": after}
            )
            last = resumed["_meta"]["acp-hub"]["seq"]
            updates = [p["update"] for p in observer.session_updates(session_id)]
        assert last > 0
        assert updates
        pieces = [render(u) for u in updates if u.get("sessionUpdate") != "user_message_chunk"]
        expected = [p for p in pieces if p is not None]
        assert len(expected) > 10
        # Every update the observer got, printed by the client in the same order (the
        # permission dialog's lines come in between).
        position = 0
        for piece in expected:
            found = stdout.find(piece, position)
            assert found >= 0, (piece, stdout[position:])
            position = found + len(piece)
        # Each agent text chunk printed exactly as often as the observer got it.
        for piece in set(expected):
            assert stdout.count(piece) >= expected.count(piece)
    assert "Traceback" not in log.read_text()
