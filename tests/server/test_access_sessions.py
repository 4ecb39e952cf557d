"""Roles, scopes and share links from credentials, end to end on a real hub: what a token
lets its holder see and do, links that are created, listed, revoked (closing their live
connections) and refused afterwards, across a hub restart.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin

from hub.settings import Settings
from tests.access.test_qr import encodes
from tests.credentials import AUTHORITY, TEST_SECRET, token
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import (
    FORBIDDEN,
    MUTATING,
    allow,
    last_permission_id,
    permission_requests,
    refusals,
    resume,
)

pytestmark = pytest.mark.anyio
NOT_FOUND = -32002


def presence_left(client: AcpClient, sid: str) -> list[dict[str, Any]]:
    """Every leave presence reported, alone or among coalesced changes."""
    left = []
    for params in client.session_updates(sid):
        update = params["update"]
        if update.get("sessionUpdate") != "_hub_presence":
            continue
        left += [c for c in [update, *update.get("changes", [])] if c.get("left")]
    return left


def presence_count(client: AcpClient, sid: str) -> int:
    counts = [
        p["update"]["count"]
        for p in client.session_updates(sid)
        if p["update"].get("sessionUpdate") == "_hub_presence"
    ]
    return counts[-1] if counts else 0


@pytest.mark.parametrize("viewer_version", [1, 2])
async def test_a_viewer_token_cannot_do_more_than_watch(viewer_version: int) -> None:
    async with running_hub([scripted_agent()]) as hub:
        viewer_url = hub.url_with(token("viewer", sub="vic"))
        async with (
            acp_client(hub.url) as owner,
            acp_client(hub.url_with(token("approver", sub="ann")), 1, events=True) as approver,
            acp_client(viewer_url, viewer_version, events=True, role="owner") as viewer,
        ):
            # Asking for more than the token grants gets the token's role.
            assert viewer.init_result["_meta"]["acp-hub"]["role"] == "viewer"
            sid = await owner.new_session()
            await resume(approver, sid)
            await resume(viewer, sid, _meta={"acp-hub": {"role": "owner"}})
            await owner.prompt(sid, "permission")
            await approver.wait_for(lambda: bool(permission_requests(approver)))
            pid = last_permission_id(owner, sid)
            share = [
                ("_hub/share/create", {"role": "viewer", "expiresIn": 60}, "owner"),
                ("_hub/share/list", {}, "owner"),
            ]
            for method, params, needed in [*MUTATING, *share]:
                with pytest.raises(RpcFailure) as info:
                    await viewer.call(method, {"sessionId": sid, **params})
                assert info.value.code == FORBIDDEN, method
                assert info.value.error["data"]["needed"] == needed
            with pytest.raises(RpcFailure) as info:
                await viewer.call("_hub/share/revoke", {"linkId": "l-0000"})
            assert info.value.code == FORBIDDEN
            await viewer.notify("session/cancel", {"sessionId": sid})
            await viewer.wait_for(lambda: bool(refusals(viewer, "_hub/refused")))
            await viewer.send({"jsonrpc": "2.0", "id": 0, "result": allow("allow")})
            await viewer.wait_for(lambda: bool(refusals(viewer)))
            assert not permission_requests(viewer)
            await approver.answer(permission_requests(approver)[-1]["id"], allow("allow"))
            await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
            records = [
                p["update"]
                for p in owner.session_updates(sid)
                if p["update"].get("sessionUpdate") == "_hub_permission"
                and p["update"]["permissionId"] == pid
                and p["update"]["status"] == "resolved"
            ]
            # Who answered comes from the credential.
            assert records[-1]["resolvedBy"]["principal"] == "ann"
            assert records[-1]["resolvedBy"]["role"] == "approver"
        # Reconnecting without the token is no way around it.
        with pytest.raises(InvalidStatus) as refused:
            async with connect(hub.bare_url):
                pass
        assert refused.value.response.status_code == 401


async def test_a_scoped_token_sees_and_attaches_to_its_sessions_only() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        mine = await owner.new_session()
        other = await owner.new_session()
        scoped = token("driver", sub="sam", sessions=[mine])
        async with acp_client(hub.url_with(scoped)) as sam:
            listed = await sam.call("session/list", {})
            assert [s["sessionId"] for s in listed["sessions"]] == [mine]
            await resume(sam, mine)
            for method in ("session/resume", "session/load", "session/attach", "session/prompt"):
                with pytest.raises(RpcFailure) as info:
                    await sam.call(
                        method,
                        {
                            "sessionId": other,
                            "cwd": "/tmp",
                            "prompt": [{"type": "text", "text": "hi"}],
                            "historyPolicy": {"type": "full"},
                        },
                    )
                # Indistinguishable from a session that does not exist.
                assert info.value.code == NOT_FOUND, method
            # Its presence record names the principal of the credential.
            await owner.call("session/resume", {"sessionId": mine, "cwd": "/tmp"})
            await owner.wait_for(
                lambda: any(
                    r.get("principal") == "sam"
                    for p in owner.session_updates(mine)
                    if p["update"].get("sessionUpdate") == "_hub_presence"
                    for r in p["update"].get("added", [])
                )
            )


async def test_the_agents_claim_decides_who_starts_sessions() -> None:
    async with running_hub([scripted_agent("a"), scripted_agent("b")]) as hub:
        async with acp_client(hub.url_with(token("owner", sub="no-agents", agents=[]))) as none:
            with pytest.raises(RpcFailure) as info:
                await none.new_session()
            assert info.value.code == FORBIDDEN
        async with acp_client(hub.url_with(token("owner", sub="only-b", agents=["b"]))) as only_b:
            with pytest.raises(RpcFailure):
                await only_b.new_session("a")
            with pytest.raises(RpcFailure):
                await only_b.new_session()  # the default agent is a
            assert (await only_b.new_session("b")).startswith("s-")


async def test_revoking_a_link_closes_its_connections_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    # One state directory for both hub processes: links and revocations must survive.
    settings = Settings(state_dir=str(tmp_path), secret_file=str(tmp_path / "secret"))
    (tmp_path / "secret").write_text(TEST_SECRET)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        created = await owner.call(
            "_hub/share/create",
            {"sessionId": sid, "role": "viewer", "expiresIn": 600, "label": "for bob"},
        )
        kept = await owner.call(
            "_hub/share/create", {"sessionId": sid, "role": "approver", "expiresIn": 600}
        )
        assert created["url"].endswith(f"/s/{sid}#token={created['token']}")
        # Beside the link, its QR code: an SVG that draws exactly that URL.
        assert created["qrSvg"].startswith("<svg ")
        assert encodes(created["qrSvg"], created["url"])
        link_url = hub.url_with(created["token"])
        async with acp_client(link_url) as bob, acp_client(link_url) as bob_phone:
            assert bob.init_result["_meta"]["acp-hub"]["role"] == "viewer"
            assert bob.init_result["_meta"]["acp-hub"]["principal"] == f"link:{created['linkId']}"
            await resume(bob, sid)
            await resume(bob_phone, sid)
            # Presence coalesces: the joins are seen before the leaves they would cancel out.
            await owner.wait_for(lambda: presence_count(owner, sid) == 3)
            # The people who came by the link are shown by its label, their program aside.
            clients = owner.fold(sid).snapshot()["hub"]["_hub_presence"]["clients"]
            by_link = [c for c in clients if c["principal"] == f"link:{created['linkId']}"]
            assert [(c["name"], c["program"]) for c in by_link] == [("for bob", "test-client")] * 2
            listed = await owner.call("_hub/share/list", {"sessionId": sid})
            assert {x["linkId"] for x in listed["links"]} == {created["linkId"], kept["linkId"]}
            # Both connections are closed while the revocation is handled, before its answer
            # (the hub's side of "within a second"); the clients see 1008 soon after.
            revoked = await owner.call("_hub/share/revoke", {"linkId": created["linkId"]})
            assert revoked == {"linkId": created["linkId"], "revoked": True, "closed": 2}
            await bob.wait_for(lambda: bob.close_code is not None, timeout=5)
            await bob_phone.wait_for(lambda: bob_phone.close_code is not None, timeout=5)
            assert (bob.close_code, bob_phone.close_code) == (1008, 1008)
            await owner.wait_for(
                lambda: any(u.get("reason") == "revoked" for u in presence_left(owner, sid))
            )
        with pytest.raises(InvalidStatus) as refused:
            async with connect(link_url):
                pass
        assert json.loads(refused.value.response.body)["error"] == "revoked"
        audit = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert {"share_created", "share_revoked", "session_created"} <= {e["event"] for e in audit}
    # A new hub process on the same state directory: the revocation holds, the other link works.
    async with running_hub([scripted_agent()], settings) as again:
        with pytest.raises(InvalidStatus):
            async with connect(again.url_with(created["token"])):
                pass
        async with acp_client(again.url_with(kept["token"])) as carol:
            assert carol.init_result["_meta"]["acp-hub"]["role"] == "approver"


async def test_bad_share_requests_and_an_expired_link_are_refused() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        for params in (
            {"role": "god", "expiresIn": 60},
            {"role": "viewer", "expiresIn": -5},
            {"role": "viewer", "expiresIn": 10**9},
            {"role": "viewer", "expiresIn": "soon"},
            {"role": "viewer", "expiresIn": 60, "maxUses": 0},
            {"role": "viewer", "expiresIn": 60, "label": "x" * 200},
        ):
            with pytest.raises(RpcFailure) as info:
                await owner.call("_hub/share/create", {"sessionId": sid, **params})
            assert info.value.code == -32602, params
        with pytest.raises(RpcFailure) as info:
            await owner.call("_hub/share/revoke", {"linkId": "l-unknown"})
        assert info.value.code == NOT_FOUND
        # A link whose token expired an hour ago (minted for a known link record).
        created = await owner.call(
            "_hub/share/create", {"sessionId": sid, "role": "viewer", "expiresIn": 60}
        )
        stale = AUTHORITY.mint(
            sub=f"link:{created['linkId']}",
            role="viewer",
            ttl=60,
            sessions=[sid],
            link_id=created["linkId"],
            now=time.time() - 3600,
        )
        with pytest.raises(InvalidStatus) as refused:
            async with connect(hub.url_with(stale)):
                pass
        assert json.loads(refused.value.response.body)["error"] == "expired"


async def test_an_embed_origin_gets_exactly_its_tokens_scope() -> None:
    settings = Settings(embed_origins=("https://shop.test",))
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        shown = await owner.new_session()
        await owner.new_session()
        # Without an embed token naming the origin: refused before the upgrade.
        with pytest.raises(InvalidStatus) as refused:
            async with connect(hub.url, origin=Origin("https://shop.test")):
                pass
        assert refused.value.response.status_code == 403
        embed = token("viewer", sub="widget", sessions=[shown], origins=["https://shop.test"])
        async with connect(hub.url_with(embed), origin=Origin("https://shop.test")) as ws:
            client = AcpClient(ws)
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.reader)
                meta = (await client.initialize(role="owner"))["_meta"]["acp-hub"]
                assert (meta["role"], meta["sessionScope"]) == ("viewer", [shown])
                listed = await client.call("session/list", {})
                assert [s["sessionId"] for s in listed["sessions"]] == [shown]
                await resume(client, shown)
                with pytest.raises(RpcFailure) as info:
                    await client.prompt(shown, "hello")
                assert info.value.code == FORBIDDEN
                await ws.close()
                tg.cancel_scope.cancel()
