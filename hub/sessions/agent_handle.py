"""``AgentHandle``: what a session needs from the agent its agent session lives on.

``hub.agents.Agent`` satisfies it structurally; the session tests use a small in-process
stand-in. Every operation raises ``AgentError`` (a ``RpcFailure``) with the JSON-RPC error to
pass on when the agent refuses or is unavailable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hub.agents import PromptAck


class AgentHandle(Protocol):
    """One agent, as the sessions on it see it (operations take the agent's session id)."""

    @property
    def name(self) -> str: ...

    async def prompt(self, session_id: str, blocks: Sequence[dict[str, Any]], /) -> PromptAck:
        """Forward a prompt; return when the agent accepted it (see ``hub.agents.Agent``)."""
        ...

    async def cancel(self, session_id: str, /) -> None:
        """``session/cancel`` the turn in progress."""
        ...

    async def set_config_option(
        self, session_id: str, config_id: str, kind: str, value: Any, /
    ) -> list[dict[str, Any]]:
        """Set a config option; returns the agent's full v2 option set."""
        ...

    async def set_mode(self, session_id: str, mode_id: str, /) -> None:
        """v1 ``session/set_mode`` (for agents without a mode config option)."""
        ...

    async def extension(
        self, session_id: str | None, method: str, params: dict[str, Any], /
    ) -> Any:
        """A request the hub does not handle itself, passed to the agent (``sessionId`` set
        to the agent's ``session_id``); returns the agent's result."""

    async def close_session(self, session_id: str, /) -> None: ...

    async def delete_session(self, session_id: str, /) -> None: ...
