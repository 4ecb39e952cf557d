"""``_hub/audit/list`` on a real hub: the audit trail read back, by owners of the whole hub
only; and a share link's uses counted over the Streamable HTTP profile as over WebSocket."""

from __future__ import annotations

import httpx
import orjson
import pytest

from tests.credentials import token
from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.http_client import http_acp

pytestmark = pytest.mark.anyio
FORBIDDEN = -32040
INVALID_PARAMS = -32602


async def test_only_an_owner_of_the_whole_hub_reads_the_audit_trail() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        link = await owner.call(
            "_hub/share/create", {"sessionId": sid, "role": "owner", "expiresIn": 600}
        )
        await owner.call("_hub/share/revoke", {"linkId": link["linkId"]})
        kept = await owner.call(
            "_hub/share/create", {"sessionId": sid, "role": "owner", "expiresIn": 600}
        )
        # A viewer, an owner of one session only, and an owner share link are all refused:
        # the trail names every session's principals.
        for credential in (
            token("viewer", sub="vic"),
            token("owner", sub="scoped", sessions=[sid]),
            kept["token"],
        ):
            async with acp_client(hub.url_with(credential)) as other:
                with pytest.raises(RpcFailure) as refused:
                    await other.call("_hub/audit/list", {})
                assert refused.value.code == FORBIDDEN

        page = await owner.call("_hub/audit/list", {"limit": 2})
        assert [e["event"] for e in page["entries"]] == ["share_created", "share_revoked"]
        assert page["entries"][1]["linkId"] == link["linkId"]
        assert page["entries"][1]["principal"] == "test-owner"
        assert page["next"] == page["entries"][-1]["id"]
        rest = await owner.call("_hub/audit/list", {"before": page["next"]})
        assert [e["event"] for e in rest["entries"]] == ["share_created", "session_created"]
        assert rest["next"] is None
        assert all("ts" in e for e in rest["entries"])
        for bad in ({"limit": 0}, {"limit": 501}, {"limit": "9"}, {"before": 7}, {"before": "x"}):
            with pytest.raises(RpcFailure) as refused:
                await owner.call("_hub/audit/list", bad)
            assert refused.value.code == INVALID_PARAMS, bad


async def test_a_share_link_counts_its_uses_over_http() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        link = await owner.call(
            "_hub/share/create",
            {"sessionId": sid, "role": "viewer", "expiresIn": 600, "maxUses": 1},
        )
        url = hub.url_with(link["token"]).replace("ws://", "http://", 1)
        async with http_acp(url) as first:
            # Requests of the connection it opened are not new uses ...
            assert (await first.call("session/list", {}))["sessions"][0]["sessionId"] == sid
            # ... a second connection is one too many.
            async with httpx.AsyncClient() as http:
                response = await http.post(
                    url,
                    content=orjson.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 0,
                            "method": "initialize",
                            "params": {"protocolVersion": 2, "info": {"name": "x", "version": "1"}},
                        }
                    ),
                    headers={"Content-Type": "application/json"},
                )
            assert response.status_code == 401
            assert response.json()["error"] == "used_up"
        listed = await owner.call("_hub/share/list", {"sessionId": sid})
        assert listed["links"][0]["uses"] == 1
