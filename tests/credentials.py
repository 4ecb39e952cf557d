"""Credentials for tests: the known secret every test hub signs with, and tokens minted
with the product's own ``TokenAuthority``.

``running_hub`` (tests/server/harness.py) and the hub subprocesses of the web and CLI tests
use ``TEST_SECRET``; their default client credential is ``owner_token()``. A test that
needs another principal mints one with ``token(...)``; one that needs none connects to
``HubHandle.bare_url``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from hub.access.keys import SECRET_ENV, STATE_DIR_ENV, HubKey, key_from_secret
from hub.access.tokens import TokenAuthority
from hub.settings import Role, Settings

TEST_SECRET = "acp-hub test secret: 32 bytes or more, never used for real"
TEST_KEY: HubKey = key_from_secret(TEST_SECRET.encode(), "tests")
AUTHORITY = TokenAuthority(TEST_KEY)


def token(
    role: Role = "owner",
    *,
    sub: str | None = None,
    name: str | None = None,
    sessions: Iterable[str] | None = None,
    agents: Iterable[str] | None = None,
    origins: Iterable[str] = (),
    ttl: float = 3600,
    **_: Any,
) -> str:
    """A hub token for ``role`` (default: every session, every agent, one hour)."""
    sub = sub or f"test-{role}"
    return AUTHORITY.mint(
        sub=sub,
        name=name or sub,
        role=role,
        ttl=ttl,
        sessions=sessions,
        agents=agents,
        origins=origins,
    )


def owner_token() -> str:
    """The default credential of test clients: the owner of everything."""
    return token("owner", sub="test-owner", name="test-owner")


def bearer(value: str) -> dict[str, str]:
    """The ``Authorization`` header carrying ``value``."""
    return {"Authorization": f"Bearer {value}"}


def hub_env(state_dir: Path) -> dict[str, str]:
    """Environment variables that make a hub subprocess sign with ``TEST_SECRET`` and keep
    its state (owner URL, links, audit log) under ``state_dir``."""
    return {SECRET_ENV: TEST_SECRET, STATE_DIR_ENV: str(state_dir)}


def with_test_key(settings: Settings, state_dir: Path) -> Settings:
    """``settings`` signing with ``TEST_SECRET`` and keeping the hub's state (share links,
    audit log) under ``state_dir``, unless they name a state directory already."""
    if settings.state_dir:
        return settings
    secret = state_dir / "secret"
    secret.write_text(TEST_SECRET)
    return settings.merged({"state_dir": str(state_dir), "secret_file": str(secret)})


async def admission(url: str) -> str:
    """``"ok"`` when ``url`` (with its credential) is admitted (the connection is closed
    again), else the refusal's ``error`` (``revoked``, ``expired``, ...)."""
    try:
        async with connect(url):
            return "ok"
    except InvalidStatus as refused:
        return str(json.loads(refused.response.body)["error"])
