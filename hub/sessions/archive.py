"""Archived sessions: a session rebuilt from an export (``hub.store.export``), to read only.

Theory of operation
-------------------
``_hub/import`` hands the registry an export's header and events. The registry makes a new
session (a new id: an archive never takes the place of the session it came from) whose agent is
an ``ArchivedAgent``, named ``archive:NAME`` after the original's, which refuses every prompt,
cancel and option change (a lost session's prompts are refused before they reach it, with
``-32043``; the agent's refusal is the second line of defence). The events are emitted in order,
so the archive's log and state are built exactly as a live session's are (seq from 1, frames per
protocol version), before anyone can attach: it is then listed, replayed, resumed from cursors
and shared with links like any session. Last, a ``_hub_agent`` ``lost`` event marks it read-only
for every client; a durable store keeps it as a lost session, which a restart brings back as one
(no agent is ever configured under an ``archive:`` name).

No notice (``hub.sessions.notices``) is raised while the events are replayed: an archive
waits for nobody.
"""

from __future__ import annotations

from typing import Final

from hub.agents.errors import AgentError
from hub.protocol.errors import AGENT_UNAVAILABLE, hub_error
from hub.sessions.restore import UnconfiguredAgent

ARCHIVE_PREFIX: Final = "archive:"


class ArchivedAgent(UnconfiguredAgent):
    """The agent of an archived session: every operation that would reach an agent is
    refused with ``AGENT_UNAVAILABLE`` (``-32042``), saying the session is an archive (the
    refusals of ``UnconfiguredAgent``, with their own reason)."""

    def __init__(self, name: str) -> None:
        super().__init__(name if name.startswith(ARCHIVE_PREFIX) else ARCHIVE_PREFIX + name)

    def _refuse(self) -> AgentError:
        return AgentError(
            hub_error(
                AGENT_UNAVAILABLE,
                "this session is an archive imported from an export: it can be read, never "
                "prompted",
                {"archived": True},
            )
        )
