"""``/healthz`` (liveness) and ``/readyz`` (readiness) over real HTTP, and before the start."""

from __future__ import annotations

import urllib.error
import urllib.request

import anyio
import orjson
import pytest
from starlette.requests import Request

from hub.server.app import create_app
from hub.settings import Settings
from tests.server.harness import acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


def _get(url: str | urllib.request.Request) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, orjson.loads(error.read())


async def test_a_running_hub_is_alive_and_ready() -> None:
    async with running_hub([scripted_agent()]) as hub:
        status, health = await anyio.to_thread.run_sync(_get, hub.http + "/healthz")
        assert (status, health) == (200, {"status": "ok"})
        status, ready = await anyio.to_thread.run_sync(_get, hub.http + "/readyz")
        checks = {"agents": True, "logins": True, "sessions": True, "store": True}
        assert (status, ready) == (200, {"status": "ready", "checks": checks})


async def test_a_hub_that_has_not_started_is_not_ready() -> None:
    _, hub = create_app(Settings(), {"a": scripted_agent("a")})
    request = Request({"type": "http", "method": "GET", "path": "/readyz", "headers": []})
    response = await hub.readiness(request)
    assert response.status_code == 503
    body = orjson.loads(bytes(response.body))
    assert body["status"] == "unavailable"
    assert body["checks"] == {"agents": False, "logins": False, "sessions": False, "store": False}


async def test_the_probes_tell_a_foreign_host_nothing_but_their_status() -> None:
    # /healthz and /readyz answer under any Host (probes address a node by its IP), so a
    # DNS-rebinding page could read them: they carry no counts and no version.
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as client:
        await client.new_session()
        for path in ("/healthz", "/readyz"):
            request = urllib.request.Request(hub.http + path, headers={"Host": "attacker.example"})
            status, body = await anyio.to_thread.run_sync(_get, request)
            assert status == 200, path
            assert set(body) <= {"status", "checks"}, body
            checks = body.get("checks", {})
            assert isinstance(checks, dict)
            assert all(isinstance(v, bool) for v in checks.values())
