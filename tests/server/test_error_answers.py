"""Which error a refused request gets, and what the log says (``hub.protocol.errors``).

The peer's mistakes are ``-32602`` with one concise log line; a well-formed request the
other side's protocol version cannot express is ``-32048`` with one line; neither leaves a
traceback (a traceback in the log means the hub's own bug, answered ``-32603``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub.protocol.errors import INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED
from hub.protocol.jsonrpc import DEFAULT_MAX_BATCH, DEFAULT_MAX_DEPTH
from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]


async def test_refusals_are_answered_by_whose_fault_they_are(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hub")
    sse = {"type": "sse", "name": "s", "url": "http://127.0.0.1:9/", "headers": []}
    unknown = {"type": "_acme", "name": "s"}
    async with (
        running_hub([scripted_agent(protocol=1)]) as hub,
        acp_client(hub.url, version=1) as v1,
        acp_client(hub.url) as v2,
    ):
        for servers, code in (([sse], UNSUPPORTED), ([unknown], INVALID_PARAMS)):
            params: dict[str, Any] = {"cwd": "/tmp", "mcpServers": servers}
            with pytest.raises(RpcFailure) as refused:
                await v1.call("session/new", params)
            assert refused.value.code == code, refused.value.error
        # A v2 prompt with a block a v1 agent cannot take is refused, and the session
        # goes on.
        sid = await v2.new_session()
        chart = {"sessionId": sid, "prompt": [{"type": "_acme_chart", "points": [1]}]}
        with pytest.raises(RpcFailure) as refused:
            await v2.call("session/prompt", chart)
        assert refused.value.code == UNSUPPORTED, refused.value.error
        await v2.prompt(sid, "say fine")
        await v2.wait_for(lambda: v2.idle_count(sid) == 1)
    assert tracebacks(caplog) == []
    lines = [r.getMessage() for r in caplog.records if r.name == "hub.server"]
    assert any("unsupported" in line and "SSE" in line for line in lines), lines
    assert any("invalid params" in line and "_acme" in line for line in lines), lines


def deep_prompt(request_id: int, session_id: str, levels: int) -> str:
    """A ``session/prompt`` frame whose block ``_meta`` nests ``levels`` deep (orjson, which
    the test client uses, writes at most 254 levels: the frame is built as text)."""
    meta = '{"a":' * levels + "1" + "}" * levels
    block = '{"type":"text","text":"say deep","_meta":' + meta + "}"
    return (
        f'{{"jsonrpc":"2.0","id":{request_id},"method":"session/prompt",'
        f'"params":{{"sessionId":"{session_id}","prompt":[{block}]}}}}'
    )


async def test_a_prompt_nested_too_deep_is_refused_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nesting orjson reads (up to 1,024 levels) but cannot write (past 254) once wedged a
    session: the prompt was taken, the turn never ended. It is refused at parse time now."""
    caplog.set_level(logging.INFO, logger="hub")
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url) as driver,
        acp_client(hub.url) as watcher,
    ):
        sid = await driver.new_session()
        await watcher.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        for request_id, levels in ((901, 300), (902, 1_000), (903, DEFAULT_MAX_DEPTH)):
            await driver.ws.send(deep_prompt(request_id, sid, levels))
            with pytest.raises(RpcFailure) as refused:
                await driver.result(request_id)
            assert refused.value.code == INVALID_PARAMS, refused.value.error
            assert f"{DEFAULT_MAX_DEPTH} levels" in refused.value.error["data"]
        # Just under the limit the prompt is taken and its turn ends, nested as it is.
        await driver.ws.send(deep_prompt(904, sid, DEFAULT_MAX_DEPTH - 4))
        await driver.result(904)
        await driver.wait_for(lambda: driver.idle_count(sid) == 1)
        await driver.prompt(sid, "say still here")
        await driver.wait_for(lambda: driver.idle_count(sid) == 2)
        await watcher.wait_for(lambda: watcher.idle_count(sid) == 2)
        seqs = watcher.seqs(sid)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap for the watcher
    assert tracebacks(caplog) == []


async def test_a_batch_past_the_bound_is_refused_whole() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as client:

        def batch(size: int, first: int) -> list[dict[str, Any]]:
            return [
                {"jsonrpc": "2.0", "id": first + i, "method": "session/list"} for i in range(size)
            ]

        await client.send(batch(DEFAULT_MAX_BATCH + 1, 1000))
        await client.wait_for(
            lambda: any(isinstance(f, dict) and "error" in f for f in client.frames)
        )
        (refusal,) = [f for f in client.frames if isinstance(f, dict) and "error" in f]
        assert refusal["id"] is None
        assert refusal["error"]["code"] == INVALID_REQUEST
        assert f"at most {DEFAULT_MAX_BATCH} entries" in refusal["error"]["data"]
        await client.send(batch(DEFAULT_MAX_BATCH, 2000))
        await client.wait_for(lambda: any(isinstance(f, list) for f in client.frames))
        (answers,) = [f for f in client.frames if isinstance(f, list)]
        assert sorted(a["id"] for a in answers) == list(range(2000, 2000 + DEFAULT_MAX_BATCH))
        assert all("result" in a for a in answers)
