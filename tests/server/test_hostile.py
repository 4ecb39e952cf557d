"""Broken and hostile clients over real sockets: each answer is a JSON-RPC error or a documented
close code, one concise log line at most, never a traceback, and the hub goes on serving.

Every defect found by probing the hub as an attacker would has its regression test here.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import anyio
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from hub.mistakes import BURST
from hub.server.methods import ASYNC_METHODS, SYNC_METHODS
from hub.settings import Settings
from tests.server.harness import (
    AcpClient,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)

pytestmark = pytest.mark.anyio

HOSTILE_VALUES: list[Any] = [[], ["s-1"], {}, {"sessionId": "x"}, 0, -1, 2**53, 1.5, True, None, ""]
"""JSON values of every type, in place of whatever a method expects."""
PARAM_NAMES = (
    "sessionId",
    "cwd",
    "mcpServers",
    "prompt",
    "configId",
    "value",
    "type",
    "modeId",
    "queueId",
    "permission",
    "clientId",
    "agent",
    "replayFrom",
    "historyPolicy",
    "role",
    "_meta",
)


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Records with a traceback or at ERROR and above: a bug of the hub's."""
    return [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def finish_a_turn(client: AcpClient, session_id: str) -> None:
    """The session still works: a prompt runs a whole turn."""
    idle = client.idle_count(session_id)
    await client.prompt(session_id, "say still here")
    await client.wait_for(lambda: client.idle_count(session_id) > idle)


def nested(depth: int) -> str:
    """A JSON object ``depth`` levels deep (orjson reads 1,024 levels but writes only 254)."""
    return '{"a":' * depth + "1" + "}" * depth


async def test_a_prompt_the_hub_cannot_forward_is_answered_and_the_session_stays_usable() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        for depth in (300, 1000):
            request_id = 9000 + depth
            block = '{"type":"text","text":"deep","_meta":' + nested(depth) + "}"
            session_id = orjson.dumps(sid).decode()
            await owner.ws.send(
                f'{{"jsonrpc":"2.0","id":{request_id},"method":"session/prompt",'
                f'"params":{{"sessionId":{session_id},"prompt":[{block}]}}}}'
            )
            with pytest.raises(RpcFailure) as info:
                await owner.result(request_id)
            assert info.value.code in (-32600, -32602, -32603)
            # The turn did not outlive the failure: the next prompt starts at once.
            await finish_a_turn(owner, sid)
        listed = await owner.call("session/list", {})
        assert listed["sessions"][0]["_meta"]["acp-hub"]["queued"] == 0


@pytest.mark.parametrize("value", [["s-1"], {"id": "s-1"}, 7])
async def test_ids_of_the_wrong_type_are_invalid_params(value: Any) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        for method, params in (
            ("session/delete", {"sessionId": value}),
            ("_hub/agent_stderr", {"agent": value}),
        ):
            with pytest.raises(RpcFailure) as info:
                await owner.call(method, params)
            assert info.value.code == -32602, (method, info.value.error)
        assert (await owner.call("_hub/agent_stderr", {}))["agent"] == "scripted"


@pytest.mark.parametrize("value", [[1], {"id": 1}, None, 1.5])
async def test_a_cancel_request_naming_no_request_leaves_the_connection_alive(
    value: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        await owner.notify("$/cancel_request", {"requestId": value})
        assert (await owner.call("session/list", {}))["sessions"] == []
        assert owner.close_code is None
        assert tracebacks(caplog) == []


async def test_every_queued_byte_counts_against_the_outbox_bound() -> None:
    """A client that never reads but keeps asking is closed 1013 at the bound (responses
    count), instead of growing the hub until the keepalive gives up."""
    # No request rate here: what is measured is the bound, with full answers (a client over
    # the rate gets short refusals, which the kernel's buffers would swallow).
    settings = Settings(outbox_bytes=64 * 1024, request_rate=0)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        for _ in range(8):
            await owner.new_session()
        one = len(orjson.dumps(await owner.call("session/list", {})))
        # Far more than the kernel's buffers and the bound hold: 32 MB of answers. The client
        # library stops reading from its socket once it holds one unread frame.
        count = 32 * 1024 * 1024 // one
        async with connect(hub.url, max_size=None, max_queue=1, ping_interval=None) as flood:
            await flood.send(
                '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}'
            )
            with contextlib.suppress(ConnectionClosed):
                for i in range(count):
                    await flood.send(f'{{"jsonrpc":"2.0","id":{10 + i},"method":"session/list"}}')
            # Still not reading: the hub gives up on this client by itself (the client and the
            # hub share this event loop; reading now would let the hub's answers drain).
            with anyio.fail_after(60):
                while len(hub.app.connections) > 1:  # noqa: ASYNC110 - no event for a drop
                    await anyio.sleep(0.02)
            received = 0
            with anyio.fail_after(60), contextlib.suppress(ConnectionClosed):
                async for _ in flood:
                    received += 1
                    if received > count:
                        break  # every answer arrived: the bound did not hold
            close = flood.protocol.close_rcvd
        assert close is not None
        assert close.code == 1013
        assert received < count
        # The hub let go of it and serves everyone else.
        await owner.call("session/list", {})


async def test_requests_pipelined_behind_initialize_wait_for_it() -> None:
    async with running_hub([scripted_agent()]) as hub, connect(hub.url, max_size=None) as ws:
        messages: list[str] = [
            '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}',
            '{"jsonrpc":"2.0","id":2,"method":"session/list","params":{}}',
            '{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/tmp"}}',
            '{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":99}}',
            '{"jsonrpc":"2.0","id":4,"method":"session/list","params":{}}',
        ]
        for text in messages:
            await ws.send(text)
        answers: dict[int, dict[str, Any]] = {}
        order: list[int] = []
        with anyio.fail_after(20):
            while len(answers) < 4:
                message = orjson.loads(await ws.recv())
                if "id" in message and "method" not in message:
                    answers[message["id"]] = message
                    order.append(message["id"])
        assert all("result" in a for a in answers.values()), answers
        # initialize first; then the others as if the client had waited for it (session/new
        # waits for the agent, and the listing after it is answered at once).
        assert order[:2] == [1, 2]
        assert answers[3]["result"]["sessionId"]
        assert "sessions" in answers[4]["result"]


async def test_initialize_twice_in_a_row_is_answered_in_order() -> None:
    async with running_hub([scripted_agent()]) as hub, connect(hub.url, max_size=None) as ws:
        init = '{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":2}}'
        await ws.send(init % 1)
        await ws.send(init % 2)
        first, second = orjson.loads(await ws.recv()), orjson.loads(await ws.recv())
        assert first["id"] == 1
        assert first["result"]["protocolVersion"] == 2
        assert second["id"] == 2
        assert second["error"]["code"] == -32600


async def test_client_mistakes_get_concise_rate_limited_log_lines_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every method with a value of every type in place of each parameter it reads (and a
    few malformed messages): answered, never ``-32603``, no traceback, few log lines. (No
    request rate: the test sends far more requests than a burst.)"""
    settings = Settings(request_rate=0)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        caplog.set_level(logging.INFO, logger="hub")
        connection_id = owner.init_result["_meta"]["acp-hub"]["connectionId"]
        methods = sorted((set(SYNC_METHODS) | set(ASYNC_METHODS)) - {"initialize"})
        sent = 0
        for method in methods:
            for name in PARAM_NAMES:
                for value in HOSTILE_VALUES:
                    request_id = await owner.start(method, {name: value})
                    sent += 1
                    error = (await owner.response(request_id)).get("error") or {}
                    assert error.get("code") != -32603, (method, name, value, error)
        malformed = ("{", "[]", "[1]", '{"jsonrpc":"2.0","id":[1],"method":"x"}', '"text"', "null")
        for raw in malformed * 20:
            await owner.ws.send(raw)
            sent += 1
        await owner.notify("session/cancel", {"sessionId": ["s"]})
        await owner.notify("_hub/nothing", {})
        await owner.answer(12345, {"outcome": "nope"})
        # Still serving, nothing of ours broke, and the log did not grow with the mistakes.
        assert (await owner.call("session/list", {}))["sessions"] == []
        assert owner.close_code is None
        assert tracebacks(caplog) == []
        # Lines about what went wrong ("! ..."), not about what the client did ("= ...").
        lines = [r for r in caplog.records if r.getMessage().startswith(f"! {connection_id}")]
        assert sent > 1000
        assert BURST <= len(lines) <= BURST + 1, [r.getMessage() for r in lines]
