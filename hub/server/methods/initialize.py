"""``initialize``: the protocol version, the client's name and role, and what the hub
advertises (its capabilities, the agent's auth methods, ``_meta["acp-hub"]``)."""

from __future__ import annotations

import logging
from typing import Any

from hub import __version__
from hub.agents.errors import AgentError
from hub.protocol.capabilities import auth_methods_v2_to_v1, capabilities_v2_to_v1
from hub.protocol.errors import VersionError, invalid_params
from hub.protocol.version import negotiate_as_agent
from hub.server.methods.caller import AsyncHandler, Caller, Result
from hub.server.methods.params import check_param, hub_meta_of
from hub.sessions import arbiter
from hub.sessions.errors import SessionFailure
from hub.settings import ROLES

log = logging.getLogger("hub.server")


async def _initialize(conn: Caller, params: dict[str, Any]) -> Result:
    try:
        version = negotiate_as_agent(params.get("protocolVersion"))
    except VersionError as exc:
        raise SessionFailure(invalid_params(str(exc))) from None
    hub_meta = hub_meta_of(params)
    info = params.get("info") if version >= 2 else params.get("clientInfo")
    if not isinstance(info, dict):
        info = params.get("clientInfo") or params.get("info")
    # The name others see: the one this connection asks for, else the credential's display
    # name (the token's ``name``, a link's label), else the client program's.
    name = hub_meta.get("name")
    if not isinstance(name, str) or not name:
        name = conn.access.name
    program = info.get("name") if isinstance(info, dict) else None
    program = program if isinstance(program, str) else ""
    if not isinstance(name, str) or not name:
        name = program
    requested = hub_meta.get("role")
    role = conn.granted_role
    if isinstance(requested, str):
        role = check_param(arbiter.hub_role, requested)
    conn.identify(
        version=version,
        name=name if isinstance(name, str) and name else f"client {conn.connection_id[-4:]}",
        role=role,
        hub_events=version >= 2 or hub_meta.get("events") is True,
        batches=version >= 2 and hub_meta.get("batches") is True,
        program=program,
    )
    supervisor = conn.registry.supervisor
    agents = [{"name": n, "default": n == supervisor.default_name} for n in supervisor.names()]
    capabilities = await _capabilities(conn)
    meta = {
        "acp-hub": {
            "connectionId": conn.connection_id,
            "clientId": conn.connection_id,
            "principal": conn.principal,
            "principalName": conn.access.name,
            "role": conn.role,
            "grantedRole": conn.granted_role,
            "sessionScope": "*" if conn.access.sessions is None else sorted(conn.access.sessions),
            "link": conn.access.link_id,
            "expiresAt": conn.access.expires_at,
            "name": conn.name,
            "agents": agents,
            "defaultAgent": supervisor.default_name,
            "features": ["replay", "cursor", "batch-replay", "arbitration", "attach"],
            "version": __version__,
        }
    }
    if conn.access.whole_hub and arbiter.allows(conn.role, arbiter.required_role("session/new")):
        # Where a session may work, for the page that starts one; host paths are not shown to
        # those who cannot start sessions.
        meta["acp-hub"]["workspaceRoots"] = [str(root) for root in conn.registry.workspace_roots]
    hub_info = {"name": "acp-hub", "title": "acp-hub", "version": __version__}
    auth_methods = _auth_methods(conn)
    log.info("= %s: initialized v%d as %s (%s)", conn.connection_id, version, conn.role, conn.name)
    if version >= 2:
        return {
            "protocolVersion": version,
            "info": hub_info,
            "capabilities": capabilities,
            "authMethods": auth_methods,
            "_meta": meta,
        }
    v1caps = capabilities_v2_to_v1(capabilities)
    v1caps["loadSession"] = True
    session_caps = v1caps.setdefault("sessionCapabilities", {})
    session_caps.update({"list": {}, "resume": {}, "close": {}, "delete": {}})
    session_caps["attach"] = {"roles": list(ROLES)}
    if auth_methods:
        v1caps["auth"] = {"logout": {}}
    return {
        "protocolVersion": version,
        "agentInfo": hub_info,
        "agentCapabilities": v1caps,
        "authMethods": auth_methods_v2_to_v1(auth_methods),
        "_meta": meta,
    }


def _auth_methods(conn: Caller) -> list[dict[str, Any]]:
    """What the hub advertises: to an owner, the default agent's methods the hub can log it
    in with itself (``agent`` and ``env_var``), as ``agent`` methods; to anyone else nothing,
    since only an owner of the whole hub whose ``agents`` claim names the agent may log it in.
    ``terminal`` methods run on the hub's
    host, never through a client."""
    supervisor = conn.registry.supervisor
    if (
        conn.role != "owner"
        or not conn.access.whole_hub
        or supervisor.default_name is None
        or not conn.access.may_start(supervisor.default_name)
    ):
        return []
    agent = supervisor.get(supervisor.default_name)
    methods = []
    for method in agent.auth_methods:
        method_id = method.get("methodId")
        if not isinstance(method_id, str) or agent.login_problem(method_id) is not None:
            continue
        if method.get("type") not in ("agent", "env_var"):
            continue
        entry = {"methodId": method_id, "name": str(method.get("name") or method_id)}
        if isinstance(method.get("description"), str):
            entry["description"] = method["description"]
        methods.append({**entry, "type": "agent"})
    return methods


async def _capabilities(conn: Caller) -> dict[str, Any]:
    """The v2 capabilities the hub advertises: the default agent's prompt and MCP support,
    and the session operations the hub serves itself."""
    session: dict[str, Any] = {"delete": {}, "mcp": {"stdio": {}}}
    # The multi-client attach proposal: session/attach and session/detach with these roles.
    session["attach"] = {"roles": [*ROLES, *arbiter.ATTACH_ROLE_NAMES]}
    supervisor = conn.registry.supervisor
    name = supervisor.default_name
    if name is not None:
        agent = supervisor.get(name)
        try:
            await agent.ensure_started()
        except AgentError as exc:
            log.warning("! default agent %s did not start: %s", name, exc)
        agent_session = agent.capabilities.get("session") if agent.capabilities else None
        if isinstance(agent_session, dict):
            for key in ("prompt", "mcp", "additionalDirectories"):
                if isinstance(agent_session.get(key), dict):
                    session[key] = agent_session[key]
    return {"session": session}


ASYNC: dict[str, AsyncHandler] = {"initialize": _initialize}
