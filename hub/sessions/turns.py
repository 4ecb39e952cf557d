"""Turns: the prompt turn in progress, the prompt queue, and the prompt policies.

Theory of operation
-------------------
A driver's prompt is started, queued or refused by ``arbiter.prompt_action`` under the
session's prompt policy (``queue``, ``reject``, ``lease``; see ``docs/arbitration.md``). A
started prompt is a ``Turn`` until the agent reports ``idle`` (or dies): while it runs the
session is busy, and the next queued prompt starts, in a hub task, when it ends.

A user message is attributed to the client whose prompt it is with a ``_hub_prompt`` update
only when it says what that client sent (``hub.protocol.display.matches_prompt``): the
message the agent's answer names, or else the first user message of the turn that does. Any
other user message stays the agent's (clients show it as such), and once a message is
attributed, an update that would make it say something else is refused (dropped, one log
line): the agent cannot put words in a person's mouth. v2 clients are answered when the prompt
is accepted (started, or queued); v1 clients when the turn their prompt started ended, with
its stop reason.

A v2 answer always names the user message (``messageId``; ACP v2's ``PromptResponse``
requires it). A queued prompt is answered before the agent has seen it, so the hub mints the
id when it queues the prompt; when the turn starts, the id the agent gives that user message is
an alias of the minted one, and every update of it reaches the clients (and the log) under the
minted id.

Whatever fails while a turn starts (the agent refuses, is unavailable, the request is
cancelled, or a bug of ours) releases the turn and answers the sender with an error: the
session stays usable.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio

from hub.protocol.display import extends_prompt, matches_prompt
from hub.protocol.errors import (
    AGENT_UNAVAILABLE,
    NOT_LEASE_HOLDER,
    QUEUE_FULL,
    REQUEST_CANCELLED,
    SESSION_BUSY,
    RpcError,
    RpcFailure,
    hub_error,
    internal_error,
    invalid_params,
)
from hub.protocol.prompts import stop_reason_for_v1
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure

if TYPE_CHECKING:
    from hub.sessions.host import Host

log = logging.getLogger("hub.sessions")

USER_MESSAGE_VARIANTS: Final = frozenset({"user_message", "user_message_chunk"})


def now_iso() -> str:
    """The current UTC time as ISO 8601 to the second (``2026-01-31T12:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


ATTRIBUTION_WAIT = 5.0
"""How long a v2 prompt answer waits for the agent's user message when the agent accepted
the prompt without naming it (seconds)."""


@dataclass(slots=True)
class QueuedPrompt:
    """A prompt waiting for the agent to become idle."""

    queue_id: str
    client: ClientHandle
    blocks: list[Any]
    queued_at: str
    message_id: str | None = None
    """The id the hub minted for the user message this prompt becomes (v2 senders)."""
    started: anyio.Event = field(default_factory=anyio.Event)
    result: dict[str, Any] | None = None
    error: RpcError | None = None
    withdrawn: bool = False


@dataclass(slots=True)
class Turn:
    """The prompt turn in progress: who started it, and who waits for its stop reason."""

    client: ClientHandle | None
    blocks: list[Any] = field(default_factory=list)
    """The prompt as the hub forwarded it: what the turn's user message must say."""
    attributed: bool = False
    ended: anyio.Event = field(default_factory=anyio.Event)
    stop_reason: str | None = None
    error: RpcError | None = None
    cancelling: bool = False
    """A ``session/cancel`` for this turn went to the agent (it goes once)."""
    message_id: str | None = None
    """The id of the user message this turn's prompt became (from the agent's answer or its
    first user message, or minted by the hub when the prompt was queued)."""
    minted: str | None = None
    """The id the hub minted when the prompt was queued: the agent's id becomes its alias."""
    id_known: anyio.Event = field(default_factory=anyio.Event)
    started: float = field(default_factory=time.monotonic)
    """When the hub took the prompt to the agent (``time.monotonic``), for the metrics."""
    accepting: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    """Around the wait for the agent to accept the prompt: cancelled when the hub ends the
    turn itself (``Turns.cancel``'s deadline)."""


class Turns:
    """The turn and the prompt queue of one session; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self.current: Turn | None = None
        self.queue: list[QueuedPrompt] = []
        self.aliases: dict[str, str] = {}
        """User message ids the agent gave to prompts the hub had named when it queued them:
        the agent's id -> the hub's."""
        self._watching = False  # a cancel deadline runs for a turn the hub did not start

    @property
    def busy(self) -> bool:
        """A turn runs (the hub started one, or the agent says it is not idle)."""
        return self.current is not None or self._session.state.foreground != "idle"

    def started_by(self, client_id: str) -> bool:
        """Whether the turn in progress is ``client_id``'s prompt."""
        turn = self.current
        return turn is not None and turn.client is not None and turn.client.client_id == client_id

    # -- prompts -----------------------------------------------------------------------------

    async def prompt(self, client: ClientHandle, blocks: Any) -> dict[str, Any]:
        """``Session.prompt``: arbitrate, then start, queue or refuse."""
        session = self._session
        session.require(client, "driver", "session/prompt")
        if not isinstance(blocks, list) or not blocks:
            raise SessionFailure(
                invalid_params("prompt must be a non-empty array of content blocks")
            )
        lease = session.lease
        if session.prompt_policy == "lease":
            lease.expire()
        holder = lease.holder
        action = arbiter.prompt_action(
            session.prompt_policy,
            busy=self.busy,
            queued=bool(self.queue),
            holds_lease=lease.held_by(client.client_id),
        )
        if action == "not_holder":
            raise SessionFailure(
                hub_error(
                    NOT_LEASE_HOLDER,
                    "This session uses the lease policy and you do not hold the lease",
                    {"holder": None if holder is None else holder.client_id},
                )
            )
        if session.prompt_policy == "lease":
            lease.touch()  # a prompt from the holder is activity
        if action == "queue":
            return await self._queue_prompt(client, blocks)
        if action == "busy":
            raise SessionFailure(
                hub_error(
                    SESSION_BUSY,
                    "The agent is busy with another prompt; try again when it is idle",
                )
            )
        return await self._start(client, blocks)

    async def _start(
        self, client: ClientHandle, blocks: list[Any], minted: str | None = None
    ) -> dict[str, Any]:
        session = self._session
        turn = Turn(client, blocks=list(blocks), minted=minted)
        self.current = turn
        session.changed()
        try:
            with turn.accepting:
                ack = await session.agent.prompt(session.agent_session_id, blocks)
        except BaseException as exc:
            # Whatever went wrong, the turn must not outlive its start: the next prompt
            # would queue behind it for good.
            self._abandon(turn)
            if isinstance(exc, RpcFailure):
                raise SessionFailure(exc.error) from exc
            if isinstance(exc, Exception):
                log.exception("! %s: the prompt could not be sent to the agent", session.id)
                raise SessionFailure(internal_error("the prompt could not be sent")) from exc
            raise  # cancelled: the sender is gone or withdrew the request
        if turn.accepting.cancelled_caught:
            # The hub ended the turn (cancel deadline) before the agent even accepted it.
            raise SessionFailure(turn.error or hub_error(AGENT_UNAVAILABLE, "turn ended"))
        if ack.message_id is not None and turn.message_id is None:
            named = self._name(turn, ack.message_id)
            message = session.state.message(named)
            if message is not None and matches_prompt(message["content"], turn.blocks):
                self._attribute(turn, client)
        if client.version >= 2:
            if turn.message_id is None:
                # The agent accepted with `{}`: its first user message names the prompt.
                with anyio.move_on_after(ATTRIBUTION_WAIT):
                    await turn.id_known.wait()
            meta: dict[str, Any] = {"queued": False}
            result: dict[str, Any] = {"_meta": {"acp-hub": meta}}
            if turn.message_id is not None:
                meta["messageId"] = turn.message_id
                # v2 clients (the TypeScript SDK's among them) expect the user message's id
                # at the top level of the prompt answer, as v2 agents give it.
                result["messageId"] = turn.message_id
            return result
        await turn.ended.wait()
        if turn.error is not None and turn.stop_reason is None:
            raise SessionFailure(turn.error)
        # The v1 enum is closed: a v2 agent's other stop reasons read as `end_turn`.
        return {"stopReason": stop_reason_for_v1(turn.stop_reason or "end_turn")}

    def _abandon(self, turn: Turn) -> None:
        """The turn could not start: release it and wake whoever waits for it."""
        turn.id_known.set()
        turn.ended.set()
        if self.current is turn:
            self.current = None
        self._session.changed()
        self.pump()

    def on_user_message(self, update: dict[str, Any]) -> bool:
        """Emit a user message ``update`` (under the hub's id when it has an alias) and return
        ``True``: attributed to the turn's sender when it says what the sender sent, refused
        when it would change what an attributed message says. ``False`` for every other
        update, left to the caller."""
        variant = update.get("sessionUpdate")
        if variant not in USER_MESSAGE_VARIANTS:
            return False
        message_id = update.get("messageId")
        if not isinstance(message_id, str):
            return False
        session = self._session
        message_id = self.aliases.get(message_id, message_id)
        turn = self.current
        sender = None if turn is None else turn.client
        if (
            turn is not None
            and sender is not None
            and turn.message_id is None
            and self._says_prompt(variant, message_id, update, turn)
        ):
            message_id = self._name(turn, message_id)
        if message_id != update["messageId"]:
            update = {**update, "messageId": message_id}
        ours = turn is not None and sender is not None and message_id == turn.message_id
        if session.state.prompt(message_id) is not None:
            keeps = (
                ours and turn is not None and self._says_prompt(variant, message_id, update, turn)
            )
            if not keeps and not self._unchanged(variant, message_id, update):
                log.warning(
                    "! %s: refused the agent's change to user message %s (a person's words)",
                    session.id,
                    message_id,
                )
                return True
        elif (
            ours
            and turn is not None
            and sender is not None
            and not turn.attributed
            and self._says_prompt(variant, message_id, update, turn)
        ):
            self._attribute(turn, sender)
        if not ours or sender is None:
            session.emit(update)
            return True
        # The prompt's own user message: a v1 sender rendered it already.
        session.emit(update, origin=sender.client_id)
        return True

    def _content_after(self, variant: Any, message_id: str, update: dict[str, Any]) -> list[Any]:
        """What user message ``message_id`` would say after ``update``."""
        message = self._session.state.message(message_id)
        before = [] if message is None else list(message["content"])
        if variant != "user_message":
            return [*before, update.get("content")]
        if "content" not in update:
            return before
        content = update["content"]
        return list(content) if isinstance(content, list) else []

    def _says_prompt(
        self, variant: Any, message_id: str, update: dict[str, Any], turn: Turn
    ) -> bool:
        """Whether user message ``message_id`` after ``update`` says the turn's prompt (a
        whole message) or its start (a chunk of a message being streamed)."""
        content = self._content_after(variant, message_id, update)
        if variant == "user_message":
            return matches_prompt(content, turn.blocks)
        return extends_prompt(content, turn.blocks)

    def _unchanged(self, variant: Any, message_id: str, update: dict[str, Any]) -> bool:
        """Whether ``update`` leaves what user message ``message_id`` says as it is."""
        message = self._session.state.message(message_id)
        before = [] if message is None else list(message["content"])
        return matches_prompt(self._content_after(variant, message_id, update), before)

    def _name(self, turn: Turn, message_id: str) -> str:
        """The agent named the turn's user message ``message_id`` (its answer, or the first
        user message saying the prompt): record it, under the id the hub minted if it did."""
        if turn.minted is not None:
            self.aliases[message_id] = turn.minted
            message_id = turn.minted
        turn.message_id = message_id
        turn.id_known.set()
        return message_id

    def _attribute(self, turn: Turn, client: ClientHandle) -> None:
        """Record (``_hub_prompt``) that the turn's user message is ``client``'s."""
        assert turn.message_id is not None
        turn.attributed = True
        self._session.emit(
            {
                "sessionUpdate": "_hub_prompt",
                "messageId": turn.message_id,
                "clientId": client.client_id,
                "name": client.name,
                "role": self._session.role_of(client),
                "principal": client.principal,
                "at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            }
        )

    def ended(self, stop_reason: Any, error: RpcError | None) -> None:
        """The agent is idle again (``stop_reason``), or gone (``error``): the turn ends, its
        pending permission requests resolve ``cancelled``, the next queued prompt starts."""
        turn = self.current
        if turn is None:
            return
        session = self._session
        # An idle state ends the turn for arbitration even without a stop reason (agents may
        # stop at any point); a v1 client waiting for its stop reason then gets `end_turn`.
        turn.stop_reason = stop_reason if isinstance(stop_reason, str) else None
        turn.error = error
        turn.ended.set()
        turn.id_known.set()  # nobody waits for an id that will not come
        self.current = None
        session.metrics.turn_seconds.observe(time.monotonic() - turn.started)
        session.permissions.cancel_all()
        session.elicitations.cancel_waiting()
        if turn.client is not None and session.lease.held_by(turn.client.client_id):
            session.lease.touch()  # inactivity counts from the end of the holder's turn
        session.changed()
        self.pump()

    # -- the queue ---------------------------------------------------------------------------

    async def _queue_prompt(self, client: ClientHandle, blocks: list[Any]) -> dict[str, Any]:
        session = self._session
        waiting = [e for e in self.queue if not e.withdrawn]
        if len(waiting) >= session.settings.max_queued_prompts:
            raise SessionFailure(hub_error(QUEUE_FULL, "The prompt queue of this session is full"))
        entry = QueuedPrompt(session.mint("q"), client, blocks, now_iso())
        if client.version >= 2:
            entry.message_id = f"hub-{secrets.token_hex(8)}"
        self.queue.append(entry)
        self._queue_changed()
        if entry.message_id is not None:
            # Acknowledged on acceptance into the queue, under the id the user message will
            # have; the turn starts when the agent is idle.
            self.pump()
            meta = {"queued": True, "queueId": entry.queue_id, "messageId": entry.message_id}
            return {"messageId": entry.message_id, "_meta": {"acp-hub": meta}}
        self.pump()
        try:
            await entry.started.wait()
        finally:
            if not entry.started.is_set() and entry in self.queue:
                # The v1 client cancelled its prompt ($/cancel_request) or went away.
                self._withdraw(entry)
        if entry.error is not None:
            raise SessionFailure(entry.error)
        return entry.result or {"stopReason": "end_turn"}

    def _queue_changed(self) -> None:
        entries = [
            {
                "queueId": e.queue_id,
                "clientId": e.client.client_id,
                "name": e.client.name,
                "principal": e.client.principal,
                "preview": _preview(e.blocks),
                "queuedAt": e.queued_at,
            }
            for e in self.queue
            if not e.withdrawn
        ]
        self._session.emit({"sessionUpdate": "_hub_queue", "entries": entries})

    def withdraw(self, client: ClientHandle, queue_id: str) -> None:
        """``Session.withdraw_prompt``."""
        session = self._session
        session.require(client, "driver", "_hub/queue/withdraw")
        for entry in self.queue:
            if entry.queue_id == queue_id and not entry.withdrawn:
                if entry.client.client_id != client.client_id:
                    session.require(client, "owner", "withdrawing another client's prompt")
                self._withdraw(entry)
                return
        raise SessionFailure(invalid_params(f"no queued prompt {queue_id!r}"))

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: its queued prompts are withdrawn."""
        for entry in self.queue:
            if entry.client.client_id == client.client_id and not entry.withdrawn:
                self._withdraw(entry)

    def _withdraw(self, entry: QueuedPrompt) -> None:
        entry.withdrawn = True
        entry.error = RpcError(REQUEST_CANCELLED, "The queued prompt was withdrawn")
        entry.started.set()
        self.queue = [e for e in self.queue if not e.withdrawn]
        self._queue_changed()

    def pump(self) -> None:
        """Start the head of the queue in a hub task when the agent is idle."""
        if self.busy or not self.queue:
            return
        self._session.run_later(self.run_next_queued, "queue")

    async def run_next_queued(self) -> None:
        """Start the head of the queue (in a hub task, see ``pump``)."""
        if self.busy or not self.queue:
            return
        entry = self.queue.pop(0)
        self._queue_changed()
        if entry.withdrawn:
            self.pump()
            return
        try:
            result = await self._start(entry.client, entry.blocks, entry.message_id)
        except SessionFailure as exc:
            entry.error = exc.error
        else:
            entry.result = result
        entry.started.set()

    # -- cancel ------------------------------------------------------------------------------

    async def cancel(self, client: ClientHandle) -> None:
        """``Session.cancel``."""
        session = self._session
        session.require(client, "driver", "session/cancel")
        turn = self.current
        if turn is None and session.state.foreground == "idle":
            return
        if turn is not None:
            if turn.cancelling:
                return  # another driver's cancel of this turn already went to the agent
            turn.cancelling = True
        elif self._watching:
            return  # a cancel of the agent's own turn is on its way already
        else:
            self._watching = True
        # The hub does not depend on the agent being polite: a turn still running
        # `agent_response_timeout` after the cancel is ended by the hub (see `_end_unanswered`).
        if not session.run_later(partial(self._end_unanswered, turn), "cancel deadline"):
            self._watching = False
        # The agent is told first, then its pending permission requests are answered
        # `cancelled` (the order ACP asks of a client), so that the turn ends `cancelled`.
        try:
            await session.agent.cancel(session.agent_session_id)
        finally:
            session.permissions.cancel_all()
            session.elicitations.cancel_waiting()

    async def _end_unanswered(self, turn: Turn | None) -> None:
        """After ``session/cancel``: if the turn (``turn``, or with ``None`` the agent's own
        non-idle state) has not ended within ``agent_response_timeout``, the hub ends it:
        every client sees ``idle`` with stop reason ``cancelled`` and the error in
        ``_meta["acp-hub"].error``, and the next queued prompt may start."""
        session = self._session
        limit = session.settings.agent_response_timeout
        try:
            if not limit:
                return
            with anyio.move_on_after(limit):
                if turn is not None:
                    await turn.ended.wait()
                else:
                    await anyio.sleep_forever()
        finally:
            if turn is None:
                self._watching = False
        if turn is not None and turn.ended.is_set():
            return
        if turn is None and (self.current is not None or session.state.foreground == "idle"):
            return
        name = session.agent.name
        error = hub_error(
            AGENT_UNAVAILABLE,
            f"Agent '{name}' did not end the turn within {limit:g}s of session/cancel",
            {"agent": name, "timeout": limit},
        )
        log.warning(
            "! %s: agent %s ignored session/cancel for %gs: turn ended", session.id, name, limit
        )
        session.emit(
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "cancelled",
                "_meta": {"acp-hub": {"error": error.to_dict()}},
            }
        )
        if turn is not None:
            turn.accepting.cancel()
            self.ended("cancelled", error)


def _preview(blocks: list[Any], limit: int = 120) -> str:
    for block in blocks:
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            text: str = block["text"]
            return text if len(text) <= limit else text[: limit - 1] + "\u2026"
    return "(non-text prompt)"
