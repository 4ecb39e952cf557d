"""Elicitations: an agent's ``elicitation/create``, asked of one client.

Theory of operation
-------------------
Unlike a permission request, an elicitation is bound to one client (ACP asks it of the user
who prompted): the sender of the turn in progress when it may answer
(``arbiter.ELICITATION_ROLE``), else the first attached client that may. Its answer
(``accept`` / ``decline`` / ``cancel``) goes to the agent; an error answer, or the client
detaching first, answers ``cancel``. ``elicitation/complete`` is relayed to the client that was
asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from hub.protocol.errors import RpcError
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.notices import Notice, clip

if TYPE_CHECKING:
    from hub.sessions.session import Session


class Elicitations:
    """The elicitations of one session waiting for an answer; see the module docstring."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._targets: dict[str, ClientHandle] = {}
        """The client asked, by elicitation id (for ``elicitation/complete``)."""
        self._asked: dict[str, list[tuple[Any, anyio.Event]]] = {}
        """Elicitations waiting for an answer, by the client asked."""

    async def request(self, params: dict[str, Any]) -> dict[str, Any]:
        """``SessionSink.on_elicitation``: ask one client, return its answer for the agent."""
        session = self._session
        target = self._target()
        if target is None:
            return {"action": "cancel"}
        done = anyio.Event()
        answer: dict[str, Any] = {"action": "cancel"}

        def on_reply(result: Any, error: RpcError | None) -> None:
            if (
                error is None
                and isinstance(result, dict)
                and result.get("action") in ("accept", "decline", "cancel")
            ):
                answer.clear()
                answer.update(result)
            done.set()

        elicitation_id = params.get("elicitationId")
        if isinstance(elicitation_id, str):
            self._targets[elicitation_id] = target
        request_id = target.request(
            "elicitation/create", {**params, "sessionId": session.id}, on_reply
        )
        if session.notice is not None:
            session.notice(
                Notice(
                    "elicitation_waiting",
                    session.id,
                    session.agent.name,
                    session.cwd,
                    {"message": clip(params.get("message")), "mode": clip(params.get("mode"))},
                )
            )
        # Asked of one client: if it detaches, the question is withdrawn and the agent is
        # answered `cancel` (the binding to that client is what ACP asks for).
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
                target.withdraw(request_id)
        return answer

    def _target(self) -> ClientHandle | None:
        session = self._session
        turn = session.turns.current
        if (
            turn is not None
            and turn.client is not None
            and turn.client.client_id in session.attached
            and session.may(turn.client, arbiter.ELICITATION_ROLE)
        ):
            return turn.client
        for attachment in session.attached.values():
            if arbiter.allows(attachment.role, arbiter.ELICITATION_ROLE):
                return attachment.client
        return None

    def complete(self, params: dict[str, Any]) -> None:
        """``SessionSink.on_elicitation_complete``: relay it to the client that was asked."""
        elicitation_id = params.get("elicitationId")
        target = (
            self._targets.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        )
        if target is not None and target.client_id in self._session.attached:
            target.notify("elicitation/complete", params)

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: what it was asked is withdrawn and answered ``cancel``."""
        for request_id, done in list(self._asked.get(client.client_id, ())):
            client.withdraw(request_id)
            done.set()  # answered `cancel`
