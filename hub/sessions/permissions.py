"""Permission requests: routed to every client allowed to answer, the first valid answer wins.

Theory of operation
-------------------
An agent's ``session/request_permission`` becomes a pending ``_hub_permission`` record and a
copy of the request (a hub->client request of its own) for every attached client that may
answer it under the session's permission policy (``arbiter.may_answer``: ``first``, ``owner``,
``lease``). The first valid answer resolves it: the agent gets the outcome, every other copy is
withdrawn (``$/cancel_request``) and the record becomes ``resolved`` with who answered.

Two policies look at principals (the credential behind a connection, not its name):
``designated`` offers the request only to the principal who sent the running turn's prompt
(every client of that principal), and to owners once no client of that principal is attached;
``consensus`` needs ``consensus_quorum`` distinct principals to allow, and any reject (a
``reject_*`` option, or a ``cancelled`` answer) rejects at once; an option of another kind,
an unknown one included, may allow and so counts toward the quorum. Each allow is recorded on
the pending record (``approvals``, ``needed``) as a ``_hub_permission`` update every client
sees; a principal that allowed is not asked again (its other clients' copies are withdrawn).

An answer from a client no longer eligible, or a malformed one, is refused with
``_hub/answer_refused`` (a malformed answer's sender gets a fresh copy to answer again); a
client that answers its copy with an error declined it and is not asked again. Every pending
request resolves ``cancelled`` when the turn ends, is cancelled or the agent dies, and one
nobody answers within ``permission_timeout`` resolves ``timed_out``. Clients that become
eligible (a lease or policy change, a late joiner) get a copy of what is pending.

A request nobody attached may answer any more (its answerers disconnected: a page reload, a
phone locking its screen, a node lost) waits for them: for ``answer_grace`` seconds it stays
pending, marked ``waiting: {reason: "no_answerer", until}`` on its record, and the first
eligible client to attach again (any transport, any node) gets the same request and may answer
it; votes already cast under ``consensus`` are kept. When the grace ends with nobody eligible,
it resolves ``cancelled`` with ``reason: "no_answerer"``. Eligible clients that are attached
and declined it (an error answer, a copy they cannot be shown) decide at once: ``cancelled``.
``answer_grace = 0`` cancels at once, as the hub did before the grace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from hub.protocol.errors import (
    STALE_ANSWER,
    InvalidParams,
    PeerError,
    RpcError,
    forbidden,
    hub_error,
    invalid_params,
)
from hub.protocol.permissions import (
    option_kind,
    permission_outcome_for_agent,
    permission_request_v2_to_v1,
)
from hub.sessions import arbiter, rules
from hub.sessions.client import ClientHandle
from hub.sessions.grace import answered_in_grace
from hub.sessions.metrics import PERMISSION_OUTCOMES

if TYPE_CHECKING:
    from hub.sessions.core import Attachment
    from hub.sessions.host import Host

log = logging.getLogger("hub.sessions")

NO_ANSWERER = "no_answerer"
"""Why a request waits (``waiting.reason``) and why it ended after its grace (``reason``):
nobody attached may answer it."""


@dataclass(slots=True)
class PendingPermission:
    """An agent permission request being offered to the clients that may answer it."""

    permission_id: str
    params: dict[str, Any]
    options: list[Any]
    copies: dict[str, Any] = field(default_factory=dict)  # client id -> request id it got
    declined: set[str] = field(default_factory=set)
    """Clients that answered their copy with an error (or cannot be shown it): not re-offered."""
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | None = None
    resolved_by: ClientHandle | None = None
    received: float = field(default_factory=time.monotonic)
    """When the request reached the hub (``time.monotonic``), for the metrics."""
    approvals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Under ``consensus``: the principals that allowed so far (principal -> record)."""
    refused: set[str] = field(default_factory=set)
    """Clients that answered their copy with an error or cannot be shown it (a subset of
    ``declined``): their refusal, unlike their absence, ends the request at once."""
    orphaned: float | None = None
    """Since when (``time.monotonic``) nobody attached may answer, while ``answer_grace``
    runs; ``None`` while someone may."""
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set when the request resolves or its grace starts or ends (``Permissions.request``
    waits on it)."""


class Permissions:
    """The pending permission requests of one session; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self.pending: dict[str, PendingPermission] = {}

    def __len__(self) -> int:
        return len(self.pending)

    def eligible(self, attachment: Attachment) -> bool:
        """Whether ``attachment``'s client may answer under the current policy and lease."""
        session = self._session
        if session.permission_policy == "designated":
            designated = self.designated()
            if designated is None:
                return arbiter.allows(attachment.role, "owner")
            return attachment.client.principal == designated and arbiter.allows(
                attachment.role, arbiter.ANSWER_ROLE
            )
        holds = session.lease.held_by(attachment.client_id)
        return arbiter.may_answer(session.permission_policy, attachment.role, holds)

    def designated(self) -> str | None:
        """Under ``designated``: the principal who sent the running turn's prompt, while one
        of its clients is attached; ``None`` (owners answer) otherwise."""
        session = self._session
        turn = session.turns.current
        sender = turn.client if turn is not None else None
        if sender is None:
            return None
        principal = sender.principal
        if any(a.client.principal == principal for a in session.attached.values()):
            return principal
        return None

    def _wanted(self, pending: PendingPermission, attachment: Attachment) -> bool:
        """Whether ``attachment``'s client should hold a copy of ``pending``: eligible, and
        (``consensus``) its principal has not allowed it yet."""
        return attachment.client.principal not in pending.approvals and self.eligible(attachment)

    async def request(self, params: dict[str, Any]) -> dict[str, Any]:
        """``SessionSink.on_permission``: offer the request, wait for the first valid answer
        (or ``cancelled`` / ``timed_out``) and return the v2 outcome for the agent."""
        session = self._session
        options = params.get("options")
        if not isinstance(options, list) or not options:
            raise InvalidParams("session/request_permission needs a non-empty options array")
        permission_id = session.mint("perm")
        request = {k: v for k, v in params.items() if k != "sessionId"}
        pending = PendingPermission(permission_id, request, options)
        self.pending[permission_id] = pending
        subject = request.get("subject")
        tool = subject.get("toolCall") if isinstance(subject, dict) else None
        if (
            isinstance(tool, dict)
            and isinstance(tool.get("toolCallId"), str)
            and session.state.tool_call(tool["toolCallId"]) is None
        ):
            # A tool call first seen in the request: the permission record does not fold into
            # the tool calls (see hub.protocol.state), so it is upserted as its own update.
            session.emit({**tool, "sessionUpdate": "tool_call_update"})
        answered = rules.first_match(rules.all_rules(session), request, session.cwd)
        record = {
            "sessionUpdate": "_hub_permission",
            "permissionId": permission_id,
            "status": "pending",
            "request": request,
        }
        if answered is None:
            session.emit(record)
        else:
            # Logged like any request, but nobody is told it waits: a rule answers it now.
            tell, session.notice = session.notice, None
            try:
                session.emit(record)
            finally:
                session.notice = tell
        if answered is not None:  # a rule answers it, visibly (hub.sessions.rules)
            rule, option_id = answered
            outcome = {"outcome": "selected", "optionId": option_id}
            self.finish(pending, None, "resolved", outcome, rule=rule)
            return pending.outcome or outcome
        for attachment in tuple(session.attached.values()):
            if self.eligible(attachment):
                self._offer(pending, attachment.client)
        session.changed()
        self.check_unanswerable()
        try:
            with anyio.move_on_after(session.settings.permission_timeout) as scope:
                await self._wait(pending)
            if scope.cancelled_caught:
                self.finish(pending, None, "timed_out")
        finally:
            if not pending.done.is_set():
                # Cancelled by the agent ($/cancel_request) or because it died.
                self.finish(pending, None, "cancelled")
        return pending.outcome or {"outcome": "cancelled"}

    async def _wait(self, pending: PendingPermission) -> None:
        """Wait until ``pending`` resolves; end it ``cancelled`` (``no_answerer``) when its
        grace runs out with nobody back who may answer it."""
        grace = self._session.settings.answer_grace
        if not await answered_in_grace(pending, grace):
            log.info(
                "= %s: permission %s: nobody came back to answer it in %g s: cancelled",
                self._session.id,
                pending.permission_id,
                grace,
            )
            self.finish(pending, None, "cancelled", reason=NO_ANSWERER)

    def reoffer(self) -> None:
        """After the lease or the permission policy changed: newly eligible clients get a copy
        of each pending request, clients no longer eligible lose theirs."""
        for pending in list(self.pending.values()):
            for attachment in tuple(self._session.attached.values()):
                client_id = attachment.client_id
                eligible = self._wanted(pending, attachment)
                if eligible and client_id not in pending.copies:
                    pending.declined.discard(client_id)
                    self._offer(pending, attachment.client)
                elif not eligible and client_id in pending.copies:
                    attachment.client.withdraw(pending.copies.pop(client_id))
        self.check_unanswerable()

    def offer_pending(self, client: ClientHandle) -> None:
        """A client just attached: offer it what is pending, if it may answer."""
        attachment = self._session.attached.get(client.client_id)
        if attachment is None:
            return
        for pending in self.pending.values():
            if client.client_id not in pending.copies and self._wanted(pending, attachment):
                self._offer(pending, client)
                if pending.copies:
                    self._answerable(pending)  # its grace, if it ran, ends

    def forget_client(self, client: ClientHandle) -> None:
        """``client`` detached: its copies are withdrawn (``check_unanswerable`` next)."""
        for pending in self.pending.values():
            request_id = pending.copies.pop(client.client_id, None)
            if request_id is not None:
                client.withdraw(request_id)

    def cancel_all(self) -> None:
        """Resolve every pending request ``cancelled`` (turn ended or cancelled, agent gone)."""
        for pending in list(self.pending.values()):
            self.finish(pending, None, "cancelled")

    def _offer(self, pending: PendingPermission, client: ClientHandle) -> None:
        session = self._session
        params = {"sessionId": session.id, **pending.params}
        if client.version < 2:
            try:
                # The stored request has no sessionId (each copy names the hub's session id).
                v1_params = permission_request_v2_to_v1(params)
                params = {**v1_params, "sessionId": session.id}
            except PeerError as exc:
                log.warning(
                    "! %s: permission request not representable for v1: %s", session.id, exc
                )
                pending.declined.add(client.client_id)
                pending.refused.add(client.client_id)
                return

        # Which `_hub_permission` record this copy belongs to, so that a client can match
        # the record's resolution to the dialog it shows.
        meta = params.get("_meta")
        hub_meta = {"permissionId": pending.permission_id}
        params["_meta"] = (
            {**meta, "acp-hub": hub_meta} if isinstance(meta, dict) else {"acp-hub": hub_meta}
        )

        def on_reply(result: Any, error: RpcError | None) -> None:
            self._answer(pending, client, result, error)

        pending.copies[client.client_id] = client.request(
            "session/request_permission", params, on_reply
        )

    def _answer(
        self, pending: PendingPermission, client: ClientHandle, result: Any, error: RpcError | None
    ) -> None:
        if pending.done.is_set():
            return
        request_id = pending.copies.pop(client.client_id, None)
        if error is not None:
            # The client declined to answer (or went away): its copy is gone, others remain,
            # and it is not asked again (a client that cannot answer would loop).
            pending.declined.add(client.client_id)
            if client.client_id in self._session.attached:
                pending.refused.add(client.client_id)
            self.check_unanswerable()
            return
        attachment = self._session.attached.get(client.client_id)
        if attachment is None or not self.eligible(attachment):
            self._refuse(
                client,
                request_id,
                forbidden(arbiter.ANSWER_ROLE, client.role, "answering a permission request"),
            )
            return
        try:
            outcome = permission_outcome_for_agent(
                result.get("outcome") if isinstance(result, dict) else None, pending.options
            )
        except PeerError as exc:
            self._refuse(client, request_id, invalid_params(f"refused answer: {exc}"))
            log.warning(
                "! %s: refused a malformed permission answer from %s: %s",
                self._session.id,
                client.client_id,
                exc,
            )
            # The refused client gets a fresh copy at once, so it can answer again.
            self._offer(pending, client)
            self.check_unanswerable()
            return
        if self._session.permission_policy == "consensus" and not self._counted(
            pending, client, request_id, outcome
        ):
            return
        self.finish(pending, client, "resolved", outcome)

    def _counted(
        self,
        pending: PendingPermission,
        client: ClientHandle,
        request_id: Any,
        outcome: dict[str, Any],
    ) -> bool:
        """Under ``consensus``: record ``client``'s answer; ``True`` when it decides (a reject,
        or the allow that reaches the quorum), ``False`` while more principals must allow."""
        session = self._session
        if not _allows(outcome, pending.options):
            return True
        principal = client.principal
        if principal in pending.approvals:
            self._refuse(
                client,
                request_id,
                hub_error(STALE_ANSWER, "This principal has already allowed this request"),
            )
            return False
        pending.approvals[principal] = {
            "principal": principal,
            "name": client.name,
            "optionId": outcome.get("optionId"),
            "optionKind": option_kind(outcome, pending.options),
        }
        if len(pending.approvals) >= session.consensus_quorum:
            return True
        # The principal is not asked again, on any of its clients.
        for attachment in tuple(session.attached.values()):
            if attachment.client.principal == principal:
                pending.declined.add(attachment.client_id)
                copy = pending.copies.pop(attachment.client_id, None)
                if copy is not None:
                    attachment.client.withdraw(copy)
        session.emit(
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": pending.permission_id,
                "status": "pending",
                "approvals": list(pending.approvals.values()),
                "needed": session.consensus_quorum,
            }
        )
        self.check_unanswerable()
        return False

    def _refuse(self, client: ClientHandle, request_id: Any, error: RpcError) -> None:
        client.notify(
            "_hub/answer_refused",
            {"sessionId": self._session.id, "requestId": request_id, "error": error.to_dict()},
        )

    def check_unanswerable(self) -> None:
        """Start the grace of the pending requests nobody attached may answer any more (or
        resolve them ``cancelled`` when those present refused them, or without a grace), and
        end it for those someone may answer again."""
        attached = self._session.attached
        for pending in list(self.pending.values()):
            if not pending.copies:
                # Eligible clients without a copy (a refused answer took it): offer again.
                for attachment in tuple(attached.values()):
                    if attachment.client_id not in pending.declined and self._wanted(
                        pending, attachment
                    ):
                        self._offer(pending, attachment.client)
            if pending.copies:
                self._answerable(pending)
                continue
            refused = any(
                a.client_id in pending.refused and self.eligible(a) for a in attached.values()
            )
            if refused or self._session.settings.answer_grace <= 0:
                self.finish(pending, None, "cancelled")
            elif pending.orphaned is None:
                self._orphaned(pending)

    def _orphaned(self, pending: PendingPermission) -> None:
        """Nobody attached may answer ``pending``: it waits ``answer_grace`` for them."""
        session = self._session
        grace = session.settings.answer_grace
        pending.orphaned = time.monotonic()
        pending.wake.set()
        until = datetime.now(UTC) + timedelta(seconds=grace)
        log.info(
            "= %s: permission %s: nobody attached may answer it; waiting %g s for them",
            session.id,
            pending.permission_id,
            grace,
        )
        session.emit(
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": pending.permission_id,
                "status": "pending",
                "waiting": {
                    "reason": NO_ANSWERER,
                    "until": until.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                },
            }
        )
        session.changed()

    def _answerable(self, pending: PendingPermission) -> None:
        """Someone may answer ``pending`` again: its grace, if it ran, ends."""
        if pending.orphaned is None:
            return
        pending.orphaned = None
        pending.wake.set()
        self._session.emit(
            {
                "sessionUpdate": "_hub_permission",
                "permissionId": pending.permission_id,
                "status": "pending",
                "waiting": None,
            }
        )

    def finish(
        self,
        pending: PendingPermission,
        by: ClientHandle | None,
        status: str,
        outcome: dict[str, Any] | None = None,
        *,
        reason: str | None = None,
        rule: Mapping[str, Any] | None = None,
    ) -> None:
        """Resolve ``pending`` with ``status`` (``resolved`` by ``by`` with ``outcome``,
        ``cancelled``, ``timed_out``): withdraw the copies, record it (with ``reason``, why it
        ended without an answer, when given), wake the agent's task."""
        if pending.done.is_set():
            return
        session = self._session
        pending.outcome = outcome if outcome is not None else {"outcome": "cancelled"}
        pending.resolved_by = by
        pending.done.set()
        pending.wake.set()
        # `selected`, or how it ended without a choice (a client may answer `cancelled`).
        answer = pending.outcome.get("outcome") if status == "resolved" else status
        session.metrics.permission_resolved(
            answer if answer in PERMISSION_OUTCOMES else "cancelled",
            time.monotonic() - pending.received,
        )
        self.pending.pop(pending.permission_id, None)
        for client_id, request_id in list(pending.copies.items()):
            attachment = session.attached.get(client_id)
            if attachment is not None:
                attachment.client.withdraw(request_id)
        pending.copies.clear()
        record: dict[str, Any] = {
            "sessionUpdate": "_hub_permission",
            "permissionId": pending.permission_id,
            "status": status,
            "outcome": pending.outcome,
            "decidedAt": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
        }
        kind = option_kind(pending.outcome, pending.options)
        if kind is not None:
            # What the answer means, whatever the agent named the option.
            record["optionKind"] = kind
        if by is not None:
            record["resolvedBy"] = {
                "clientId": by.client_id,
                "name": by.name,
                "principal": by.principal,
                "role": session.role_of(by),
            }
        if rule is not None:
            by_rule = {"rule": rule.get("ruleId"), "createdBy": rule.get("createdBy")}
            record["by"] = by_rule
            record["resolvedBy"] = {**by_rule, "name": f"rule {rule.get('ruleId')}"}
        if pending.approvals:
            record["approvals"] = list(pending.approvals.values())
        if pending.orphaned is not None:
            record["waiting"] = None
        if reason is not None:
            record["reason"] = reason
        session.emit(record)
        session.audit.record(
            "permission_decided",
            sessionId=session.id,
            permissionId=pending.permission_id,
            status=status,
            outcome=pending.outcome,
            optionKind=kind,
            principal=None if by is None else by.principal,
            rule=None if rule is None else rule.get("ruleId"),
            approvals=list(pending.approvals),
            policy=session.permission_policy,
        )
        session.notify_attached(
            "_hub/permission_resolved",
            {
                "sessionId": session.id,
                "permissionId": pending.permission_id,
                "status": status,
                "outcome": pending.outcome,
                "resolvedBy": record.get("resolvedBy"),
            },
            via_attach=True,
        )
        session.changed()


def _allows(outcome: dict[str, Any], options: list[Any]) -> bool:
    """Whether a v2 outcome may allow: it selects an option that is not a ``reject_*`` (an
    unknown kind may allow, so it needs the quorum too); ``cancelled`` and rejects do not."""
    if outcome.get("outcome") != "selected":
        return False
    return not (option_kind(outcome, options) or "").startswith("reject")
