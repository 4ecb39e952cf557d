"""``trusted_proxies``: a client's ``X-Forwarded-For`` is believed only from a configured
proxy (default: none, loopback included), for the address the hub logs and counts under
``max_connections_per_address``. Real hubs: the test harness's and ``acp-hub serve`` in a
subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from hub.settings import Settings
from tests.credentials import hub_env, owner_token
from tests.server.harness import running_hub, scripted_agent

pytestmark = pytest.mark.anyio
ACP_HUB = Path(sys.executable).parent / "acp-hub"


def forwarded(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def second_client_status(url: str) -> int:
    """Hold one client that claims 203.0.113.1 and open another that claims 203.0.113.2:
    the second's upgrade status (101 when admitted)."""
    async with connect(url, additional_headers=forwarded("203.0.113.1")):
        try:
            async with connect(url, additional_headers=forwarded("203.0.113.2")):
                return 101
        except InvalidStatus as refused:
            return refused.response.status_code


async def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted() -> None:
    capped = Settings(max_connections_per_address=1)
    async with running_hub([scripted_agent()], capped) as hub:
        # Both come from 127.0.0.1, whatever they claim: one address, one connection.
        assert await second_client_status(hub.url) == 429
    trusting = capped.merged({"trusted_proxies": ["127.0.0.0/8"]})
    async with running_hub([scripted_agent()], trusting) as hub:
        assert await second_client_status(hub.url) == 101


def test_a_trusted_proxy_must_be_an_address_or_a_network() -> None:
    assert Settings().trusted_proxies == ()
    assert Settings().merged({"trusted_proxies": ["10.0.0.0/8", "::1"]}).trusted_proxies == (
        "10.0.0.0/8",
        "::1",
    )
    with pytest.raises(ValueError, match=r"trusted_proxies: 'proxy\.example'"):
        Settings().merged({"trusted_proxies": ["proxy.example"]})


@asynccontextmanager
async def serving(tmp_path: Path, name: str, *args: str) -> AsyncIterator[tuple[str, Path]]:
    """``acp-hub serve`` on a free port: its ``/acp`` URL (owner token) and its log file."""
    config = tmp_path / "hub.toml"
    config.write_text("[hub]\nmax_connections_per_address = 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env.update({"HOME": str(tmp_path), **hub_env(tmp_path / "state")})
    log_path = tmp_path / f"{name}.log"
    scripted = f"scripted={sys.executable} {scripted_agent().args[0]} --protocol 2"
    with log_path.open("wb") as log_file:
        process = await anyio.open_process(
            [
                *(str(ACP_HUB), "serve", "--port", "0", "--config", str(config)),
                *("--agent", scripted, "--workspace", str(tmp_path), *args),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stderr=log_file,
        )
    # A process of its own whose output the test reads as it comes (not tests/hubproc.py).
    try:
        assert process.stdout is not None
        out = b""
        with anyio.fail_after(30):
            while b"listening on " not in out or not out.endswith(b"\n"):
                out += await process.stdout.receive()
        found = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", out)
        assert found is not None
        yield f"ws://127.0.0.1:{int(found.group(1))}/acp?token={owner_token()}", log_path
    finally:
        process.terminate()
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()


async def test_serve_believes_forwarded_for_only_from_its_trusted_proxies(tmp_path: Path) -> None:
    async with serving(tmp_path, "plain") as (url, log_path):
        assert await second_client_status(url) == 429
    log = log_path.read_text()
    assert "203.0.113." not in log
    assert "refused /acp from 127.0.0.1" in log
    async with serving(tmp_path, "trusting", "--trusted-proxy", "127.0.0.1") as (url, log_path):
        assert await second_client_status(url) == 101
    assert "connected from 203.0.113.1" in log_path.read_text()
