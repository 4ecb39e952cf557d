"""Agents that require login: the login state, the checks made before a login, the errors.

Theory of operation
-------------------
An agent advertises its ``authMethods`` in ``initialize``
(https://agentclientprotocol.com/protocol/initialization) and may answer ``session/new``
with ``-32000`` (auth required) until a client logged it in: ``authenticate`` in v1,
``auth/login`` in v2, each with the ``methodId`` of an advertised method (and ``logout`` /
``auth/logout`` to end it). The hub is that client. It logs an agent in

* right after every start, before re-attaching sessions, when the definition names a
  method (``auth_method``, with ``auth_meta`` as the request's ``_meta``);
* when an owner asks over the wire (``Agent.login``); that login is remembered and redone
  after a restart, like a configured one, until an owner logs the agent out.

Methods by type (https://agentclientprotocol.com/rfds/auth-methods):

* ``agent``: the agent logs itself in when asked (API keys it reads, a stored login);
* ``env_var`` (older agents): the agent reads variables from its environment. Agents do not
  inherit the hub's environment, so the variables are usually in the definition's ``env``;
  when they are not there, the hub warns (naming them) and asks all the same, since a
  wrapper (``command = "env"``, a script that exports a key) may set them: the agent's own
  answer decides, and a refusal's message gets the hint;
* ``terminal``: an interactive program on the hub's host (``acp-hub agent-login NAME``),
  never passed to a login request.

``LoginStatus`` is what the hub knows; its changes reach every session of the agent as an
``_hub_agent`` event (``logged_in``, ``logged_out``, ``login_failed``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio

from hub.agents.dialect import Dialect
from hub.agents.errors import AgentError
from hub.agents.session_table import SessionTable
from hub.agents.spec import AgentSpec
from hub.protocol.errors import AUTH_REQUIRED, INVALID_PARAMS, RpcError, hub_error

__all__ = [
    "Login",
    "LoginStatus",
    "describe_methods",
    "env_var_names",
    "env_var_warning",
    "find_method",
    "login_problem",
    "login_required",
    "refused",
]

logger = logging.getLogger("hub.agents")

LoginState = Literal["none", "logged_in", "logged_out", "failed"]


@dataclass(frozen=True, slots=True)
class LoginStatus:
    """What the hub knows of an agent's login: ``none`` (never logged in by the hub),
    ``logged_in`` (with ``method_id``), ``logged_out``, or ``failed`` (with ``message``)."""

    state: LoginState = "none"
    method_id: str | None = None
    message: str | None = None

    def event(self) -> dict[str, Any]:
        """The ``_hub_agent`` event of this status (``status`` and its details)."""
        status = {"logged_in": "logged_in", "logged_out": "logged_out"}.get(
            self.state, "login_failed"
        )
        event: dict[str, Any] = {"status": status}
        if self.method_id is not None:
            event["methodId"] = self.method_id
        if self.message is not None:
            event["message"] = self.message
        return event

    def to_dict(self) -> dict[str, Any]:
        """The status as JSON (``state``, ``methodId?``, ``message?``)."""
        out: dict[str, Any] = {"state": self.state}
        if self.method_id is not None:
            out["methodId"] = self.method_id
        if self.message is not None:
            out["message"] = self.message
        return out


def find_method(methods: Sequence[Mapping[str, Any]], method_id: str) -> Mapping[str, Any] | None:
    """The advertised method (v2 shape) with this id, or ``None``."""
    return next((m for m in methods if m.get("methodId") == method_id), None)


def env_var_names(method: Mapping[str, Any]) -> list[str]:
    """The variables an ``env_var`` method reads: ``vars: [{name}]``, or the older
    ``varName``."""
    names = [v.get("name") for v in method.get("vars") or [] if isinstance(v, Mapping)]
    if isinstance(method.get("varName"), str):
        names.append(method["varName"])
    return [n for n in names if isinstance(n, str) and n]


def describe_methods(methods: Sequence[Mapping[str, Any]]) -> str:
    """``chatgpt (agent), codex-api-key (env_var: CODEX_API_KEY)``; ``none`` if empty."""
    parts = []
    for method in methods:
        kind = str(method.get("type") or "agent")
        names = env_var_names(method) if kind == "env_var" else []
        detail = f"{kind}: {', '.join(names)}" if names else kind
        parts.append(f"{method.get('methodId')} ({detail})")
    return ", ".join(parts) or "none"


def login_problem(
    agent: str,
    env: Mapping[str, str],
    methods: Sequence[Mapping[str, Any]],
    method_id: str,
    *,
    must_be_advertised: bool,
) -> str | None:
    """Why the hub will not ask ``agent`` to log in with ``method_id``, or ``None``.

    A terminal method is never passed to a login request; with ``must_be_advertised`` (a
    configured login) an id the agent did not advertise is refused too. An unknown id from
    an owner goes to the agent, whose own answer says what is wrong, and so does an
    ``env_var`` method whose variables the definition's ``env`` lacks (``env_var_warning``).
    """
    method = find_method(methods, method_id)
    if method is None:
        if not must_be_advertised:
            return None
        return (
            f"agent '{agent}': auth_method {method_id!r} is not one of its authMethods "
            f"({describe_methods(methods)})"
        )
    kind = method.get("type") or "agent"
    if kind == "terminal":
        return (
            f"agent '{agent}': {method_id!r} is a terminal login: run `acp-hub agent-login "
            f"{agent}` on the hub's host"
        )
    return None


def env_var_warning(
    agent: str, env: Mapping[str, str], methods: Sequence[Mapping[str, Any]], method_id: str
) -> str | None:
    """What to warn of before an ``env_var`` login whose variables the definition's ``env``
    does not set, or ``None``. Only a warning: the agent may get them from a wrapper (its
    command ``env KEY=... agent``, a script that exports them), so the login is sent and the
    agent's answer decides."""
    method = find_method(methods, method_id)
    if method is None or method.get("type") != "env_var":
        return None
    missing = [name for name in env_var_names(method) if not env.get(name)]
    if not missing:
        return None
    return (
        f"agent '{agent}': login {method_id!r} reads {', '.join(missing)}, which "
        f"[agents.{agent}] env does not set (agents do not inherit the hub's environment; "
        "a wrapper command may set it)"
    )


def login_required(
    agent: str,
    methods: Sequence[Mapping[str, Any]],
    status: LoginStatus,
    cause: RpcError | None = None,
) -> AgentError:
    """``-32000``: ``agent`` requires a login; the message names its methods and, after a
    failed login, why it failed. ``data``: ``agent``, ``authMethods``, ``login`` and the
    agent's own error (``agentError``)."""
    message = f"Agent '{agent}' requires login (methods: {describe_methods(methods)})"
    if status.state == "failed" and status.message:
        message += f"; the configured login failed: {status.message}"
    else:
        message += (
            f"; set [agents.{agent}] auth_method, or an owner logs it in with _hub/agent_login"
        )
    data: dict[str, Any] = {
        "agent": agent,
        "authMethods": [dict(m) for m in methods],
        "login": status.to_dict(),
    }
    if cause is not None:
        data["agentError"] = cause.to_dict()
    return AgentError(hub_error(AUTH_REQUIRED, message, data))


def refused(agent: str, problem: str) -> AgentError:
    """A login the hub will not send (``login_problem``), as ``-32602``."""
    return AgentError(hub_error(INVALID_PARAMS, problem, {"agent": agent}))


class Login:
    """One agent's login: the one to redo after every start (the configured one, or the
    last an owner made), and its ``LoginStatus``, whose changes every registered session
    is told of."""

    def __init__(self, spec: AgentSpec, sessions: SessionTable) -> None:
        self._spec = spec
        self._sessions = sessions
        self._again: tuple[str, Mapping[str, Any] | None] | None = (
            (spec.auth_method, spec.auth_meta) if spec.auth_method else None
        )
        self.status = LoginStatus()

    @property
    def name(self) -> str:
        return self._spec.name

    def problem(self, methods: Sequence[Mapping[str, Any]], method_id: str) -> str | None:
        """``login_problem`` for a method the agent must advertise."""
        return login_problem(self.name, self._spec.env, methods, method_id, must_be_advertised=True)

    async def redo(self, dialect: Dialect, timeout: float) -> None:
        """The login to redo on a fresh process, if any; a failure is reported (log line,
        status, sessions), not raised: the agent runs, and what needs the login says why."""
        if self._again is None:
            return
        method_id, meta = self._again
        try:
            with anyio.fail_after(timeout):
                await self._send(dialect, method_id, meta, configured=True)
        except TimeoutError:
            message = f"no answer to the login within {timeout}s"
        except AgentError as exc:
            message = exc.error.message
        else:
            self._set(LoginStatus("logged_in", method_id))
            return
        logger.warning("! agent %s: login with %r failed: %s", self.name, method_id, message)
        self._set(LoginStatus("failed", method_id, message))

    async def log_in(
        self, dialect: Dialect, method_id: str, meta: Mapping[str, Any] | None
    ) -> None:
        """An owner's login (see ``Agent.login``); remembered to redo after a restart."""
        await self._send(dialect, method_id, meta, configured=False)
        logger.info("= agent %s: logged in with %r", self.name, method_id)
        self._again = (method_id, meta)
        self._set(LoginStatus("logged_in", method_id))

    async def log_out(self, dialect: Dialect) -> None:
        """An owner's logout (see ``Agent.logout``); nothing is redone after a restart."""
        method, params = dialect.logout_request()
        await dialect.conn.request(method, params)
        logger.info("= agent %s: logged out", self.name)
        self._again = None
        self._set(LoginStatus("logged_out"))

    async def _send(
        self,
        dialect: Dialect,
        method_id: str,
        meta: Mapping[str, Any] | None,
        *,
        configured: bool,
    ) -> None:
        problem = login_problem(
            self.name,
            self._spec.env,
            dialect.auth_methods,
            method_id,
            must_be_advertised=configured,
        )
        if problem is not None:
            raise refused(self.name, problem)
        warning = env_var_warning(self.name, self._spec.env, dialect.auth_methods, method_id)
        if warning is not None:
            logger.warning("! %s", warning)
        method, params = dialect.login_request(method_id, dict(meta) if meta else None)
        logger.info("= agent %s: logging in (%s %s)", self.name, method, method_id)
        try:
            await dialect.conn.request(method, params)
        except AgentError as exc:
            if warning is None:
                raise
            # The agent's refusal decides; the hint says what the hub suspects.
            hinted = replace(exc.error, message=f"{exc.error.message} ({warning})")
            raise AgentError(hinted) from None

    def _set(self, status: LoginStatus) -> None:
        changed = status != self.status
        self.status = status
        if changed:
            event = status.event()
            for entry in self._sessions:
                entry.tell(event)
