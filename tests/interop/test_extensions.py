"""ACP's extension surface through the hub, with the SDKs' own clients on every transport.

The project's scripted agent implements ``_acme/echo`` and ``session/set_model`` (methods the
hub has no entry for), emits ``_acme/progress`` notifications and asks its client
``_acme/ask``. The hub passes each on: a client's request to the session's agent (role
``driver`` unless ``extension_roles`` says otherwise), the agent's notification to every
attached client, the agent's request to the client whose prompt runs.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from hub.protocol.errors import FORBIDDEN, METHOD_NOT_FOUND
from hub.settings import Settings
from tests.bridge.harness import EditorClient
from tests.credentials import token
from tests.interop.scenario import sdk_client
from tests.server.harness import (
    AcpClient,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
    with_workspace,
)
from tests.server.http_client import http_acp

pytestmark = pytest.mark.anyio

ASK = json.dumps({"q": "which size?"})
TURN = "\n".join(
    [
        'ext-notify _acme/progress {"pct": 50}',
        f"ext-ask _acme/ask {ASK}",
        "say all done",
    ]
)


@asynccontextmanager
async def owner_and_viewer(version: int) -> AsyncIterator[tuple[AcpClient, AcpClient, str]]:
    """A hub on the scripted agent, an owner's new session and a viewer attached to it, both
    clients speaking ``version``."""
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        acp_client(hub.url, version) as owner,
        acp_client(hub.url, version, role="viewer") as viewer,
    ):
        sid = await owner.new_session()
        await viewer.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        yield owner, viewer, sid


@dataclass(eq=False)
class AskedEditor(EditorClient):
    """An editor that answers the agent's ``_acme/ask`` and records ``_acme/progress``."""

    asked: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method != "acme/ask":
            return await super().ext_method(method, params)
        self.asked.append(params)
        self._touch()
        return {"answer": 42}

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "acme/progress":
            self.progress.append(params)
        await super().ext_notification(method, params)
        self._touch()


@pytest.mark.parametrize("transport", ["ws", "http", "bridge"])
async def test_extension_methods_pass_both_ways_through_every_transport(
    transport: str, tmp_path: Path
) -> None:
    editor = AskedEditor()
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        sdk_client(transport, hub, tmp_path, editor) as conn,
    ):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        sid = session.session_id

        # A client's `_acme/echo` reaches the agent with the agent's session id (it knows
        # it), and the agent's answer comes back; the v2 agent answers a v1 client unchanged.
        echoed = await conn.ext_method("acme/echo", {"sessionId": sid, "n": 1})
        assert echoed == {"echo": {"n": 1}, "sessionKnown": True, "protocolVersion": 2}

        # The agent's notification reaches the client; its request goes to the client whose
        # prompt runs, and the answer goes back to the agent.
        done = await conn.prompt(session_id=sid, prompt=[text_block(TURN)])
        assert done.stop_reason == "end_turn"
        await editor.wait_for(lambda: bool(editor.progress) and bool(editor.asked))
        assert editor.progress == [{"sessionId": sid, "pct": 50}]
        assert editor.asked == [{"sessionId": sid, "q": "which size?"}]
        await editor.wait_for(lambda: "all done" in "".join(editor.texts()))
        assert 'ext-ask: {"answer": 42}' in editor.texts()


@pytest.mark.parametrize("version", [1, 2])
async def test_roles_decide_who_may_send_an_extension_method(version: int) -> None:
    settings = with_workspace(
        replace(Settings(), extension_roles={"_acme/echo": "viewer", "session/set_model": "owner"})
    )
    async with (
        running_hub([scripted_agent("scripted", 2)], settings) as hub,
        acp_client(hub.url, version) as owner,
        acp_client(hub.url, version, role="viewer") as viewer,
        acp_client(hub.url, version, role="driver") as driver,
    ):
        sid = await owner.new_session()
        for client in (viewer, driver):
            await client.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})

        # `_acme/echo` is configured for viewers; `session/set_model` for owners only.
        answer = await viewer.call("_acme/echo", {"sessionId": sid, "x": [1, 2]})
        assert answer["echo"] == {"x": [1, 2]}
        with pytest.raises(RpcFailure) as refused:
            await driver.call("session/set_model", {"sessionId": sid, "modelId": "big"})
        assert refused.value.code == FORBIDDEN
        set_model = await owner.call("session/set_model", {"sessionId": sid, "modelId": "big"})
        assert set_model == {"_meta": {"scripted": {"model": "big"}}}


async def test_an_unconfigured_extension_method_needs_a_driver_and_a_session() -> None:
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, role="viewer") as viewer,
        acp_client(hub.url, 1) as other,
    ):
        sid = await owner.new_session()
        await viewer.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        with pytest.raises(RpcFailure) as refused:
            await viewer.call("_acme/echo", {"sessionId": sid})
        assert refused.value.code == FORBIDDEN
        assert "needs role 'driver'" in refused.value.error["message"]
        # Not attached: the client must resume the session first.
        with pytest.raises(RpcFailure) as unattached:
            await other.call("_acme/echo", {"sessionId": sid})
        assert "resume it first" in unattached.value.error["message"]
        # No sessionId and nothing configured: the hub does not know the method.
        with pytest.raises(RpcFailure) as unknown:
            await owner.call("_acme/echo", {})
        assert unknown.value.code == METHOD_NOT_FOUND
        # The hub's own namespace is never passed to an agent.
        with pytest.raises(RpcFailure) as own:
            await owner.call("_hub/nothing_here", {"sessionId": sid})
        assert own.value.code == METHOD_NOT_FOUND
        # A method the agent does not implement: the agent's own -32601 comes back.
        with pytest.raises(RpcFailure) as agents:
            await owner.call("session/fork", {"sessionId": sid})
        assert agents.value.code == METHOD_NOT_FOUND
        assert "session/fork" in agents.value.error["message"]


async def test_an_agent_request_nobody_can_take_is_answered_method_not_found() -> None:
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, role="viewer") as viewer,
    ):
        sid = await owner.new_session()
        await viewer.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        # The prompter never answers `_acme/ask` and detaches while it waits: the agent is
        # told -32601, and the viewer (who may not take it) is never asked.
        await owner.start(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "ext-ask\nsay after"}]},
        )
        await owner.wait_for(lambda: any(r["method"] == "_acme/ask" for r in owner.requests))
        await owner.call("session/detach", {"sessionId": sid})

        def said() -> str:
            return "".join(
                str(p["update"].get("content", {}).get("text"))
                for p in viewer.session_updates(sid)
                if p["update"].get("sessionUpdate") == "agent_message_chunk"
            )

        await viewer.wait_for(lambda: "after" in said())
        assert f"ext-ask: error {METHOD_NOT_FOUND}" in said()
        assert not [r for r in viewer.requests if r["method"] == "_acme/ask"]


async def test_a_configured_method_without_a_session_goes_to_the_default_agent() -> None:
    settings = with_workspace(replace(Settings(), extension_roles={"_acme/echo": "driver"}))
    async with (
        running_hub([scripted_agent("scripted", 2)], settings) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, role="viewer") as viewer,
    ):
        sid = await owner.new_session()
        answer = await owner.call("_acme/echo", {"hello": "agent"})
        assert answer == {"echo": {"hello": "agent"}, "sessionKnown": False, "protocolVersion": 2}
        with pytest.raises(RpcFailure) as low:
            await viewer.call("_acme/echo", {})
        assert low.value.code == FORBIDDEN
        # A credential for one session does not speak to the agent of every session.
        scoped = token("owner", sub="scoped", sessions=[sid], agents=["scripted"])
        async with acp_client(hub.url_with(scoped)) as one_session:
            with pytest.raises(RpcFailure) as narrow:
                await one_session.call("_acme/echo", {})
            assert narrow.value.code == FORBIDDEN
            assert "every session" in narrow.value.error["message"]


@pytest.mark.parametrize("version", [1, 2])
async def test_raw_clients_of_each_version_get_the_agents_extension_messages(
    version: int,
) -> None:
    async with owner_and_viewer(version) as (owner, viewer, sid):
        await owner.start(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": TURN}]},
        )
        # The notification reaches every attached client, unchanged but for the session id.
        for client in (owner, viewer):

            def noted(c: AcpClient = client) -> bool:
                return any(n["method"] == "_acme/progress" for n in c.notifications)

            await client.wait_for(noted)
            (note,) = [n for n in client.notifications if n["method"] == "_acme/progress"]
            assert note["params"] == {"sessionId": sid, "pct": 50}
        # The request goes to the prompter only, and its answer reaches the agent.
        await owner.wait_for(lambda: any(r["method"] == "_acme/ask" for r in owner.requests))
        (asked,) = [r for r in owner.requests if r["method"] == "_acme/ask"]
        assert asked["params"] == {"sessionId": sid, "q": "which size?"}
        await owner.answer(asked["id"], {"answer": version})

        # Set up like the tests around it: each test spells out its own scenario.
        def said() -> str:
            return "".join(
                str(p["update"].get("content", {}).get("text"))
                for p in viewer.session_updates(sid)
                if p["update"].get("sessionUpdate") == "agent_message_chunk"
            )

        await viewer.wait_for(lambda: "all done" in said())
        assert f'ext-ask: {{"answer": {version}}}' in said()
        assert not [r for r in viewer.requests if r["method"] == "_acme/ask"]


async def test_a_v2_client_over_streamable_http_gets_the_agents_extension_messages() -> None:
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        http_acp(hub.http_acp, 2) as owner,
    ):
        created = await owner.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        sid = created["sessionId"]
        owner.open_stream(sid)
        await owner.wait_for(lambda: owner.statuses.get(sid) == 200)
        await owner.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": TURN}]}
        )
        # The notification reaches the client on the session's stream, unchanged but for the
        # session id ...
        await owner.wait_for(
            lambda: any(n["method"] == "_acme/progress" for n in owner.notifications)
        )
        (note,) = [n for n in owner.notifications if n["method"] == "_acme/progress"]
        assert note["params"] == {"sessionId": sid, "pct": 50}
        # ... and the request reaches the prompter, whose answer (a POST) reaches the agent.
        await owner.wait_for(lambda: any(r["method"] == "_acme/ask" for r in owner.requests))
        (asked,) = [r for r in owner.requests if r["method"] == "_acme/ask"]
        assert asked["params"] == {"sessionId": sid, "q": "which size?"}
        await owner.answer(asked["id"], {"answer": "over http"}, sid)

        def said() -> str:
            return "".join(
                str(u["update"].get("content", {}).get("text"))
                for u in owner.session_updates(sid)
                if u["update"].get("sessionUpdate") == "agent_message_chunk"
            )

        await owner.wait_for(lambda: "all done" in said())
        assert 'ext-ask: {"answer": "over http"}' in said()


async def test_an_agent_request_goes_to_the_lease_holder_when_the_prompter_has_left() -> None:
    async with (
        running_hub([scripted_agent("scripted", 2)]) as hub,
        acp_client(hub.url) as owner,
        acp_client(hub.url, role="driver") as holder,
    ):
        sid = await owner.new_session()
        await holder.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await holder.call("_hub/lease/request", {"sessionId": sid})
        # The owner's turn waits on a permission; the owner leaves before the agent asks its
        # extension request, so the request goes to the lease holder instead.
        script = f"permission\next-ask _acme/ask {ASK}\nsay after"
        await owner.start(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": script}]}
        )

        def permission(client: AcpClient) -> list[dict[str, Any]]:
            return [r for r in client.requests if r["method"] == "session/request_permission"]

        await holder.wait_for(lambda: bool(permission(holder)))
        await owner.call("session/detach", {"sessionId": sid})
        await holder.answer(
            permission(holder)[0]["id"], {"outcome": {"outcome": "selected", "optionId": "allow"}}
        )
        await holder.wait_for(lambda: any(r["method"] == "_acme/ask" for r in holder.requests))
        (asked,) = [r for r in holder.requests if r["method"] == "_acme/ask"]
        assert asked["params"] == {"sessionId": sid, "q": "which size?"}
        await holder.answer(asked["id"], {"answer": "from the holder"})

        def said() -> str:
            return "".join(
                str(p["update"].get("content", {}).get("text"))
                for p in holder.session_updates(sid)
                if p["update"].get("sessionUpdate") == "agent_message_chunk"
            )

        await holder.wait_for(lambda: "after" in said())
        assert 'ext-ask: {"answer": "from the holder"}' in said()
        assert not [r for r in owner.requests if r["method"] == "_acme/ask"]


@pytest.mark.parametrize("version", [1, 2])
async def test_an_agents_notification_of_any_unknown_method_reaches_the_sessions_clients(
    version: int,
) -> None:
    async with owner_and_viewer(version) as (owner, viewer, sid):
        # ACP's and JSON-RPC's own methods are not passed on; a method the hub does not know is,
        # `_`-prefixed or not. Sent in this order, so the last one arriving means the others
        # would have arrived before it.
        script = "\n".join(
            [
                'ext-notify session/cancel {"n": 1}',
                'ext-notify $/progress {"n": 2}',
                'ext-notify session/request_permission {"n": 3}',
                'ext-notify acme/status {"n": 4}',
                'ext-notify _acme/progress {"n": 5}',
            ]
        )
        await owner.prompt(sid, script)
        for client in (owner, viewer):

            def arrived(c: AcpClient = client) -> bool:
                return any(n["method"] == "_acme/progress" for n in c.notifications)

            await client.wait_for(arrived)
            passed = [
                (n["method"], n["params"])
                for n in client.notifications
                if n["method"] != "session/update" and not n["method"].startswith("_hub")
            ]
            assert passed == [
                ("acme/status", {"sessionId": sid, "n": 4}),
                ("_acme/progress", {"sessionId": sid, "n": 5}),
            ]
