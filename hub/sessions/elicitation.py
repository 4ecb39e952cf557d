"""Elicitations: an agent's ``elicitation/create``, asked of one client.

Theory of operation
-------------------
Unlike a permission request, an elicitation is bound to one client (ACP asks it of the user
who prompted): the sender of the turn in progress when it may answer
(``arbiter.ELICITATION_ROLE``), else the first attached client that may. Its answer
(``accept`` / ``decline`` / ``cancel``) goes to the agent; an error answer, or the client
detaching first, answers ``cancel``. ``elicitation/complete`` is relayed to the client that was
asked.

An agent may send ``elicitation/complete`` for a URL elicitation (or never: it is optional), so
the client asked is remembered by elicitation id until then, within bounds: a client that
detaches is forgotten with everything it was asked, at most ``MAX_AWAITED_COMPLETIONS``
elicitations per session are remembered (the oldest is forgotten first), and none for longer
than ``COMPLETION_TTL`` seconds; the memory goes with the session. A completion that comes
later is dropped, as ACP lets a client ignore an unknown id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from hub.protocol.errors import RpcError
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle

if TYPE_CHECKING:
    from hub.sessions.session import Session


MAX_AWAITED_COMPLETIONS = 64
"""URL elicitations of one session whose ``elicitation/complete`` the hub waits for at most."""
COMPLETION_TTL = 3600.0
"""Seconds an elicitation's ``elicitation/complete`` is waited for at most."""


class Elicitations:
    """The elicitations of one session waiting for an answer; see the module docstring."""

    def __init__(self, session: Session, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._session = session
        self._clock = clock
        self._targets: dict[str, tuple[ClientHandle, float]] = {}
        """The client asked and when, by elicitation id (for ``elicitation/complete``), oldest
        first."""
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
            self._remember(elicitation_id, target)
        request_id = target.request(
            "elicitation/create", {**params, "sessionId": session.id}, on_reply
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

    @property
    def awaited(self) -> int:
        """How many elicitations' ``elicitation/complete`` the session still waits for."""
        self._expire()
        return len(self._targets)

    def _remember(self, elicitation_id: str, target: ClientHandle) -> None:
        self._expire()
        self._targets.pop(elicitation_id, None)  # a reused id counts as the newest
        while len(self._targets) >= MAX_AWAITED_COMPLETIONS:
            del self._targets[next(iter(self._targets))]
        self._targets[elicitation_id] = (target, self._clock())

    def _expire(self) -> None:
        oldest = self._clock() - COMPLETION_TTL
        while self._targets:
            first = next(iter(self._targets))
            if self._targets[first][1] > oldest:
                return
            del self._targets[first]

    def complete(self, params: dict[str, Any]) -> None:
        """``SessionSink.on_elicitation_complete``: relay it to the client that was asked."""
        self._expire()
        elicitation_id = params.get("elicitationId")
        entry = self._targets.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        target = entry[0] if entry is not None else None
        if target is not None and target.client_id in self._session.attached:
            target.notify("elicitation/complete", params)

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: what it was asked is withdrawn and answered ``cancel``, and
        no ``elicitation/complete`` is kept for it any more."""
        for request_id, done in list(self._asked.get(client.client_id, ())):
            client.withdraw(request_id)
            done.set()  # answered `cancel`
        for elicitation_id in [
            e for e, (target, _) in self._targets.items() if target.client_id == client.client_id
        ]:
            del self._targets[elicitation_id]
