"""What a share link and a session-scoped credential may not do, on real hubs (over WebSocket
and the Streamable HTTP profile alike).

A share link is a guest of one session: whatever its role there, it manages no links
(create, list, revoke), reaches no agent (stderr, log in, log out: one agent process serves
every session on it) and starts no session; a token scoped to some sessions neither. An owner
of the whole hub reaches an agent only when its ``agents`` claim names it. Links minted by links
before links stopped minting stay bound to their parent: revoking the parent revokes them
(transitively, in every store, on every node) and a parent revoked or expired refuses them.
A link this node does not know, checked while the store is down, is ``503``, not ``401``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hub.access.gate import Gate
from hub.settings import Settings
from tests.credentials import AUTHORITY, admission, token
from tests.redis_server import RedisServer, store_setting

# The shared harness's names, imported by every test module that uses them.
from tests.server.harness import (
    AcpClient,
    HubHandle,
    RpcFailure,
    acp_client,
    running_hub,
    scripted_agent,
)
from tests.server.http_client import HttpAcp, http_acp

pytestmark = pytest.mark.anyio
FORBIDDEN = -32040
STORE_UNAVAILABLE = -32052
Caller = AcpClient | HttpAcp
WAIT = 10.0

AGENT_METHODS: list[tuple[str, dict[str, Any]]] = [
    ("_hub/agent_stderr", {}),
    ("_hub/agent_stderr", {"agent": "scripted"}),
    ("_hub/agent_login", {"agent": "scripted", "methodId": "scripted-login"}),
    ("_hub/agent_logout", {"agent": "scripted"}),
    ("authenticate", {"methodId": "scripted-login"}),
    ("auth/login", {"methodId": "scripted-login"}),
    ("logout", {}),
    ("auth/logout", {}),
]


PROFILES = ["ws", "http"]


@asynccontextmanager
async def guest_on(profile: str, hub: HubHandle, credential: str) -> AsyncIterator[Caller]:
    """A client admitted with ``credential``, over WebSocket (``ws``) or HTTP (``http``)."""
    url = hub.url_with(credential)
    if profile == "ws":
        async with acp_client(url) as client:
            yield client
    else:
        async with http_acp(url.replace("ws://", "http://", 1)) as http:
            yield http


async def refusal(client: Caller, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(RpcFailure) as refused:
        await client.call(method, params)
    return refused.value.error


async def refusal_code(client: Caller, method: str, params: dict[str, Any]) -> int:
    return int((await refusal(client, method, params))["code"])


async def closed(client: AcpClient) -> None:
    await client.wait_for(lambda: client.close_code is not None, timeout=WAIT)


async def share(owner: AcpClient, sid: str, role: str = "viewer", **params: Any) -> dict[str, Any]:
    link: dict[str, Any] = await owner.call(
        "_hub/share/create", {"sessionId": sid, "role": role, "expiresIn": 600, **params}
    )
    return link


def minted_by_link(gate: Gate, parent: dict[str, Any], *, ttl: float = 600) -> tuple[str, str]:
    """A link record as a link minted it before links stopped minting (``created_by`` names
    the parent link's principal): its id and its token."""
    child, child_token = gate.create_link(
        session_id=parent["sessionId"],
        role="viewer",
        ttl=ttl,
        created_by=f"link:{parent['linkId']}",
    )
    return child.link_id, child_token


@pytest.mark.parametrize("profile", PROFILES)
async def test_an_owner_link_manages_no_links(profile: str) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        other = await share(owner, sid)
        link = await share(owner, sid, "owner", maxUses=2, expiresIn=120)
        async with guest_on(profile, hub, link["token"]) as guest:
            await guest.call("session/resume", {"sessionId": sid, "cwd": "/"})
            # The page opened with the link is not offered the Share dialog's links either.
            assert guest.init_result["_meta"]["acp-hub"]["link"] == link["linkId"]
            calls: list[tuple[str, dict[str, Any]]] = [
                ("_hub/share/create", {"sessionId": sid, "role": "owner", "expiresIn": 2592000}),
                ("_hub/share/create", {"sessionId": sid, "role": "viewer", "expiresIn": 60}),
                ("_hub/share/list", {"sessionId": sid}),
                ("_hub/share/revoke", {"linkId": other["linkId"]}),
            ]
            for method, params in calls:
                error = await refusal(guest, method, params)
                assert (error["code"], error["data"]["scope"]) == (FORBIDDEN, "not_link"), method
            # Still an owner of its session: the link's role holds there.
            await guest.call("_hub/set_policy", {"sessionId": sid, "prompt": "queue"})
        listed = await owner.call("_hub/share/list", {"sessionId": sid})
        assert {x["linkId"] for x in listed["links"]} == {other["linkId"], link["linkId"]}
        assert not any(x["revoked"] for x in listed["links"])


async def test_a_credential_for_one_session_shares_no_more_time_than_it_has() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        scoped = token("owner", sub="ten-minutes", sessions=[sid], ttl=600)
        async with acp_client(hub.url_with(scoped)) as guest:
            link = await share(guest, sid, "driver", expiresIn=2592000)
        assert link["expiresAt"] <= time.time() + 600
        async with httpx.AsyncClient() as http:
            whoami = await http.get(
                f"{hub.http}/auth/whoami", headers={"Authorization": f"Bearer {link['token']}"}
            )
        assert whoami.json()["expiresAt"] <= int(link["expiresAt"]) + 1
        # The owner of the whole hub shares for as long as it asks.
        month = await share(owner, sid, expiresIn=2592000)
        assert month["expiresAt"] >= time.time() + 2592000 - 60


async def test_a_link_of_a_deleted_session_revokes_nothing() -> None:
    """``_hub/share/revoke`` checks the caller's role on the link's session even when this
    node no longer serves it."""
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        link = await share(owner, sid, "owner")
        other = await share(owner, sid)
        async with acp_client(hub.url_with(link["token"])) as guest:
            await owner.call("session/delete", {"sessionId": sid})
            code = await refusal_code(guest, "_hub/share/revoke", {"linkId": other["linkId"]})
            assert code == FORBIDDEN
        viewer_token = token("viewer", sub="vic", sessions=[sid])
        async with acp_client(hub.url_with(viewer_token)) as viewer:
            code = await refusal_code(viewer, "_hub/share/revoke", {"linkId": other["linkId"]})
            assert code == FORBIDDEN
        assert await admission(hub.url_with(other["token"])) == "ok"


@pytest.mark.parametrize("profile", PROFILES)
async def test_session_scoped_credentials_reach_no_agent(profile: str) -> None:
    agent = scripted_agent("scripted", 2, "--require-login")
    async with running_hub([agent]) as hub, acp_client(hub.url) as owner:
        await owner.call("_hub/agent_login", {"agent": "scripted", "methodId": "scripted-login"})
        sid = await owner.new_session()
        link = await share(owner, sid, "owner")
        supervisor = hub.app.supervisor
        assert supervisor is not None
        for credential, lacking in (
            (link["token"], "hub"),
            (token("owner", sub="one-session", sessions=[sid]), "hub"),
            (token("owner", sub="other-agents", agents=["other"]), "agents"),
        ):
            async with guest_on(profile, hub, credential) as guest:
                assert guest.init_result["authMethods"] == []
                for method, params in AGENT_METHODS:
                    error = await refusal(guest, method, params)
                    assert (error["code"], error["data"]["scope"]) == (FORBIDDEN, lacking), method
        # Nothing reached the agent: still logged in with the owner's login.
        assert supervisor.get("scripted").login_status.state == "logged_in"
        # The owner of the whole hub, with the agent in its claim, still reaches it.
        stderr = await owner.call("_hub/agent_stderr", {"agent": "scripted"})
        assert stderr["agent"] == "scripted"
        assert await owner.call("auth/logout", {}) == {}


@pytest.mark.parametrize("profile", PROFILES)
async def test_session_scoped_credentials_read_no_audit_trail(profile: str) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        link = await share(owner, sid, "owner")
        for credential in (link["token"], token("owner", sub="one-session", sessions=[sid])):
            async with guest_on(profile, hub, credential) as guest:
                error = await refusal(guest, "_hub/audit/list", {})
                assert (error["code"], error["data"]["scope"]) == (FORBIDDEN, "hub")
        # The owner of the whole hub reads it, over either profile.
        async with guest_on(profile, hub, token("owner", sub="whole-hub")) as whole:
            entries = (await whole.call("_hub/audit/list", {}))["entries"]
            assert [e["event"] for e in entries][-2:] == ["share_created", "session_created"]


async def test_a_session_scoped_credential_starts_no_session() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        scoped = token("owner", sub="one-session", sessions=[sid])
        async with acp_client(hub.url_with(scoped)) as guest:
            assert "workspaceRoots" not in guest.init_result["_meta"]["acp-hub"]
            assert "workspaceRoots" in owner.init_result["_meta"]["acp-hub"]
            code = await refusal_code(guest, "session/new", {"cwd": "/tmp", "mcpServers": []})
            assert code == FORBIDDEN
            # Its own session it still owns.
            await guest.call("session/resume", {"sessionId": sid, "cwd": "/"})
            await guest.call("_hub/set_policy", {"sessionId": sid, "prompt": "queue"})


@asynccontextmanager
async def hub_on(store: str, tmp_path: Path, name: str) -> AsyncIterator[HubHandle]:
    settings = Settings(store=store, node_name=name)
    async with running_hub([scripted_agent()], settings) as hub:
        yield hub


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
async def test_revoking_a_link_revokes_the_links_it_minted(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = store_setting(kind, tmp_path / "hub.db", request)
    async with hub_on(store, tmp_path, "a") as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        parent = await share(owner, sid, "driver")
        gate = hub.app.gate
        child_id, child_token = minted_by_link(gate, parent)
        _, grandchild_token = gate.create_link(
            session_id=sid, role="viewer", ttl=600, created_by=f"link:{child_id}"
        )
        await gate.links.flush()
        async with acp_client(hub.url_with(grandchild_token)) as guest:
            revoked = await owner.call("_hub/share/revoke", {"linkId": parent["linkId"]})
            assert revoked["closed"] == 1
            await closed(guest)
            assert guest.close_code == 1008
        for credential in (parent["token"], child_token, grandchild_token):
            assert await admission(hub.url_with(credential)) == "revoked"
        listed = await owner.call("_hub/share/list", {"sessionId": sid})
        assert all(x["revoked"] for x in listed["links"])
        assert len(listed["links"]) == 3
    if kind == "memory":
        return
    # The store kept every revocation: a new hub on it refuses all three.
    async with hub_on(store, tmp_path, "b") as again:
        for credential in (parent["token"], child_token, grandchild_token):
            assert await admission(again.url_with(credential)) == "revoked"


async def test_a_link_never_outlives_the_link_that_minted_it() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        gate = hub.app.gate
        # A parent whose record has expired already (its token is still within the leeway),
        # and its child, valid for 30 days: the child goes with its parent.
        parent, _ = gate.create_link(session_id=sid, role="owner", ttl=1e-6, created_by="owner")
        _, child_token = minted_by_link(
            gate, {"sessionId": sid, "linkId": parent.link_id}, ttl=30 * 86400
        )
        assert await admission(hub.url_with(child_token)) == "expired"
        async with httpx.AsyncClient() as http:
            answer = await http.get(
                f"{hub.http}/auth/whoami", headers={"Authorization": f"Bearer {child_token}"}
            )
        assert (answer.status_code, answer.json()["error"]) == (401, "expired")


async def test_a_revocation_on_one_node_revokes_the_minted_links_on_every_node(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with (
        hub_on(redis_server.url, tmp_path, "a") as a,
        hub_on(redis_server.url, tmp_path, "b") as b,
        AsyncExitStack() as stack,
    ):
        owner_a = await stack.enter_async_context(acp_client(a.url))
        sid = await owner_a.new_session()
        parent = await share(owner_a, sid, "owner")
        _, child_token = minted_by_link(a.app.gate, parent)
        await a.app.gate.links.flush()
        guest_a = await stack.enter_async_context(acp_client(a.url_with(child_token)))
        guest_b = await stack.enter_async_context(acp_client(b.url_with(child_token)))
        # The parent link on B cannot revoke anything of its session (B does not serve it).
        parent_b = await stack.enter_async_context(acp_client(b.url_with(parent["token"])))
        code = await refusal_code(parent_b, "_hub/share/revoke", {"linkId": parent["linkId"]})
        assert code == FORBIDDEN
        owner_b = await stack.enter_async_context(acp_client(b.url))
        await owner_b.call("_hub/share/revoke", {"linkId": parent["linkId"]})
        for guest in (guest_a, guest_b, parent_b):
            await closed(guest)
            assert guest.close_code == 1008
        for node in (a, b):
            assert await admission(node.url_with(child_token)) == "revoked"


async def test_an_unknown_link_while_the_store_is_down_is_unavailable(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with hub_on(redis_server.url, tmp_path, "a") as hub:
        # A link another node minted a moment ago: signed by the hub's key, not in this node's
        # copy of the links.
        link_id = "l-00112233445566ff"
        unknown = AUTHORITY.mint(
            sub=f"link:{link_id}",
            role="viewer",
            ttl=600,
            sessions=["s-elsewhere"],
            agents=(),
            jti=link_id,
            link_id=link_id,
            now=time.time(),
        )
        redis_server.stop()
        assert await admission(hub.url_with(unknown)) == "unavailable"
        async with httpx.AsyncClient() as http:
            answer = await http.get(
                f"{hub.http}/auth/whoami", headers={"Authorization": f"Bearer {unknown}"}
            )
        assert (answer.status_code, answer.json()["error"]) == (503, "unavailable")
        async with acp_client(hub.url) as owner:
            code = await refusal_code(owner, "_hub/share/revoke", {"linkId": link_id})
            assert code == STORE_UNAVAILABLE
