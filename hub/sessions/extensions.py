"""ACP's extension surface through the hub: methods the hub does not handle itself.

Theory of operation
-------------------
The hub sits between clients and agents, so for what it does not know it is a proxy
(https://agentclientprotocol.com/protocol/extensibility: custom methods use the ``_`` prefix;
an agent may also offer session methods the hub has no entry for, such as
``session/set_model``):

* **client -> agent** (``client_request``): a request whose ``sessionId`` names a session the
  client is attached to goes to that session's agent, the session id becoming the agent's,
  and the agent's answer (result or error) comes back. It needs the role
  ``extension_role`` gives (``driver`` unless ``[hub] extension_roles`` names another for the
  method). Unknown methods are not translated between protocol versions: they pass unchanged.
* **agent -> client** (``agent_request``): a request of the agent whose method the hub does not
  know and whose params name the session goes to one client: the one whose prompt is running,
  else the lease holder, when attached. Its answer goes back to the agent; with nobody to take
  it, or when that client detaches first, the agent gets ``-32601``.
* Notifications of the agent (``_``-prefixed, naming the session) go to every attached client
  live (``Session.on_extension``): they are not in the session's log, so a late joiner does
  not replay them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from hub.agents.errors import AgentError
from hub.protocol.errors import RpcError, hub_error, method_not_found
from hub.sessions.client import ClientHandle
from hub.sessions.host import Host, attached_prompter
from hub.settings import ROLES, Role

__all__ = ["DEFAULT_EXTENSION_ROLE", "Extensions", "extension_role", "is_extension_method"]

DEFAULT_EXTENSION_ROLE: Role = "driver"
"""The role an extension method needs unless ``[hub] extension_roles`` says otherwise."""


def extension_role(method: str, configured: Mapping[str, Any]) -> Role:
    """The role a client needs to send ``method`` (an extension method) to an agent."""
    role = configured.get(method)
    return role if role in ROLES else DEFAULT_EXTENSION_ROLE


def is_extension_method(method: str) -> bool:
    """Whether ``method`` may be passed to an agent when the hub has no handler for it: not
    the hub's own (``_hub/...``), not a JSON-RPC protocol method (``$/...``), not empty."""
    return bool(method) and not method.startswith(("_hub", "$/", "rpc."))


class Extensions:
    """One session's extension requests in flight; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self._asked: dict[str, list[tuple[Any, anyio.Event]]] = {}
        """Agent requests waiting for a client's answer, by the client asked."""

    async def client_request(
        self, client: ClientHandle, method: str, params: dict[str, Any]
    ) -> Any:
        """A client's request the hub has no handler for: the agent answers it. Raises
        ``SessionFailure`` (``-32040``) below the method's role, ``AgentError`` with the
        agent's own error."""
        session = self._session
        session.require(client, extension_role(method, session.settings.extension_roles), method)
        result = await session.agent.extension(session.agent_session_id, method, params)
        if isinstance(result, dict) and result.get("sessionId") == session.agent_session_id:
            # Clients know the session by the hub's id, not by the agent's.
            result = {**result, "sessionId": session.id}
        return result

    async def agent_request(self, method: str, params: dict[str, Any]) -> Any:
        """``SessionSink.on_extension_request``: ask the client whose prompt runs (else the
        lease holder); its answer is the agent's. ``AgentError`` ``-32601`` when nobody can
        take it, the client's error when it answered one."""
        session = self._session
        target = self._target()
        if target is None:
            raise AgentError(method_not_found(method))
        done = anyio.Event()
        answer: dict[str, Any] = {}

        def on_reply(result: Any, error: RpcError | None) -> None:
            answer["error" if error is not None else "result"] = error or result
            done.set()

        request_id = target.request(method, {**params, "sessionId": session.id}, on_reply)
        asked = self._asked.setdefault(target.client_id, [])
        entry = (request_id, done)
        asked.append(entry)
        try:
            await done.wait()
        finally:
            asked.remove(entry)
            if not asked:
                self._asked.pop(target.client_id, None)
            if not done.is_set():
                target.withdraw(request_id)  # the agent withdrew it, or went away
        if "result" in answer:
            return answer["result"]
        error = answer.get("error")
        if isinstance(error, RpcError):
            raise AgentError(error)
        # Detached before it answered.
        raise AgentError(
            hub_error(method_not_found(method).code, f"{method}: the client asked went away")
        )

    def _target(self) -> ClientHandle | None:
        session = self._session
        prompter = attached_prompter(session)
        if prompter is not None:
            return prompter
        holder = session.lease.holder
        if holder is not None and holder.client_id in session.attached:
            return holder
        return None

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: what it was asked is withdrawn and the agent told so."""
        for request_id, done in list(self._asked.get(client.client_id, ())):
            client.withdraw(request_id)
            done.set()
