"""Access at the door of a real hub: credentials, hosts and origins are decided before the
WebSocket upgrade (HTTP 401/403/421 with a reason), and the hub keeps serving afterwards.

Real uvicorn on a loopback port, real ``websockets`` clients, raw TCP for the requests a
client library would not send (a foreign ``Host``), and the ``acp-hub`` console script in a
subprocess for the command line and for the log output.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import jwt
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

from hub.access.tokens import TokenAuthority
from hub.settings import Settings
from tests.credentials import TEST_KEY, TEST_SECRET, bearer, hub_env, owner_token, token
from tests.hubproc import BANNER
from tests.server.harness import HubHandle, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio
ACP_HUB = Path(sys.executable).parent / "acp-hub"
INIT = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":2}}'


async def refused(url: str, **options: Any) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of an upgrade the hub refuses."""
    with pytest.raises(InvalidStatus) as info:
        async with connect(url, **options):
            pass
    response = info.value.response
    return response.status_code, json.loads(response.body or b"{}")


async def initialized(url: str, **options: Any) -> dict[str, Any]:
    async with connect(url, **options) as ws:
        await ws.send(INIT)
        result: dict[str, Any] = json.loads(await ws.recv())["result"]
        return result


def hub_token(claims: dict[str, Any], *, secret: str = TEST_SECRET, **headers: Any) -> str:
    now = int(time.time())
    body = {"iss": "acp-hub", "aud": "acp-hub", "sub": "x", "iat": now, "exp": now + 60, **claims}
    return jwt.encode(body, secret, "HS256", headers={"kid": TEST_KEY.kid, **headers})


async def raw_request(hub: HubHandle, host: str, *, upgrade: bool) -> str:
    """The status line the hub answers to a request with ``Host: host``."""
    port = int(hub.http.rsplit(":", 1)[1])
    lines = [f"GET {'/acp' if upgrade else '/'} HTTP/1.1", f"Host: {host}"]
    if upgrade:
        lines += [
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13",
            f"Authorization: Bearer {owner_token()}",
        ]
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        with anyio.fail_after(10):
            while b"\r\n" not in data:
                data += await stream.receive()
    return data.split(b"\r\n", 1)[0].decode()


async def test_bad_credentials_are_refused_before_the_upgrade(
    caplog: pytest.LogCaptureFixture,
) -> None:
    expired = hub_token({"exp": int(time.time()) - 3600})
    cases = {
        "missing": None,
        "garbage": "garbage",
        "forged": hub_token({"role": "owner"}, secret="x" * 40),
        "expired": expired,
        "not yet valid": hub_token({"nbf": int(time.time()) + 3600}),
        "wrong audience": hub_token({"aud": "someone-else"}),
        "wrong issuer": hub_token({"iss": "https://evil.example"}),
        "unknown kid": hub_token({}, kid="another-key"),
        # alg "none": unsigned, which PyJWT will not even produce.
        "alg none": "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4IiwiaXNzIjoiYWNwLWh1YiJ9.",
    }
    expected = {
        "missing": "missing",
        "garbage": "malformed",
        "forged": "bad_signature",
        "expired": "expired",
        "not yet valid": "not_yet_valid",
        "wrong audience": "wrong_audience",
        "wrong issuer": "unknown_issuer",
        "unknown kid": "unknown_key",
        "alg none": "algorithm",
    }
    caplog.set_level(logging.INFO)
    async with running_hub([scripted_agent()]) as hub:
        seen = {}
        for name, value in cases.items():
            url = hub.bare_url if value is None else hub.url_with(value)
            status, body = await refused(url)
            assert status == 401, name
            seen[name] = body["error"]
            # The same credential in a header or a subprotocol entry is refused alike.
            if value is not None:
                assert (await refused(hub.bare_url, additional_headers=bearer(value)))[0] == 401
                protocols = ["acp", f"acp-hub.token.{value}"] if "." in value else ["acp"]
                assert (await refused(hub.bare_url, subprotocols=protocols))[0] == 401
        assert seen == expected
        # Nothing crashed: the hub still admits a good client.
        assert (await initialized(hub.url))["protocolVersion"] == 2
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert expired not in caplog.text


async def test_every_carrier_admits_and_the_token_entry_is_never_echoed() -> None:
    async with running_hub([scripted_agent()]) as hub:
        viewer = token("viewer", sub="vera", name="Vera")
        by_header = await initialized(hub.bare_url, additional_headers=bearer(viewer))
        assert by_header["_meta"]["acp-hub"]["principal"] == "vera"
        assert by_header["_meta"]["acp-hub"]["role"] == "viewer"
        async with connect(
            hub.bare_url,
            subprotocols=[Subprotocol("acp"), Subprotocol(f"acp-hub.token.{viewer}")],
        ) as ws:
            assert ws.subprotocol == "acp"
            assert ws.response is not None
            assert viewer not in str(ws.response.headers)
        by_query = await initialized(hub.url_with(viewer))
        assert by_query["_meta"]["acp-hub"]["role"] == "viewer"


async def test_the_token_role_is_a_ceiling() -> None:
    async with running_hub([scripted_agent()]) as hub:
        async with acp_client(hub.url_with(token("viewer")), role="owner") as viewer:
            assert viewer.init_result["_meta"]["acp-hub"]["role"] == "viewer"
        async with acp_client(hub.url, role="driver") as owner:
            assert owner.init_result["_meta"]["acp-hub"]["role"] == "driver"


async def test_dns_rebinding_and_foreign_origins_are_refused() -> None:
    async with running_hub([scripted_agent()]) as hub:
        assert " 421 " in await raw_request(hub, "attacker.example", upgrade=False)
        assert " 421 " in await raw_request(hub, "attacker.example:80", upgrade=True)
        assert " 200 " in await raw_request(hub, hub.http.split("//")[1], upgrade=False)
        for origin in ("https://evil.example", "null"):
            status, body = await refused(hub.url, origin=origin)
            assert (status, body["error"]) == (403, "origin")
        own = hub.http.replace("127.0.0.1", "127.0.0.1")
        assert (await initialized(hub.url, origin=own))["protocolVersion"] == 2


async def test_configured_hosts_and_allowed_origins() -> None:
    settings = Settings(allowed_hosts=("hub.test",), allowed_origins=("https://app.test",))
    async with running_hub([scripted_agent()], settings) as hub:
        assert " 421 " in await raw_request(hub, "127.0.0.1", upgrade=False)
        assert " 200 " in await raw_request(hub, "hub.test:8765", upgrade=False)
        assert " 101 " in await raw_request(hub, "hub.test", upgrade=True)


async def test_whoami_tells_a_page_who_it_is_or_why_not() -> None:
    import httpx

    async with running_hub([scripted_agent()]) as hub, httpx.AsyncClient() as http:
        ok = await http.get(f"{hub.http}/auth/whoami", headers=bearer(token("approver")))
        assert ok.status_code == 200
        assert (ok.json()["role"], ok.json()["principal"]) == ("approver", "test-approver")
        expired = hub_token({"exp": int(time.time()) - 3600})
        late = await http.get(f"{hub.http}/auth/whoami", headers=bearer(expired))
        assert (late.status_code, late.json()["error"]) == (401, "expired")
        none = await http.get(f"{hub.http}/auth/whoami")
        assert (none.status_code, none.json()["error"]) == (401, "missing")


async def test_auth_none_serves_loopback_without_credentials() -> None:
    async with running_hub([scripted_agent()], Settings(auth="none")) as hub:
        result = await initialized(hub.bare_url)
        assert result["_meta"]["acp-hub"]["principal"] == "local"


# -- the command line ------------------------------------------------------------------------


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ACP_HUB_CONFIG"}
    return {**env, "HOME": str(tmp_path), **hub_env(tmp_path / "state")}


def test_the_token_command_mints_offline(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(ACP_HUB), "token", "--role", "viewer", "--session", "s-1", "--expires", "2h"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    principal = TokenAuthority(TEST_KEY).verify(done.stdout.strip())
    assert principal.role == "viewer"
    assert principal.sessions == frozenset({"s-1"})
    assert principal.agents == frozenset()
    assert principal.expires_at is not None
    assert 7000 < principal.expires_at - time.time() <= 7200
    link = subprocess.run(
        [str(ACP_HUB), "token", "--session", "s-1", "--url", "http://hub.test:8765"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert re.fullmatch(r"http://hub\.test:8765/s/s-1#token=[\w.-]+\n", link.stdout)


def test_serve_refuses_auth_none_and_unnamed_hosts_off_loopback(tmp_path: Path) -> None:
    for args, message in (
        (["--host", "0.0.0.0", "--auth", "none"], 'auth = "none" is only allowed'),
        (["--host", "0.0.0.0"], "allowed_hosts is required"),
    ):
        done = subprocess.run(
            [str(ACP_HUB), "serve", *args, "--agent", "x=true"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2
        assert message in done.stderr


async def test_tokens_never_appear_in_the_log(tmp_path: Path) -> None:
    """Every way a token can reach the hub, valid or not, with the debug log and uvicorn's
    access log on: the captured standard error names none of them."""
    config = tmp_path / "hub.toml"
    config.write_text("[hub]\naccess_log = true\n")
    scripted = f"scripted={sys.executable} {scripted_agent().args[0]} --protocol 2"
    log_path = tmp_path / "hub.log"
    with log_path.open("wb") as log_file:
        process = await anyio.open_process(
            [
                str(ACP_HUB),
                "serve",
                "--port",
                "0",
                "--config",
                str(config),
                "--agent",
                scripted,
                "--workspace",
                str(tmp_path),
                "--log-level",
                "debug",
            ],
            env=_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stderr=log_file,
        )
    tokens = [owner_token(), token("viewer", sub="v"), hub_token({"exp": 1}), "opaque-bad-token"]
    try:
        assert process.stdout is not None
        out = b""
        with anyio.fail_after(30):
            while b"owner URL: " not in out or not out.endswith(b"\n"):
                out += await process.stdout.receive()
        text = out.decode()
        owner_url = re.search(r"owner URL: (\S+)", text)
        assert owner_url is not None
        tokens.append(owner_url.group(1).split("#token=", 1)[1])
        banner = BANNER.search(text)
        assert banner is not None, text
        port = int(banner.group(3))
        # The hub's own owner URL file (one per port), readable by its user only.
        owner_file = tmp_path / "state" / f"owner-url-{port}"
        assert stat.S_IMODE(owner_file.stat().st_mode) == 0o600
        assert owner_file.read_text().strip() == owner_url.group(1)
        base = f"ws://127.0.0.1:{port}/acp"
        import httpx

        async with httpx.AsyncClient() as http:
            for value in tokens:
                await http.get(f"http://127.0.0.1:{port}/?token={value}")
                await http.get(f"http://127.0.0.1:{port}/auth/whoami", headers=bearer(value))
        for value in tokens:
            for options in (
                {"additional_headers": bearer(value)},
                {"subprotocols": ["acp", f"acp-hub.token.{value}"]},
                {},
            ):
                url = base if options else f"{base}?token={value}"
                try:
                    async with connect(url, **options) as ws:
                        await ws.send(INIT)
                        await ws.recv()
                except InvalidStatus:
                    pass
    finally:
        process.terminate()
        with anyio.fail_after(30):
            await process.wait()
        await process.aclose()
    log = log_path.read_text()
    assert "[redacted]" in log  # the access log and uvicorn's WebSocket lines were there
    assert "refused /acp" in log
    for value in tokens:
        assert value not in log
    assert "eyJ" not in log
    assert not owner_file.exists()  # removed at the clean shutdown
