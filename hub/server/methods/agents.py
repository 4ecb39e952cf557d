"""The agents' own methods: login and logout (v1 ``authenticate``/``logout``, v2
``auth/login``/``auth/logout``, the hub's ``_hub/agent_login``/``_hub/agent_logout``) and
``_hub/agent_stderr``.

For an owner of the whole hub (``arbiter.METHOD_ROLES``, ``arbiter.HUB_METHODS``): one agent
process serves everyone's sessions on it."""

from __future__ import annotations

import logging
from typing import Any

from hub.agents.agent import Agent
from hub.protocol.errors import forbidden_scope, invalid_params
from hub.server.methods.caller import AsyncHandler, Caller, Result, SyncHandler
from hub.server.methods.params import hub_meta_of, string
from hub.sessions.errors import SessionFailure

log = logging.getLogger("hub.server")


def _agent(conn: Caller, name: Any, action: str) -> Agent:
    """The agent ``name`` (the default one when ``None``), which the credential's ``agents``
    claim must name (``-32040`` otherwise, before anything reaches the agent)."""
    name = name if name is not None else conn.registry.supervisor.default_name
    if not isinstance(name, str):
        raise SessionFailure(invalid_params("agent must be the name of an agent"))
    if not conn.access.may_start(name):
        raise SessionFailure(
            forbidden_scope(
                action, "agents", f"a credential whose agents claim names agent {name!r}"
            )
        )
    try:
        return conn.registry.supervisor.get(name)
    except KeyError:
        raise SessionFailure(invalid_params(f"unknown agent {name!r}")) from None


def _login_meta(params: dict[str, Any]) -> dict[str, Any] | None:
    """The client's ``_meta`` for the agent: all but the hub's own key."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return None
    return {k: v for k, v in meta.items() if k != "acp-hub"} or None


async def _authenticate(conn: Caller, params: dict[str, Any]) -> Result:
    """v1 ``authenticate`` / v2 ``auth/login``: the default agent, or the one named in
    ``_meta["acp-hub"].agent``, logged in with ``methodId`` in the agent's own version."""
    agent = _agent(conn, hub_meta_of(params).get("agent"), "authenticate")
    method_id = string(params, "methodId", "methodId is required")
    log.info("= %s: logs agent %s in with %r", conn.connection_id, agent.name, method_id)
    await agent.login(method_id, _login_meta(params))
    return {}


async def _logout(conn: Caller, params: dict[str, Any]) -> Result:
    """v1 ``logout`` / v2 ``auth/logout``, for the default or the named agent."""
    agent = _agent(conn, hub_meta_of(params).get("agent"), "logout")
    log.info("= %s: logs agent %s out", conn.connection_id, agent.name)
    await agent.logout()
    return {}


async def _hub_agent_login(conn: Caller, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent"), "_hub/agent_login")
    method_id = string(params, "methodId", "methodId is required")
    log.info("= %s: logs agent %s in with %r", conn.connection_id, agent.name, method_id)
    await agent.login(method_id, _login_meta(params))
    return {"agent": agent.name, "login": agent.login_status.to_dict()}


async def _hub_agent_logout(conn: Caller, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent"), "_hub/agent_logout")
    log.info("= %s: logs agent %s out", conn.connection_id, agent.name)
    await agent.logout()
    return {"agent": agent.name, "login": agent.login_status.to_dict()}


def _hub_agent_stderr(conn: Caller, params: dict[str, Any]) -> Result:
    agent = _agent(conn, params.get("agent") or None, "_hub/agent_stderr")
    return {"agent": agent.name, "stderr": agent.stderr_tail()}


SYNC: dict[str, SyncHandler] = {"_hub/agent_stderr": _hub_agent_stderr}

ASYNC: dict[str, AsyncHandler] = {
    "authenticate": _authenticate,
    "auth/login": _authenticate,
    "logout": _logout,
    "auth/logout": _logout,
    "_hub/agent_login": _hub_agent_login,
    "_hub/agent_logout": _hub_agent_logout,
}
