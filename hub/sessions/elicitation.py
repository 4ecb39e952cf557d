"""Elicitations: an agent's ``elicitation/create``, asked of one client.

Theory of operation
-------------------
Unlike a permission request, an elicitation is bound to one user (ACP asks it of the user who
prompted): the sender of the turn in progress when it may answer
(``arbiter.ELICITATION_ROLE``), else the first attached client that may. Its answer
(``accept`` / ``decline`` / ``cancel``) goes to the agent; an error answer answers ``cancel``.
``elicitation/complete`` is relayed to the client that was asked.

The binding is to the user, the principal of the client asked, not to its connection: when
that client detaches (a page reload, a phone locking its screen, a node lost), the question
goes to another attached client of the same principal that may answer, else it waits up to
``answer_grace`` seconds for one to attach (any transport, any node) and is asked again of it,
the same question. When the grace ends with nobody back, or the turn ends meanwhile, the agent
is answered ``cancel``; with ``answer_grace = 0`` it is at once, as soon as the client asked
leaves (the hub's behaviour before the grace).

An agent may send ``elicitation/complete`` for a URL elicitation (or never: it is optional), so
the client asked is remembered by elicitation id until then, within bounds: a client that
detaches is forgotten as the one to tell, at most ``MAX_AWAITED_COMPLETIONS``
elicitations per session are remembered (the oldest is forgotten first), and none for longer
than ``COMPLETION_TTL`` seconds; the memory goes with the session. A completion that comes
later is dropped, as ACP lets a client ignore an unknown id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from hub.protocol.errors import RpcError
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.grace import answered_in_grace
from hub.sessions.host import Host, attached_prompter
from hub.sessions.notices import Notice, clip

log = logging.getLogger("hub.sessions")


@dataclass(eq=False, slots=True)
class _Ask:
    """One elicitation waiting for its answer."""

    params: dict[str, Any]
    principal: str
    answer: dict[str, Any] = field(default_factory=lambda: {"action": "cancel"})
    done: anyio.Event = field(default_factory=anyio.Event)
    target: ClientHandle | None = None
    request_id: Any = None
    orphaned: float | None = None
    """Since when (``time.monotonic``) nobody is asked, while ``answer_grace`` runs."""
    wake: anyio.Event = field(default_factory=anyio.Event)


MAX_AWAITED_COMPLETIONS = 64
"""URL elicitations of one session whose ``elicitation/complete`` the hub waits for at most."""
COMPLETION_TTL = 3600.0
"""Seconds an elicitation's ``elicitation/complete`` is waited for at most."""


class Elicitations:
    """The elicitations of one session waiting for an answer; see the module docstring."""

    def __init__(self, session: Host, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._session = session
        self._clock = clock
        self._targets: dict[str, tuple[ClientHandle, float]] = {}
        """The client asked and when, by elicitation id (for ``elicitation/complete``), oldest
        first."""
        self._asked: dict[str, list[_Ask]] = {}
        """Elicitations waiting for an answer, by the client asked."""
        self._waiting: list[_Ask] = []
        """Elicitations whose client left, waiting for one of its principal to come back."""

    async def request(self, params: dict[str, Any]) -> dict[str, Any]:
        """``SessionSink.on_elicitation``: ask one client, return its answer for the agent."""
        target = self._target()
        if target is None:
            return {"action": "cancel"}
        ask = _Ask(params, target.principal)
        self._ask(ask, target)
        session = self._session
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
        grace = self._session.settings.answer_grace
        try:
            if not await answered_in_grace(ask, grace):
                log.info(
                    "= %s: nobody came back to answer an elicitation in %g s: cancel",
                    self._session.id,
                    grace,
                )
        finally:
            self._unbind(ask)
            if ask in self._waiting:
                self._waiting.remove(ask)
        return ask.answer

    def _ask(self, ask: _Ask, target: ClientHandle) -> None:
        """Send ``ask`` to ``target`` (again, after its client left)."""
        session = self._session

        def on_reply(result: Any, error: RpcError | None) -> None:
            if ask.target is not target:
                return  # a copy withdrawn when its client left
            if (
                error is None
                and isinstance(result, dict)
                and result.get("action") in ("accept", "decline", "cancel")
            ):
                ask.answer = dict(result)
            ask.done.set()
            ask.wake.set()

        ask.target = target
        ask.orphaned = None
        elicitation_id = ask.params.get("elicitationId")
        if isinstance(elicitation_id, str):
            self._remember(elicitation_id, target)
        self._asked.setdefault(target.client_id, []).append(ask)
        ask.request_id = target.request(
            "elicitation/create", {**ask.params, "sessionId": session.id}, on_reply
        )

    def _unbind(self, ask: _Ask) -> None:
        """``ask`` is no longer asked of its client (answered, withdrawn, or it left)."""
        target = ask.target
        if target is None:
            return
        ask.target = None
        asked = self._asked.get(target.client_id)
        if asked is not None and ask in asked:
            asked.remove(ask)
            if not asked:
                self._asked.pop(target.client_id, None)
        if not ask.done.is_set():
            target.withdraw(ask.request_id)

    def _target(self) -> ClientHandle | None:
        session = self._session
        prompter = attached_prompter(session)
        if prompter is not None and session.may(prompter, arbiter.ELICITATION_ROLE):
            return prompter
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

    def _of_principal(self, principal: str) -> ClientHandle | None:
        """An attached client of ``principal`` that may answer an elicitation."""
        for attachment in self._session.attached.values():
            if attachment.client.principal == principal and arbiter.allows(
                attachment.role, arbiter.ELICITATION_ROLE
            ):
                return attachment.client
        return None

    def complete(self, params: dict[str, Any]) -> None:
        """``SessionSink.on_elicitation_complete``: relay it to the client that was asked."""
        self._expire()
        elicitation_id = params.get("elicitationId")
        entry = self._targets.pop(elicitation_id, None) if isinstance(elicitation_id, str) else None
        target = entry[0] if entry is not None else None
        if target is not None and target.client_id in self._session.attached:
            target.notify("elicitation/complete", params)

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: what it was asked goes to another client of its principal,
        or waits ``answer_grace`` for one (with no grace, it is answered ``cancel``); no
        ``elicitation/complete`` is kept for it any more."""
        grace = self._session.settings.answer_grace
        for ask in list(self._asked.get(client.client_id, ())):
            self._unbind(ask)
            other = self._of_principal(ask.principal) if grace > 0 else None
            if other is not None:
                self._ask(ask, other)
            elif grace > 0 and self._session.turns.current is not None:
                ask.orphaned = time.monotonic()
                self._waiting.append(ask)
                log.info(
                    "= %s: the client asked an elicitation left; waiting %g s for it",
                    self._session.id,
                    grace,
                )
            else:
                ask.done.set()  # answered `cancel`
            ask.wake.set()
        for elicitation_id in [
            e for e, (target, _) in self._targets.items() if target.client_id == client.client_id
        ]:
            del self._targets[elicitation_id]

    def offer_pending(self, client: ClientHandle) -> None:
        """A client just attached: ask it what waits for its principal."""
        if not self._waiting or not self._session.may(client, arbiter.ELICITATION_ROLE):
            return
        for ask in list(self._waiting):
            if ask.principal == client.principal:
                self._waiting.remove(ask)
                self._ask(ask, client)
                ask.wake.set()

    def cancel_waiting(self) -> None:
        """The turn ended or was cancelled, or the agent is gone: what waits for its client
        to come back is answered ``cancel``."""
        for ask in self._waiting:
            ask.done.set()
            ask.wake.set()
        self._waiting.clear()
