"""The MCP server policy over a real hub: ``owner`` is the hub's own owners (its signed owner
tokens), ``any`` every client that may start a session (an external issuer's owners too); and
under ``mcp_commands`` an entry's arguments and environment are checked, not only its
command."""

from __future__ import annotations

import time

import jwt
import pytest

from hub.settings import Settings
from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio
FORBIDDEN = -32040
SHOP_SECRET = "the shop's own secret, also 32 bytes or more"
SHOP = {"shop": {"issuer": "https://shop.example", "secret": SHOP_SECRET, "max_role": "owner"}}
SERVER: dict[str, object] = {"type": "stdio", "name": "t", "command": "true", "args": [], "env": []}


def shop_owner() -> str:
    now = int(time.time())
    claims = {
        "iss": "https://shop.example",
        "aud": "acp-hub",
        "sub": "carol",
        "role": "owner",
        "agents": "*",
        "exp": now + 600,
    }
    return jwt.encode(claims, SHOP_SECRET, "HS256")


async def new_session_code(url: str, server: dict[str, object]) -> int:
    """0 when ``session/new`` with ``server`` succeeds, else its error code."""
    async with acp_client(url) as client:
        try:
            await client.call("session/new", {"cwd": "/tmp", "mcpServers": [server]})
        except RpcFailure as failure:
            return failure.code
        return 0


@pytest.mark.parametrize(("policy", "external"), [("owner", FORBIDDEN), ("any", 0)])
async def test_owner_means_the_hubs_own_owners_and_any_everyone_who_may_start(
    policy: str, external: int
) -> None:
    settings = Settings(mcp_servers=policy, issuers=SHOP)  # type: ignore[arg-type]
    async with running_hub([scripted_agent()], settings) as hub:
        assert await new_session_code(hub.url, SERVER) == 0  # the hub's owner token
        assert await new_session_code(hub.url_with(shop_owner()), SERVER) == external
        # Without MCP servers the external owner starts sessions under either policy.
        async with acp_client(hub.url_with(shop_owner())) as carol:
            assert await carol.new_session()


async def test_mcp_commands_check_arguments_and_environment() -> None:
    settings = Settings(mcp_commands=("true", "sh -c 'exit 0'"))
    async with running_hub([scripted_agent()], settings) as hub:
        assert await new_session_code(hub.url, SERVER) == 0
        preload = {**SERVER, "env": [{"name": "LD_PRELOAD", "value": "/tmp/evil.so"}]}
        assert await new_session_code(hub.url, preload) == FORBIDDEN
        node = {**SERVER, "env": [{"name": "NODE_OPTIONS", "value": "--require /tmp/x"}]}
        assert await new_session_code(hub.url, node) == FORBIDDEN
        pinned = {**SERVER, "command": "sh", "args": ["-c", "exit 0"]}
        assert await new_session_code(hub.url, pinned) == 0
        other = {**SERVER, "command": "sh", "args": ["-c", "id > /tmp/owned"]}
        assert await new_session_code(hub.url, other) == FORBIDDEN
