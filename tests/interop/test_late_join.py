"""A late client catches up over every transport with the SDKs' own, unmodified clients.

The Python SDK's Streamable HTTP client (``acp.http.client.create_http_stream``) opens a
session's SSE stream when it sees the session's id in a message on the connection's stream,
so every answer that attaches a connection to a session (``session/new``, ``session/load``,
``session/resume``, ``session/attach``) carries ``sessionId``, and the frames queued for that
session before the client's GET arrives are held until it does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from tests.bridge.harness import EditorClient
from tests.interop.scenario import sdk_client
from tests.peers import paths
from tests.server.harness import acp_client, running_hub, scripted_agent
from tests.support import require_binary

pytestmark = pytest.mark.anyio

TURN = "\n".join(["say hello to the late joiner", "tool text", "say all done"])


def _texts(updates: list[dict[str, Any]]) -> str:
    return "".join(
        str(u["content"]["text"])
        for u in updates
        if u.get("sessionUpdate") == "agent_message_chunk" and isinstance(u.get("content"), dict)
    )


async def _changed(editor: EditorClient, predicate: Any) -> None:
    with anyio.fail_after(20):
        while not predicate():
            await editor._changed.wait()


@pytest.mark.parametrize("transport", ["http", "ws"])
@pytest.mark.parametrize("how", ["load", "resume"])
async def test_a_late_sdk_client_catches_up_on_a_session(
    transport: str, how: str, tmp_path: Path
) -> None:
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        acp_client(hub.url, version=2) as owner,
    ):
        session_id = await owner.new_session()
        await owner.prompt(session_id, TURN)
        await owner.wait_for(lambda: owner.idle_count(session_id) >= 1)
        expected = _texts([p["update"] for p in owner.session_updates(session_id)])
        assert "all done" in expected

        editor = EditorClient()
        async with sdk_client(transport, hub, tmp_path, editor) as conn:
            await conn.initialize(protocol_version=1)
            if how == "load":
                # session/load replays the whole history (the answer follows it).
                await conn.load_session(cwd="/tmp", session_id=session_id)
            else:
                # session/resume from a cursor before the first event (the hub's
                # ``_meta["acp-hub"].after``): everything after it is replayed.
                epoch = owner.session_updates(session_id)[0]["_meta"]["acp-hub"]["epoch"]
                meta: dict[str, Any] = {"acp-hub": {"after": {"epoch": epoch, "seq": 0}}}
                await conn.resume_session(cwd="/tmp", session_id=session_id, **meta)
            await _changed(editor, lambda: "all done" in _texts(editor.updates))
            assert _texts(editor.updates) == expected


TS_LATE_JOINER = """
import * as acp from "{sdk}/acp.js";
import {{ MemoryAcpCookieStore, createHttpStream }} from "{sdk}/http-stream.js";
const [url, sessionId, how, epoch] = process.argv.slice(2);
const stream = createHttpStream(url, {{ cookieStore: new MemoryAcpCookieStore() }});
const said = [];
let seen = () => {{}};
const done = new Promise((resolve) => {{ seen = resolve; }});
await acp
  .client({{ name: "ts-late-joiner" }})
  .onNotification(acp.methods.client.session.update, (ctx) => {{
    const u = ctx.params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {{
      said.push(u.content.text);
      if (said.join("").includes("all done")) seen();
    }}
  }})
  .connectWith(stream, async (ctx) => {{
    const m = acp.methods.agent;
    await ctx.request(m.initialize, {{ protocolVersion: 1, clientCapabilities: {{}} }});
    if (how === "load") {{
      await ctx.request(m.session.load, {{ sessionId, cwd: "/tmp", mcpServers: [] }});
    }} else {{
      await ctx.request(m.session.resume, {{
        sessionId, cwd: "/tmp",
        _meta: {{ "acp-hub": {{ after: {{ epoch: Number(epoch), seq: 0 }} }} }},
      }});
    }}
    await done;
    return {{}};
  }});
console.log(JSON.stringify({{ said: said.join("") }}));
process.exit(0);
"""


@pytest.mark.parametrize("how", ["load", "resume"])
async def test_the_typescript_sdk_http_client_catches_up_late(tmp_path: Path, how: str) -> None:
    node = require_binary("node")
    sdk = paths.TS_SDK_V1 / "dist"
    if not (sdk / "http-stream.js").exists():
        paths.ts_agent_js()  # skips (or fails in CI) with the install hint
    driver = tmp_path / "late.mjs"
    driver.write_text(TS_LATE_JOINER.format(sdk=sdk))
    async with running_hub([scripted_agent("scripted", 2)]) as hub:
        async with acp_client(hub.url, version=2) as owner:
            session_id = await owner.new_session()
            await owner.prompt(session_id, TURN)
            await owner.wait_for(lambda: owner.idle_count(session_id) >= 1)
            expected = _texts([p["update"] for p in owner.session_updates(session_id)])
            epoch = owner.session_updates(session_id)[0]["_meta"]["acp-hub"]["epoch"]
            with anyio.fail_after(60):
                ran = await anyio.run_process(
                    [node, str(driver), hub.http_acp, session_id, how, str(epoch)], check=False
                )
        assert ran.returncode == 0, (ran.stdout, ran.stderr)
        assert orjson.loads(ran.stdout.decode().strip().splitlines()[-1]) == {"said": expected}
