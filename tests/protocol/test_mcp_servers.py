"""MCP server entries across versions."""

from __future__ import annotations

import pytest

from hub.protocol.errors import InvalidParams, TranslationError
from hub.protocol.mcp_servers import (
    check_mcp_servers_v2,
    mcp_servers_v1_to_v2,
    mcp_servers_v2_to_v1,
)
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


def test_a_v2_clients_mcp_servers_are_checked(v2: Schema) -> None:
    # The servers of the first test, for the other direction of the translation.
    good: list[Json] = [
        {"type": "stdio", "name": "fs", "command": "/bin/fs"},
        {
            "type": "stdio",
            "name": "git",
            "command": "/bin/git",
            "args": ["-v"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": "https://x/mcp", "headers": []},
        {"type": "http", "name": "w", "url": "https://x", "headers": [{"name": "a", "value": "b"}]},
    ]
    for server in good:
        v2.check("McpServer", server)
    assert check_mcp_servers_v2(good) == good
    assert check_mcp_servers_v2(None) == []


@pytest.mark.parametrize(
    "servers",
    [
        {"a": 1},
        1.5,
        [[{"name": "x"}]],
        [{"name": "x", "command": "c"}],  # v2 entries are tagged
        [{"type": "stdio", "command": "c"}],
        [{"type": "stdio", "name": "x"}],
        [{"type": "stdio", "name": "x", "command": "c", "args": "-v"}],
        [{"type": "stdio", "name": "x", "command": "c", "args": [1]}],
        [{"type": "stdio", "name": "x", "command": "c", "env": [{"name": "A"}]}],
        [{"type": "stdio", "name": "x", "command": "c", "env": {"A": "1"}}],
        [{"type": "http", "name": "x"}],
        [{"type": "http", "name": "x", "url": "u", "headers": [["a", "b"]]}],
        [{"type": "sse", "name": "x", "url": "u"}],
    ],
)
def test_malformed_v2_mcp_servers_are_refused(servers: object) -> None:
    with pytest.raises(InvalidParams):
        check_mcp_servers_v2(servers)


def test_v1_mcp_servers_must_be_an_array() -> None:
    with pytest.raises(InvalidParams):
        mcp_servers_v1_to_v2({"a": 1})  # type: ignore[arg-type]
