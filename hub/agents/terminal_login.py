"""``acp-hub agent-login NAME``: an agent's terminal login, run on the hub's host.

A ``terminal`` auth method (https://agentclientprotocol.com/rfds/auth-methods) is an
interactive program: the agent's own command with the method's extra ``args`` and ``env``,
run in a terminal by a person, exiting 0 once logged in (the agent stores the login where
its next process finds it, typically under its ``HOME``). The hub's WebSocket clients cannot
run it - it must run where the agent runs - so the hub offers it on its command line.

``terminal_methods`` starts the agent once, asks ``initialize`` with the terminal auth
capability (agents advertise terminal methods only to clients that have it), and stops it;
``terminal_command`` is what to run: the definition's command, arguments, environment
(trimmed, plus its ``env``) and working directory, plus the method's ``args`` and ``env``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio

from hub.agents.connection import Connection
from hub.agents.dialect import initialize_params, open_dialect
from hub.agents.errors import AgentError, agent_unavailable
from hub.agents.process import AgentProcess, ShutdownTimings, agent_environment
from hub.agents.spec import AgentSpec
from hub.protocol import version as versions
from hub.protocol.errors import VersionError, method_not_found

__all__ = ["terminal_command", "terminal_methods"]

logger = logging.getLogger("hub.agents")


async def terminal_methods(spec: AgentSpec, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Every auth method the agent advertises to a client that can run terminal logins
    (v2 shape). Raises ``AgentError`` (``AGENT_UNAVAILABLE``) if it cannot be asked."""
    try:
        process = await AgentProcess.spawn(spec)
    except OSError as exc:
        raise agent_unavailable(spec.name, f"cannot run {spec.command!r}: {exc}") from None

    async def refuse(method: str, params: dict[str, Any]) -> Any:
        raise AgentError(method_not_found(method))

    result: Any = None
    failure: AgentError | None = None
    try:
        async with anyio.create_task_group() as tg:
            conn = Connection(
                spec.name,
                process.stdin,
                process.stdout,
                tg,
                on_request=refuse,
                on_notification=lambda method, params: None,
            )
            tg.start_soon(conn.run)
            tg.start_soon(process.pump_stderr)
            offered = versions.offer(spec.protocol)
            params = initialize_params(offered, terminal_auth=True)
            if offered >= 2:
                # A v1 agent answers a v2 offer with 1 but reads the v1 capabilities.
                v1 = initialize_params(1, terminal_auth=True)["clientCapabilities"]
                params["clientCapabilities"] = {"auth": v1["auth"]}
            with anyio.move_on_after(timeout) as scope:
                try:
                    result = await conn.request("initialize", params)
                except AgentError as exc:
                    failure = exc
            if scope.cancelled_caught:
                failure = agent_unavailable(spec.name, "no answer to initialize")
            tg.cancel_scope.cancel()
    finally:
        await process.stop("asked for its login methods", ShutdownTimings(1.0, 2.0, 5.0))
        await process.aclose()
    if failure is not None:
        raise failure
    if not isinstance(result, dict):
        raise agent_unavailable(spec.name, f"initialize answered {result!r}")
    try:
        version = versions.accept(offered, result.get("protocolVersion"), spec.protocol)
    except VersionError as exc:
        raise agent_unavailable(spec.name, str(exc)) from None
    methods = open_dialect(spec.name, conn, version, result).auth_methods
    return methods


def terminal_command(
    spec: AgentSpec, method: Mapping[str, Any], base_env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str], str | None]:
    """``(argv, env, cwd)`` of the terminal login ``method`` (v2 shape) of ``spec``."""
    args = [a for a in method.get("args") or [] if isinstance(a, str)]
    env = agent_environment(spec, base_env)
    for var in method.get("env") or []:
        if isinstance(var, Mapping) and isinstance(var.get("name"), str):
            env[var["name"]] = str(var.get("value", ""))
    return [*spec.argv, *args], env, spec.cwd
