"""Which error a refused request gets, and what the log says (``hub.protocol.errors``).

The peer's mistakes are ``-32602`` with one concise log line; a well-formed request the
other side's protocol version cannot express is ``-32048`` with one line; neither leaves a
traceback (a traceback in the log means the hub's own bug, answered ``-32603``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hub.protocol.errors import INVALID_PARAMS, UNSUPPORTED
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
