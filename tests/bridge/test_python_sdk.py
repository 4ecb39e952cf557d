"""The Python SDK's stdio client (``acp.spawn_agent_process``) runs ``acp-hub bridge`` as its
agent: a whole turn of the scripted agent through a real hub, watched by a WebSocket observer;
a second bridge attached with ``--session``; errors an editor gets from a bridge that cannot
reach its hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from hub.bridge.frames import hub_initialize_params
from tests.bridge.harness import TIMEOUT, EditorClient, bridge_env, spawn_bridge
from tests.credentials import owner_token, token
from tests.server.harness import AcpClient, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio

TURN = "\n".join(["say hello from the hub", "permission", "tool text", "say all done"])


def signature(update: dict[str, Any]) -> tuple[Any, ...]:
    """What an editor renders of an update: its kind, text, tool call and status."""
    content = update.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return (update.get("sessionUpdate"), text, update.get("toolCallId"), update.get("status"))


def rendered(updates: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The signatures of the updates an editor shows for the agent's side of a turn."""
    return [signature(u) for u in updates if u.get("sessionUpdate") != "user_message_chunk"]


async def initialize(run_conn: Any) -> Any:
    return await run_conn.initialize(
        protocol_version=1,
        client_capabilities=ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
        ),
        client_info=Implementation(name="sdk-editor", version="1"),
    )


async def test_a_whole_turn_through_the_bridge_is_what_a_websocket_observer_sees(
    tmp_path: Path,
) -> None:
    async with (
        running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub,
        spawn_bridge(hub.url, tmp_path) as run,
    ):
        init = await initialize(run.conn)
        assert init.protocol_version == 1
        # The hub names the editor's user after the credential (not the editor program) and
        # sees none of the fs/terminal capabilities it offered.
        hub_meta = (init.field_meta or {})["acp-hub"]
        assert hub_meta["name"] == "test-owner"
        session = await run.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        session_id = session.session_id
        assert session_id in hub.app.registry.sessions  # type: ignore[union-attr]

        epoch = (session.field_meta or {})["acp-hub"]["epoch"]
        async with acp_client(hub.url, version=1) as observer:
            # The observer takes the whole session from its start, as the editor did.
            after = {"acp-hub": {"after": {"epoch": epoch, "seq": 0}}}
            await observer.call(
                "session/resume", {"sessionId": session_id, "cwd": "/tmp", "_meta": after}
            )
            response = await run.conn.prompt(session_id=session_id, prompt=[text_block(TURN)])
            assert response.stop_reason == "end_turn"
            editor = run.editor
            await observer.wait_for(
                lambda: "all done" in "".join(_texts(observer)) and len(observer.cancelled) == 1
            )

            # The editor answered the permission request (allow); the observer's copy of it
            # was withdrawn, and both saw the agent report the editor's answer.
            assert len(editor.permissions) == 1
            assert observer.requests[0]["method"] == "session/request_permission"
            assert observer.cancelled == {observer.requests[0]["id"]}
            assert "permission: selected allow" in "".join(editor.texts())
            # Everything the agent did, in the same order, for the editor and the observer.
            observed = [p["update"] for p in observer.session_updates(session_id)]
            assert rendered(editor.updates) == rendered(observed)
            assert "".join(editor.texts()) == "".join(_texts(observer))
            assert "hello from the hub" in "".join(editor.texts())
        # The hub never saw the editor's fs/terminal capabilities (the bridge cannot honour them).
        conns = [c for c in hub.app.connections if c.program == "sdk-editor"]
        assert len(conns) == 1


def _texts(client: AcpClient) -> list[str]:
    return [
        str(p["update"]["content"]["text"])
        for p in client.updates
        if p["update"].get("sessionUpdate") == "agent_message_chunk"
    ]


async def test_a_second_bridge_attached_with_session_shows_the_history(tmp_path: Path) -> None:
    async with (
        running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub,
        spawn_bridge(hub.url, tmp_path) as first,
    ):
        await initialize(first.conn)
        session_id = (await first.conn.new_session(cwd=str(tmp_path))).session_id
        done = await first.conn.prompt(session_id=session_id, prompt=[text_block(TURN)])
        assert done.stop_reason == "end_turn"
        said = "".join(first.editor.texts())

        second_editor = EditorClient()
        async with spawn_bridge(
            hub.url, tmp_path, "--session", session_id, editor=second_editor
        ) as second:
            await initialize(second.conn)
            attached = await second.conn.new_session(cwd=str(tmp_path))
            assert attached.session_id == session_id
            await second_editor.wait_for(lambda: "all done" in "".join(second_editor.texts()))
            # The whole history: the prompt the first editor sent, the agent's answer, the
            # tool calls with their final status.
            assert "".join(second_editor.texts()) == said
            assert TURN.splitlines()[0] in "".join(second_editor.texts("user_message_chunk"))
            tools = {
                u["toolCallId"]: str(u.get("status"))
                for u in second_editor.updates
                if u.get("sessionUpdate") in ("tool_call", "tool_call_update")
            }
            assert sorted(tools.values()) == ["completed", "completed"]
            assert all(u["_sessionId"] == session_id for u in second_editor.updates)

            # Both editors drive the same session: the second one's prompt reaches the first.
            await second.conn.prompt(session_id=session_id, prompt=[text_block("say again")])
            await first.editor.wait_for(lambda: "again" in "".join(first.editor.texts()))


async def test_errors_reach_the_editor_as_json_rpc_errors(tmp_path: Path) -> None:
    # Nothing listens there: the editor's initialize fails with a message naming the hub.
    async with spawn_bridge("ws://127.0.0.1:9/acp", tmp_path) as run:
        with pytest.raises(RequestError) as refused:
            await initialize(run.conn)
        assert refused.value.code == -32050
        assert "cannot reach the hub at ws://127.0.0.1:9/acp" in str(refused.value)
    async with spawn_bridge("http://127.0.0.1:9/acp", tmp_path) as run:
        with pytest.raises(RequestError) as bad:
            await initialize(run.conn)
        assert bad.value.code == -32050
        assert "bad hub URL" in str(bad.value)
    async with running_hub([scripted_agent()]) as hub:
        wrong_path = hub.url.replace("/acp", "/nope")
        async with spawn_bridge(wrong_path, tmp_path) as run:
            with pytest.raises(RequestError) as missing:
                await initialize(run.conn)
            assert "HTTP 403" in str(missing.value)
            assert "the path is wrong (the hub's endpoint is /acp)" in str(missing.value)
        async with spawn_bridge(hub.url, tmp_path) as run:
            # Requests before initialize are refused; after it, the hub's own errors come back.
            with pytest.raises(RequestError) as early:
                await run.conn.new_session(cwd="/tmp")
            assert early.value.code == -32600
            await initialize(run.conn)
            with pytest.raises(RequestError) as relative:
                await run.conn.new_session(cwd="relative/path")
            assert relative.value.code == -32602
    assert TIMEOUT > 0


async def test_the_token_goes_as_a_bearer_and_a_refused_one_is_named(tmp_path: Path) -> None:
    async with running_hub([scripted_agent()]) as hub:
        # --token: sent as Authorization: Bearer on the upgrade (the URL carries none).
        async with spawn_bridge(hub.bare_url, tmp_path, "--token", owner_token()) as run:
            init = await initialize(run.conn)
            assert (init.field_meta or {})["acp-hub"]["role"] == "owner"
            await run.conn.new_session(cwd=str(tmp_path))
        # ACP_HUB_TOKEN: the same, from the environment; a viewer's token gives a viewer.
        viewer = bridge_env(ACP_HUB_TOKEN=token("viewer"))
        async with spawn_bridge(hub.bare_url, tmp_path, env=viewer) as run:
            init = await initialize(run.conn)
            assert (init.field_meta or {})["acp-hub"]["role"] == "viewer"
            with pytest.raises(RequestError) as forbidden:
                await run.conn.new_session(cwd=str(tmp_path))
            assert forbidden.value.code == -32040
        async with spawn_bridge(hub.bare_url, tmp_path, "--token", "not-a-token") as run:
            with pytest.raises(RequestError) as refused:
                await initialize(run.conn)
            assert refused.value.code == -32000
            assert "refused the token (HTTP 401)" in str(refused.value)
            assert "not-a-token" not in run.log_text()  # never logged
        async with spawn_bridge(hub.bare_url, tmp_path) as run:
            with pytest.raises(RequestError) as missing:
                await initialize(run.conn)
            assert missing.value.code == -32000
            assert "requires a token (HTTP 401): pass --token or set ACP_HUB_TOKEN" in str(
                missing.value
            )


async def test_list_and_load_are_the_hubs(tmp_path: Path) -> None:
    async with running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub:
        async with spawn_bridge(hub.url, tmp_path) as first:
            await initialize(first.conn)
            session_id = (await first.conn.new_session(cwd=str(tmp_path))).session_id
            await first.conn.prompt(session_id=session_id, prompt=[text_block("say remember me")])
        editor = EditorClient()
        async with spawn_bridge(hub.url, tmp_path, editor=editor) as run:
            await initialize(run.conn)
            listed = await run.conn.list_sessions()
            assert [s.session_id for s in listed.sessions] == [session_id]
            # session/load replays the history before its answer, as ACP asks.
            await run.conn.load_session(cwd=str(tmp_path), session_id=session_id)
            assert editor.texts() == ["remember me"]
            assert "say remember me" in "".join(editor.texts("user_message_chunk"))


def test_the_hub_is_not_told_of_the_editors_fs_and_terminal() -> None:
    caps = {"fs": {"readTextFile": True}, "terminal": True, "elicitation": {"form": {}}}
    v1 = hub_initialize_params(1, {"protocolVersion": 1, "clientCapabilities": caps})
    assert v1["clientCapabilities"] == {"elicitation": {"form": {}}}
    assert v1["_meta"]["acp-hub"]["events"] is True  # contiguous seqs for the cursor
    v2 = hub_initialize_params(
        2, {"protocolVersion": 2, "capabilities": caps, "_meta": {"acp-hub": {"batches": True}}}
    )
    assert v2["capabilities"] == {"elicitation": {"form": {}}}
    assert v2["_meta"]["acp-hub"] == {}  # one message per line: no batches
