"""``Dialect``: what differs between ACP v1 and v2 when the hub is the client of an agent.

The agent layer speaks to every agent through one ``Dialect`` per process, chosen by the
version negotiated in ``initialize`` (https://agentclientprotocol.com/protocol/initialization)
and holding that process's connection and capabilities. Everything the session layer sees is
v2-shaped; the v1 dialect translates on the way in and out and synthesizes what v1 never
says (``user_message`` + ``running`` when a prompt is forwarded, ``idle`` with the stop
reason when the v1 prompt returns, ``requires_action`` while a permission is pending), the v2
dialect checks what arrives and translates the v1 habits some v2 agents keep (chunks
without a ``messageId``, removed update names, a prompt answered at the end of the turn).
The version tables are in ``docs/agents.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hub import __version__
from hub.agents.connection import Connection
from hub.agents.errors import AgentError, agent_unavailable, refusal, unsupported
from hub.agents.session_table import AgentSession
from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.capabilities import auth_methods_v1_to_v2, capabilities_v1_to_v2
from hub.protocol.checks import check as check_update
from hub.protocol.checks import is_plain_chunk
from hub.protocol.errors import InvalidParams, RpcError, TranslationError, invalid_params
from hub.protocol.mcp_servers import mcp_servers_v2_to_v1
from hub.protocol.permissions import permission_request_v1_to_v2
from hub.protocol.prompts import prompt_v2_to_v1
from hub.protocol.variants import CHUNKS, REMOVED_VARIANTS

__all__ = [
    "CLIENT_INFO",
    "Dialect",
    "PromptAck",
    "V1Dialect",
    "V2Dialect",
    "initialize_params",
    "open_dialect",
]

logger = logging.getLogger("hub.agents")

CLIENT_INFO = {"name": "acp-hub", "title": "acp-hub", "version": __version__}

_BUSY_STATES = frozenset({"running", "requires_action"})

Register = Callable[[str], AgentSession]
"""Creates and registers the ``AgentSession`` of a new agent session id (from the reader)."""


@dataclass(frozen=True, slots=True)
class PromptAck:
    """A prompt was accepted; ``message_id`` is the user message's id when known (always
    for v1 agents, whose id the hub mints; for v2 agents when they answer ``{messageId}``)."""

    message_id: str | None


def initialize_params(offered: int, *, terminal_auth: bool = False) -> dict[str, Any]:
    """The ``initialize`` params for the offered version: the hub's client info, no client
    file system or terminals, elicitation in both modes. ``terminal_auth`` asks for the
    agent's terminal login methods (``acp-hub agent-login``: the hub can run them on its
    host, its WebSocket clients cannot)."""
    elicitation: dict[str, Any] = {"form": {}, "url": {}}
    if offered >= 2:
        caps: dict[str, Any] = {"elicitation": elicitation}
        if terminal_auth:
            caps["auth"] = {"terminal": {}}
        return {"protocolVersion": offered, "info": CLIENT_INFO, "capabilities": caps}
    v1_caps: dict[str, Any] = {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "elicitation": elicitation,
    }
    if terminal_auth:
        v1_caps["auth"] = {"terminal": True}
    return {"protocolVersion": offered, "clientInfo": CLIENT_INFO, "clientCapabilities": v1_caps}


def open_dialect(name: str, conn: Connection, version: int, result: dict[str, Any]) -> Dialect:
    """The dialect for an agent that answered ``initialize`` with ``result`` and negotiated
    ``version``. An agent claiming 2 with a v1-shaped answer is spoken to in v1."""
    if version == 2 and "agentCapabilities" in result and "capabilities" not in result:
        logger.warning(
            "! agent %s claims protocol 2 but answered initialize in the v1 shape; "
            "speaking v1 to it",
            name,
        )
        version = 1
    return (V2Dialect if version == 2 else V1Dialect)(name, conn, result)


def dicts(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else: none)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class Dialect:
    """One agent process spoken to in one protocol version (see the module docstring).

    ``capabilities`` and ``auth_methods`` are always in the v2 shape. Operations raise
    ``AgentError``: the agent's own error, ``UNSUPPORTED`` naming the capability it did not
    advertise, or ``INVALID_PARAMS`` for what cannot be said in this version.
    """

    version: int = 0
    login_method: str = ""
    """The method that logs in with an auth method (the two versions name it differently)."""
    logout_method: str = ""

    def __init__(self, name: str, conn: Connection, result: dict[str, Any]) -> None:
        self.name = name
        self.conn = conn
        self.capabilities: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []

    # -- capabilities ------------------------------------------------------------------------

    def needs(self, operation: str) -> str | None:
        """``None`` if ``operation`` (``resume``, ``load``, ``close``, ``delete``,
        ``set_mode``, ``logout``) is supported, else what the agent did not advertise."""
        raise NotImplementedError

    def require(self, operation: str, method: str) -> None:
        """Raise ``UNSUPPORTED`` unless ``operation`` is supported."""
        needs = self.needs(operation)
        if needs is not None:
            raise unsupported(self.name, method, needs)

    # -- sessions ----------------------------------------------------------------------------

    def new_translator(self) -> AgentV1Translator | None:
        """The translator a new session of this agent needs, if any."""
        return None

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[dict[str, Any]], register: Register
    ) -> tuple[AgentSession, list[dict[str, Any]]]:
        """``session/new``: the session, registered before any of its updates is
        dispatched, and its v2 config options. ``mcp_servers`` are v2 entries."""
        holder: list[AgentSession] = []

        def on_reply(result: Any, error: RpcError | None) -> None:
            sid = result.get("sessionId") if error is None and isinstance(result, dict) else None
            if isinstance(sid, str) and sid:
                entry = register(sid)
                self._session_created(entry, result)
                holder.append(entry)

        params = {"cwd": cwd, "mcpServers": self._mcp_servers(mcp_servers)}
        result = await self.conn.request("session/new", params, on_reply=on_reply, deadline=True)
        if not holder:
            raise agent_unavailable(self.name, f"session/new answered {result!r:.200}")
        entry = holder[0]
        if entry.translator is None:
            return entry, dicts(result.get("configOptions"))
        try:
            entry.translator.session_setup(result)
        except InvalidParams as exc:
            logger.warning("! agent %s: malformed session/new result: %s", self.name, exc)
        return entry, entry.translator.config_options

    def _session_created(self, entry: AgentSession, result: dict[str, Any]) -> None:
        """Called from the reader as the ``session/new`` answer is dispatched."""

    def _mcp_servers(self, servers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [dict(s) for s in servers]

    async def reattach(self, entry: AgentSession) -> dict[str, Any]:
        """Attach a registered session to this (new) process without replaying its history;
        the v2-shaped result (``configOptions`` when the agent sent some)."""
        raise NotImplementedError

    async def prompt(self, entry: AgentSession, blocks: Sequence[dict[str, Any]]) -> PromptAck:
        """Forward a prompt; return once the agent accepted it."""
        raise NotImplementedError

    async def set_config_option(
        self, entry: AgentSession, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]:
        """``session/set_config_option``; the full v2 option set."""
        raise NotImplementedError

    async def set_mode(self, entry: AgentSession, mode_id: str) -> None:
        """v1 ``session/set_mode``; the new mode reaches the sink as a config option."""
        self.require("set_mode", "session/set_mode")
        await self.conn.request(
            "session/set_mode", {"sessionId": entry.session_id, "modeId": mode_id}, deadline=True
        )
        if entry.translator is not None:
            for update in entry.translator.mode_set(mode_id):
                entry.deliver(update)

    # -- what the agent sends ----------------------------------------------------------------

    def updates(self, entry: AgentSession, update: dict[str, Any]) -> list[dict[str, Any]]:
        """The internal v2 updates for one ``session/update`` of the agent (none for a
        malformed one, which is logged)."""
        raise NotImplementedError

    def permission_request(self, params: dict[str, Any]) -> dict[str, Any]:
        """The v2 ``session/request_permission`` params; ``AgentError`` if malformed."""
        raise NotImplementedError

    def turn_translator(self, entry: AgentSession) -> AgentV1Translator | None:
        """The translator that synthesizes the session's turn states (v1 only)."""
        return None

    def exit_updates(self, entry: AgentSession, error: RpcError) -> list[dict[str, Any]]:
        """What a session gets when the process died under it (before the exit event)."""
        return []

    # -- login -------------------------------------------------------------------------------

    def login_request(
        self, method_id: str, meta: dict[str, Any] | None
    ) -> tuple[str, dict[str, Any]]:
        """The login request for ``method_id`` (https://agentclientprotocol.com/protocol/initialization)."""
        params: dict[str, Any] = {"methodId": method_id}
        if meta:
            params["_meta"] = dict(meta)
        return self.login_method, params

    def logout_request(self) -> tuple[str, dict[str, Any]]:
        """The logout request; ``UNSUPPORTED`` if the agent cannot log out."""
        self.require("logout", self.logout_method)
        return self.logout_method, {}


class V1Dialect(Dialect):
    """ACP v1 (https://agentclientprotocol.com/protocol/overview)."""

    version = 1
    login_method = "authenticate"
    logout_method = "logout"

    def __init__(self, name: str, conn: Connection, result: dict[str, Any]) -> None:
        super().__init__(name, conn, result)
        caps = result.get("agentCapabilities")
        self._caps: dict[str, Any] = caps if isinstance(caps, dict) else {}
        try:
            self.capabilities = capabilities_v1_to_v2(self._caps)
        except InvalidParams as exc:
            logger.warning("! agent %s: malformed agentCapabilities: %s", name, exc)
        try:
            self.auth_methods = auth_methods_v1_to_v2(dicts(result.get("authMethods")))
        except InvalidParams as exc:
            logger.warning("! agent %s: malformed authMethods: %s", name, exc)

    def needs(self, operation: str) -> str | None:
        sessions = self._caps.get("sessionCapabilities")
        sessions = sessions if isinstance(sessions, dict) else {}
        if operation in ("resume", "close", "delete"):
            ok = sessions.get(operation) is not None
            return None if ok else f"agentCapabilities.sessionCapabilities.{operation}"
        if operation == "load":
            ok = self._caps.get("loadSession") is True
            return None if ok else "agentCapabilities.loadSession"
        if operation == "set_mode":
            return None
        if operation == "logout":
            auth = self._caps.get("auth")
            ok = isinstance(auth, dict) and auth.get("logout") is not None
            return None if ok else "agentCapabilities.auth.logout"
        return operation

    def new_translator(self) -> AgentV1Translator:
        return AgentV1Translator()

    def _mcp_servers(self, servers: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        mcp = self._caps.get("mcpCapabilities")
        http = isinstance(mcp, dict) and mcp.get("http") is True
        try:
            return mcp_servers_v2_to_v1(servers, http=http)
        except (InvalidParams, TranslationError) as exc:
            raise refusal(self.name, exc) from None

    async def reattach(self, entry: AgentSession) -> dict[str, Any]:
        # Resume when advertised; else load, swallowing the replay (the hub has the history).
        if self.needs("resume") is None:
            method, swallow = "session/resume", False
        elif self.needs("load") is None:
            method, swallow = "session/load", True
        else:
            raise unsupported(
                self.name,
                "session/resume",
                "agentCapabilities.loadSession or sessionCapabilities.resume",
            )
        translator = entry.translator
        assert translator is not None
        setup: list[dict[str, Any]] = []

        def on_reply(result: Any, error: RpcError | None) -> None:
            # Runs in the reader: the replay (if any) is over, live updates follow.
            entry.swallow = False
            if error is None:
                try:
                    setup.extend(translator.session_setup(result))
                except InvalidParams as exc:
                    logger.warning("! agent %s: malformed %s result: %s", self.name, method, exc)

        entry.swallow = swallow
        params = {
            "sessionId": entry.session_id,
            "cwd": entry.cwd,
            "mcpServers": self._mcp_servers(entry.mcp_servers),
        }
        try:
            await self.conn.request(method, params, on_reply=on_reply, deadline=True)
        finally:
            entry.swallow = False
        return {"configOptions": translator.config_options} if setup else {}

    async def prompt(self, entry: AgentSession, blocks: Sequence[dict[str, Any]]) -> PromptAck:
        # v1 answers the prompt at the end of the turn: accepted as soon as it is written.
        translator = entry.translator
        assert translator is not None
        try:
            v1_blocks = prompt_v2_to_v1(blocks)
            message_id, updates = translator.prompt_started(blocks)
        except (InvalidParams, TranslationError) as exc:
            raise refusal(self.name, exc) from None

        def on_reply(result: Any, error: RpcError | None) -> None:
            if error is None:
                reason = result.get("stopReason") if isinstance(result, dict) else None
                if isinstance(reason, str):
                    done = translator.prompt_finished(reason)
                else:
                    error = invalid_params(f"prompt result without a stopReason: {result!r:.200}")
            if error is not None:
                done = translator.prompt_failed(error)
            for update in done:
                entry.deliver(update)

        for update in updates:
            entry.deliver(update)
        params = {"sessionId": entry.session_id, "prompt": v1_blocks}
        try:
            await self.conn.start_request("session/prompt", params, on_reply)
        except AgentError as exc:
            for update in translator.prompt_failed(exc.error):
                entry.deliver(update)
            raise
        return PromptAck(message_id)

    async def set_config_option(
        self, entry: AgentSession, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]:
        # The synthetic mode option is v1's session/set_mode.
        translator = entry.translator
        assert translator is not None
        params = {"sessionId": entry.session_id, "configId": config_id, "type": kind}
        try:
            method, v1_params = translator.set_config_option({**params, "value": value})
        except (InvalidParams, TranslationError) as exc:
            raise refusal(self.name, exc) from None
        result = await self.conn.request(method, v1_params, deadline=True)
        if method == "session/set_mode":
            translator.mode_set(str(value))
            return translator.config_options
        try:
            return dicts(translator.set_config_option_result(result)["configOptions"])
        except InvalidParams as exc:
            raise AgentError(invalid_params(f"agent answered: {exc}")) from None

    def updates(self, entry: AgentSession, update: dict[str, Any]) -> list[dict[str, Any]]:
        assert entry.translator is not None
        try:
            return entry.translator.update(update)
        except InvalidParams as exc:
            variant = update.get("sessionUpdate")
            logger.warning("! agent %s: malformed %s update dropped: %s", self.name, variant, exc)
            return []

    def permission_request(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            return permission_request_v1_to_v2(params)
        except InvalidParams as exc:
            raise refusal(self.name, exc) from None

    def turn_translator(self, entry: AgentSession) -> AgentV1Translator | None:
        return entry.translator


# The header of V1Dialect's, for v2: each version names its own methods and capabilities.
class V2Dialect(Dialect):
    """ACP v2 (https://agentclientprotocol.com/protocol/v2/overview), with the v1 habits some
    v2 agents keep translated (each noted once in the log)."""

    # Structural: the class attributes every Dialect sets.
    version = 2
    login_method = "auth/login"
    logout_method = "auth/logout"

    def __init__(self, name: str, conn: Connection, result: dict[str, Any]) -> None:
        super().__init__(name, conn, result)
        caps = result.get("capabilities")
        self.capabilities = caps if isinstance(caps, dict) else {}
        self.auth_methods = dicts(result.get("authMethods"))
        self._v1_noted = False

    def note_v1(self, what: str) -> None:
        """Log (once per process) that this v2 agent speaks v1 here and there."""
        if not self._v1_noted:
            self._v1_noted = True
            logger.warning(
                "! agent %s negotiated protocol 2 but speaks v1 (%s); translating what is "
                "well-formed",
                self.name,
                what,
            )

    def needs(self, operation: str) -> str | None:
        session = self.capabilities.get("session")
        if operation in ("resume", "close"):
            return None if isinstance(session, dict) else "capabilities.session"
        if operation == "delete":
            ok = isinstance(session, dict) and session.get("delete") is not None
            return None if ok else "capabilities.session.delete"
        if operation in ("load", "set_mode"):
            return f"session/{operation} (removed in protocol v2)"
        if operation == "logout":
            return None if self.auth_methods else "authMethods"
        return operation

    def _session_created(self, entry: AgentSession, result: dict[str, Any]) -> None:
        if "modes" in result:
            self.note_v1("its session/new result carries v1 modes")
            entry.translator = AgentV1Translator()

    async def reattach(self, entry: AgentSession) -> dict[str, Any]:
        self.require("resume", "session/resume")
        params: dict[str, Any] = {"sessionId": entry.session_id, "cwd": entry.cwd}
        if entry.mcp_servers:
            params["mcpServers"] = entry.mcp_servers
        result = await self.conn.request("session/resume", params, deadline=True)
        return result if isinstance(result, dict) else {}

    async def prompt(self, entry: AgentSession, blocks: Sequence[dict[str, Any]]) -> PromptAck:
        def on_reply(result: Any, error: RpcError | None) -> None:
            if error is None and isinstance(result, dict) and "stopReason" in result:
                # A v1 habit: the answer came at the end of the turn.
                self.note_v1("it answered session/prompt with a stopReason")
                if entry.state != "idle":
                    entry.deliver(
                        {
                            "sessionUpdate": "state_update",
                            "state": "idle",
                            "stopReason": result["stopReason"],
                        }
                    )

        result = await self.conn.request(
            "session/prompt",
            {"sessionId": entry.session_id, "prompt": list(blocks)},
            on_reply=on_reply,
        )
        message_id = result.get("messageId") if isinstance(result, dict) else None
        return PromptAck(message_id if isinstance(message_id, str) else None)

    async def set_config_option(
        self, entry: AgentSession, config_id: str, kind: str, value: Any
    ) -> list[dict[str, Any]]:
        params = {
            "sessionId": entry.session_id,
            "configId": config_id,
            "type": kind,
            "value": value,
        }
        result = await self.conn.request("session/set_config_option", params, deadline=True)
        return dicts(result.get("configOptions") if isinstance(result, dict) else None)

    def updates(self, entry: AgentSession, update: dict[str, Any]) -> list[dict[str, Any]]:
        # A removed v2 name, or a chunk without a message id, is a v1 habit (and never valid
        # v2): translated. Anything else is checked as the session's fold will check it; a
        # plain text chunk, the most common update, is valid by its shape.
        if is_plain_chunk(update):
            return [update]
        variant = update["sessionUpdate"]
        if variant in REMOVED_VARIANTS or (variant in CHUNKS and update.get("messageId") is None):
            self.note_v1(f"it sent a v1 {variant} update")
            if entry.translator is None:
                entry.translator = AgentV1Translator()
            try:
                return entry.translator.update(update)
            except InvalidParams as exc:
                problem = exc
        else:
            try:
                check_update(update)
                return [update]
            except InvalidParams as exc:
                problem = exc
        logger.warning("! agent %s: malformed %s update dropped: %s", self.name, variant, problem)
        return []

    def permission_request(self, params: dict[str, Any]) -> dict[str, Any]:
        if "toolCall" in params and "title" not in params:
            self.note_v1("it sent a v1 permission request")
            try:
                return permission_request_v1_to_v2(params)
            except InvalidParams as exc:
                raise refusal(self.name, exc) from None
        options = params.get("options")
        if not isinstance(params.get("title"), str) or not (
            isinstance(options, list)
            and options
            and all(isinstance(o, dict) and isinstance(o.get("optionId"), str) for o in options)
        ):
            raise AgentError(invalid_params("a permission request needs a title and options"))
        return dict(params)

    def exit_updates(self, entry: AgentSession, error: RpcError) -> list[dict[str, Any]]:
        # A v1 turn ends through its failed prompt request; a v2 turn has no request left.
        if entry.state not in _BUSY_STATES:
            return []
        return [
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "_meta": {"acp-hub": {"error": error.to_dict()}},
            }
        ]
