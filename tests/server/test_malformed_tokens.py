"""A token of a malformed shape (an ``iss`` that is an array or an object, say), unsigned,
at every door of a real hub: ``/auth/whoami``, ``POST /acp`` and the WebSocket upgrade answer
401 with a reason and one log line, never a 500 with a traceback; and a valid ``?token=``
beside such a header is tried and admits."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.credentials import bearer, owner_token
from tests.server.harness import running_hub, scripted_agent

pytestmark = pytest.mark.anyio
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}}


def unsigned(claims: dict[str, Any]) -> str:
    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"aud": "acp-hub", "sub": "x", "exp": now + 60, **claims}
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(body)}.c2lnbmF0dXJl"


@pytest.mark.parametrize("iss", [["acp-hub"], {"acp-hub": True}])
async def test_a_malformed_issuer_is_a_401_at_every_door(
    iss: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bad = unsigned({"iss": iss})
    caplog.set_level(logging.INFO)
    async with running_hub([scripted_agent()]) as hub, httpx.AsyncClient() as http:
        whoami = await http.get(hub.http + "/auth/whoami", headers=bearer(bad))
        assert whoami.status_code == 401
        assert whoami.json()["error"] == "invalid_claims"
        post = await http.post(hub.http + "/acp", json=INIT, headers=bearer(bad))
        assert post.status_code == 401
        assert post.json()["error"] == "invalid_claims"
        with pytest.raises(InvalidStatus) as info:
            async with connect(hub.bare_url, additional_headers=bearer(bad)):
                pass
        assert info.value.response.status_code == 401
        assert json.loads(info.value.response.body or b"{}")["error"] == "invalid_claims"
        # The header's refusal does not stop the hub from trying the link's ?token=.
        async with connect(hub.url_with(owner_token()), additional_headers=bearer(bad)) as ws:
            await ws.send(json.dumps(INIT))
            answer = json.loads(await ws.recv())
        assert answer["result"]["_meta"]["acp-hub"]["principal"] == "test-owner"
        post = await http.post(
            hub.http + "/acp", params={"token": owner_token()}, json=INIT, headers=bearer(bad)
        )
        assert post.status_code == 200
        await http.delete(
            hub.http + "/acp",
            params={"token": owner_token()},
            headers={"Acp-Connection-Id": post.headers["acp-connection-id"]},
        )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info]
    assert bad not in caplog.text
