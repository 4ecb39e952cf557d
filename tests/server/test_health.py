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
from tests.server.harness import running_hub, scripted_agent

pytestmark = pytest.mark.anyio


def _get(url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, orjson.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, orjson.loads(error.read())


async def test_a_running_hub_is_alive_and_ready() -> None:
    async with running_hub([scripted_agent()]) as hub:
        status, health = await anyio.to_thread.run_sync(_get, hub.http + "/healthz")
        assert status == 200
        assert health["status"] == "ok"
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
