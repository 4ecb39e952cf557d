"""MCP server entries across versions."""

from __future__ import annotations

import pytest

from hub.protocol.errors import InvalidParams, TranslationError
from hub.protocol.mcp_servers import mcp_servers_v1_to_v2, mcp_servers_v2_to_v1
from tests.protocol.translation import (
    Json,
    Schema,
)


def test_mcp_servers_v2_to_v1(v1: Schema, v2: Schema) -> None:
    servers: list[Json] = [
        {"type": "stdio", "name": "fs", "command": "/bin/fs"},
        {
            "type": "stdio",
            "name": "git",
            "command": "/bin/git",
            "args": ["-v"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": "https://x/mcp"},
    ]
    for server in servers:
        v2.check("McpServer", server)
    out = mcp_servers_v2_to_v1(servers)
    for server in out:
        v1.check("McpServer", server)
    assert out == [
        {"name": "fs", "command": "/bin/fs", "args": [], "env": []},
        {
            "name": "git",
            "command": "/bin/git",
            "args": ["-v"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": "https://x/mcp", "headers": []},
    ]
    assert mcp_servers_v1_to_v2(out) == [
        {"type": "stdio", "name": "fs", "command": "/bin/fs", "args": [], "env": []},
        servers[1],
        {**servers[2], "headers": []},
    ]
    assert mcp_servers_v2_to_v1(None) == []
    with pytest.raises(TranslationError):
        mcp_servers_v2_to_v1(servers[2:], http=False)
    with pytest.raises(TranslationError):
        mcp_servers_v2_to_v1([{"type": "_acme_ws", "name": "w"}])
    with pytest.raises(InvalidParams):
        mcp_servers_v2_to_v1([{"type": "stdio", "name": "x"}])


def test_mcp_servers_v1_to_v2(v1: Schema, v2: Schema) -> None:
    servers: list[Json] = [
        {"name": "fs", "command": "/bin/fs", "args": [], "env": []},
        {
            "type": "http",
            "name": "web",
            "url": "https://x",
            "headers": [{"name": "A", "value": "b"}],
        },
    ]
    for server in servers:
        v1.check("McpServer", server)
    out = mcp_servers_v1_to_v2(servers)
    for server in out:
        v2.check("McpServer", server)
    assert mcp_servers_v2_to_v1(out) == servers  # lossless both ways
    assert mcp_servers_v1_to_v2(None) == []
    with pytest.raises(TranslationError):
        mcp_servers_v1_to_v2([{"type": "sse", "name": "s", "url": "https://x", "headers": []}])
    with pytest.raises(InvalidParams):
        mcp_servers_v1_to_v2([{"type": "ws", "name": "s"}])
    with pytest.raises(InvalidParams):
        mcp_servers_v1_to_v2([{"name": "s"}])
