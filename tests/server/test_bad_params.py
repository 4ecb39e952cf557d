"""Params of the wrong shape get ``-32602`` over a real socket, never ``-32603`` (regressions
found by the wire fuzzer, tests/server/test_fuzz_wire.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent


@pytest.mark.parametrize(
    "servers",
    [[[{"name": "x"}]], [{"name": "x", "command": "c"}], {"a": 1}, 1.5, [{"type": "sse"}]],
)
async def test_malformed_mcp_servers_are_invalid_params(servers: Any) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as client:
        with pytest.raises(RpcFailure) as caught:
            await client.call("session/new", {"cwd": "/tmp", "mcpServers": servers})
        assert caught.value.code == -32602
        # The connection and the hub go on.
        assert await client.new_session()


@pytest.mark.parametrize(
    "params",
    [
        {"configId": "mode", "value": {}},
        {"configId": "mode", "value": [{}]},
        {"configId": "mode", "value": 1},
        {"configId": "mode", "value": "code", "type": "boolean"},
        {"configId": "mode", "value": True, "type": {"a": 1}},
    ],
)
async def test_config_values_of_the_wrong_type_are_invalid_params(params: dict[str, Any]) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as client:
        session_id = await client.new_session()
        with pytest.raises(RpcFailure) as caught:
            await client.call("session/set_config_option", {"sessionId": session_id, **params})
        assert caught.value.code == -32602
