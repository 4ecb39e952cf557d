"""A running bridge loses its hub connection mid-turn and the editor notices nothing: the
hub's listener is stopped and started again on the same port, or the hub drops the bridge's
connection; the editor (the Python SDK's stdio client) sees every update exactly once, in
order, and the prompt's answer."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError, text_block

from hub.server.connection import ClientConnection
from hub.settings import Settings
from tests.bridge.harness import TIMEOUT, EditorClient, Listener, listener_hub, spawn_bridge
from tests.bridge.test_python_sdk import initialize
from tests.server.harness import acp_client, scripted_agent

pytestmark = pytest.mark.anyio

CHUNKS = 40
SLOW_TURN = f"say start\nslow {CHUNKS} 40\nsay end"
EXPECTED = ["start", *(f"slow {i}\n" for i in range(CHUNKS)), "end"]


def editors_connections(listener: Listener) -> list[ClientConnection]:
    return [c for c in listener.hub.connections if c.program == "sdk-editor"]


async def wait_attached(
    listener: Listener, session_id: str, old: ClientConnection
) -> ClientConnection:
    """The bridge's new connection (not ``old``) once it is attached to ``session_id``."""
    with anyio.fail_after(TIMEOUT):
        while True:
            for conn in editors_connections(listener):
                if conn is not old and session_id in conn.sessions:
                    return conn
            # The hub offers no event for a client attaching; the condition is re-checked
            # every few milliseconds until it holds.
            await anyio.sleep(0.01)


async def test_restarting_the_hubs_listener_mid_turn_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    async with listener_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as listener:
        editor = EditorClient()
        async with spawn_bridge(listener.url, tmp_path, editor=editor) as run:
            await initialize(run.conn)
            session_id = (await run.conn.new_session(cwd=str(tmp_path))).session_id
            first = editors_connections(listener)[0]
            async with anyio.create_task_group() as tg:
                answers: list[str] = []

                async def prompt() -> None:
                    done = await run.conn.prompt(
                        session_id=session_id, prompt=[text_block(SLOW_TURN)]
                    )
                    answers.append(done.stop_reason)

                tg.start_soon(prompt)
                await editor.wait_for(lambda: "slow 5\n" in editor.texts())
                await listener.stop()
                assert not listener.hub.connections  # the bridge was really cut off
                await listener.start()
                second = await wait_attached(listener, session_id, first)
                assert second.connection_id != first.connection_id

            assert answers == ["end_turn"]
            assert editor.texts() == EXPECTED
        log = run.log_text()
        assert "the connection to the hub was lost" in log
        assert "resumed" in log


async def test_a_dropped_connection_keeps_the_permission_dialog_and_the_turn(
    tmp_path: Path,
) -> None:
    async with listener_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as listener:
        editor = EditorClient(gate=anyio.Event())
        async with spawn_bridge(listener.url, tmp_path, editor=editor) as run:
            await initialize(run.conn)
            session_id = (await run.conn.new_session(cwd=str(tmp_path))).session_id
            # A teammate watches (and may answer): the request stays pending while the
            # editor's bridge is away (with nobody left to answer, the hub would cancel it).
            async with acp_client(listener.url) as teammate, anyio.create_task_group() as tg:
                await teammate.call("session/resume", {"sessionId": session_id, "cwd": "/tmp"})
                answers: list[str] = []

                async def prompt() -> None:
                    done = await run.conn.prompt(
                        session_id=session_id,
                        prompt=[text_block("say before\npermission\nsay after")],
                    )
                    answers.append(done.stop_reason)

                tg.start_soon(prompt)
                # The editor shows the dialog; the hub drops the bridge (a server restart).
                await editor.wait_for(lambda: len(editor.permissions) == 1)
                (first,) = editors_connections(listener)
                first.close(1012, "restarting")
                await wait_attached(listener, session_id, first)
                # The editor answers the dialog it still shows: the answer counts.
                assert editor.gate is not None
                editor.gate.set()
                await teammate.wait_for(lambda: len(teammate.cancelled) == 1)

            assert answers == ["end_turn"]
            assert len(editor.permissions) == 1  # offered again to the bridge, not to the editor
            texts = "".join(editor.texts())
            assert texts == "beforepermission: selected allowafter", texts
            statuses = [
                u.get("status")
                for u in editor.updates
                if u.get("sessionUpdate") == "tool_call_update"
            ]
            assert statuses[-1] == "completed"


@pytest.mark.parametrize(
    ("away_s", "grace_s"),
    [
        pytest.param(2.0, 10.0, id="2s"),
        pytest.param(20.0, 30.0, id="20s", marks=pytest.mark.slow),
    ],
)
async def test_the_editor_as_the_only_approver_answers_after_the_hub_was_gone(
    tmp_path: Path, away_s: float, grace_s: float
) -> None:
    # Nobody else is attached: while the bridge is away the request waits (answer_grace), and
    # the answer the editor gives once the bridge is back reaches the agent.
    settings = Settings(answer_grace=grace_s)
    async with listener_hub([scripted_agent("scripted", 2, "--ack-message-id")], settings) as (
        listener
    ):
        editor = EditorClient(gate=anyio.Event())
        async with spawn_bridge(listener.url, tmp_path, editor=editor) as run:
            await initialize(run.conn)
            session_id = (await run.conn.new_session(cwd=str(tmp_path))).session_id
            async with anyio.create_task_group() as tg:
                # The prompt of the test above, with the hub lost at another point.
                answers: list[str] = []

                async def prompt() -> None:
                    done = await run.conn.prompt(
                        session_id=session_id,
                        prompt=[text_block("say before\npermission\nsay after")],
                    )
                    answers.append(done.stop_reason)

                tg.start_soon(prompt)
                await editor.wait_for(lambda: len(editor.permissions) == 1)
                (first,) = editors_connections(listener)
                await listener.stop()
                assert not listener.hub.connections  # the bridge was really cut off
                registry = listener.hub.registry
                assert registry is not None
                (session,) = registry.sessions.values()
                assert len(session.permissions) == 1  # still pending, nobody attached
                await anyio.sleep(away_s)  # the hub stays away, not a wait for an event
                await listener.start()
                await wait_attached(listener, session_id, first)
                assert editor.gate is not None
                editor.gate.set()

            assert answers == ["end_turn"]
            texts = "".join(editor.texts())
            assert texts == "beforepermission: selected allowafter", texts


async def test_a_hub_that_stays_gone_fails_the_editors_requests_clearly(tmp_path: Path) -> None:
    async with listener_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as listener:
        editor = EditorClient()
        async with spawn_bridge(
            listener.url, tmp_path, "--reconnect-timeout", "1", editor=editor
        ) as run:
            await initialize(run.conn)
            session_id = (await run.conn.new_session(cwd=str(tmp_path))).session_id
            await listener.stop()
            # The bridge tries for a second, then the editor's request gets the reason.
            with pytest.raises(RequestError) as gone:
                await run.conn.prompt(session_id=session_id, prompt=[text_block("say hi")])
            assert gone.value.code == -32050
            assert "the hub is gone" in str(gone.value)
            assert "cannot reach the hub" in str(gone.value)
            # Once the hub is back, the next request reaches it again.
            await listener.start()
            done = await run.conn.prompt(session_id=session_id, prompt=[text_block("say back")])
            assert done.stop_reason == "end_turn"
            assert editor.texts()[-1] == "back"


async def test_a_cursor_the_hub_no_longer_holds_shows_only_what_the_editor_lacks(
    tmp_path: Path,
) -> None:
    # The hub keeps the last 8 events: while its listener is away the turn goes on far past
    # the bridge's cursor, so the resume gets a _hub_reset and the session's state again.
    settings = Settings(retained_events=8)
    async with listener_hub(
        [scripted_agent("scripted", 2, "--ack-message-id")], settings
    ) as listener:
        editor = EditorClient()
        async with spawn_bridge(listener.url, tmp_path, editor=editor) as run:
            await initialize(run.conn)
            session_id = (await run.conn.new_session(cwd=str(tmp_path))).session_id
            session = listener.hub.registry.sessions[session_id]  # type: ignore[union-attr]
            async with anyio.create_task_group() as tg:
                answers: list[str] = []

                async def prompt() -> None:
                    done = await run.conn.prompt(
                        session_id=session_id, prompt=[text_block(SLOW_TURN)]
                    )
                    answers.append(done.stop_reason)

                tg.start_soon(prompt)
                await editor.wait_for(lambda: "slow 5\n" in editor.texts())
                await listener.stop()
                with anyio.fail_after(TIMEOUT):
                    # No event tells a test that a turn ended with no client attached.
                    while session.turns.busy:  # noqa: ASYNC110
                        await anyio.sleep(0.02)
                await listener.start()

            assert answers == ["end_turn"]
            # The message the editor was streaming is completed, not repeated; the prompt it
            # sent is not echoed back to it.
            assert "".join(editor.texts()) == "".join(EXPECTED)
            assert editor.texts("user_message_chunk") == []
        assert "could not serve the cursor" in run.log_text()
