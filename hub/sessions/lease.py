"""The prompt lease of a session: who holds it, and when it expires.

Theory of operation
-------------------
Under the ``lease`` prompt policy only the holder may prompt (and, under the ``lease``
permission policy, answer permission requests with owners). A driver requests it, the holder
releases it, an owner grants or revokes it; every change is a ``_hub_lease`` update. The lease
lapses after ``lease_timeout`` seconds without activity from its holder: its prompts renew it,
its running turn counts as activity and the turn's end starts the clock again.

Expiry lives here: while someone holds the lease, a watch task (run by the session's spawner)
sleeps until the lease would lapse and takes it away then; the watch ends when the lease is
released, and the lease never outlives the holder's attachment (detaching releases it). Without
a spawner, expiry is still checked whenever a prompt or a lease request looks at the lease.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import anyio

from hub.protocol.errors import NOT_LEASE_HOLDER, forbidden, hub_error, invalid_params
from hub.sessions import arbiter
from hub.sessions.client import ClientHandle
from hub.sessions.errors import SessionFailure

if TYPE_CHECKING:
    from hub.sessions.host import Host

log = logging.getLogger("hub.sessions")

MIN_WATCH_DELAY = 0.01
"""The watch never sleeps less than this (seconds): no busy loop on a lease about to lapse."""


class Lease:
    """The prompt lease of one session; see the module docstring."""

    def __init__(self, session: Host) -> None:
        self._session = session
        self.holder: ClientHandle | None = None
        self.expires: float = 0.0
        """``time.monotonic()`` when the lease lapses unless renewed."""
        self._watch: anyio.CancelScope | None = None

    def held_by(self, client_id: str) -> bool:
        return self.holder is not None and self.holder.client_id == client_id

    def expire(self) -> float | None:
        """Take the lease from a holder inactive for ``lease_timeout`` seconds.

        Returns the seconds after which to call again, or ``None`` when nobody holds the
        lease. The holder's running turn counts as activity; its end starts the clock again.
        """
        holder = self.holder
        if holder is None:
            return None
        timeout = self._session.settings.lease_timeout
        if self._session.turns.started_by(holder.client_id):
            return timeout
        left = self.expires - time.monotonic()
        if left > 0:
            return left
        log.info(
            "= %s: the lease of %s expired",
            self._session.id,
            holder.client_id,
            extra={"connection": holder.client_id},
        )
        self._set(None, reason="expired")
        return None

    def touch(self) -> None:
        """The holder was active: the lease runs for ``lease_timeout`` from now."""
        if self.holder is not None:
            self._set(self.holder, reason="renewed")

    def forget_client(self, client: ClientHandle, reason: str) -> None:
        """``client`` detached: the lease it held is released (``reason``)."""
        if self.held_by(client.client_id):
            self._set(None, reason=reason)

    def act(self, client: ClientHandle, action: str, target: str | None) -> dict[str, Any]:
        """``Session.lease_action``."""
        session = self._session
        self.expire()
        if action == "request":
            session.require(client, "driver", "_hub/lease/request")
            if self.holder is not None and self.holder.client_id != client.client_id:
                raise SessionFailure(
                    hub_error(
                        NOT_LEASE_HOLDER,
                        "Another client holds the lease",
                        {"holder": self.holder.client_id},
                    )
                )
            self._set(client, reason="requested")
        elif action == "release":
            session.require(client, "driver", "_hub/lease/release")
            holder = self.holder
            if holder is not None:
                if holder.client_id != client.client_id and not session.may(client, "owner"):
                    raise SessionFailure(
                        hub_error(
                            NOT_LEASE_HOLDER,
                            "Only the lease holder or an owner can release the lease",
                            {"holder": holder.client_id},
                        )
                    )
                self._set(None, reason="released")
        elif action == "grant":
            session.require(client, "owner", "_hub/lease/grant")
            if target is None:
                self._set(None, reason="revoked")
            else:
                attachment = session.attached.get(target)
                if attachment is None:
                    raise SessionFailure(invalid_params(f"client {target!r} is not attached"))
                if not arbiter.allows(attachment.role, "driver"):
                    raise SessionFailure(forbidden("driver", attachment.role, "holding the lease"))
                self._set(attachment.client, reason="granted")
        else:
            raise SessionFailure(invalid_params(f"unknown lease action {action!r}"))
        holder = self.holder
        return {"holder": None if holder is None else holder.client_id}

    def _set(self, holder: ClientHandle | None, *, reason: str) -> None:
        session = self._session
        previous = self.holder
        self.holder = holder
        timeout = session.settings.lease_timeout
        self.expires = time.monotonic() + timeout
        payload: dict[str, Any] = {"sessionUpdate": "_hub_lease", "holder": None, "reason": reason}
        if holder is not None:
            payload["holder"] = {
                "clientId": holder.client_id,
                "name": holder.name,
                "principal": holder.principal,
            }
            payload["expiresAt"] = time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + timeout)
            )
        session.emit(payload)
        if holder is None:
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None
        elif self._watch is None:
            self._start_watch()
        same = (previous is None) == (holder is None) and (
            previous is None or holder is None or previous.client_id == holder.client_id
        )
        if not same and session.permission_policy == "lease":
            session.permissions.reoffer()

    def _start_watch(self) -> None:
        scope = anyio.CancelScope()

        async def watch() -> None:
            with scope:
                try:
                    while True:
                        delay = self.expire()
                        if delay is None:
                            return
                        await anyio.sleep(max(delay, MIN_WATCH_DELAY))
                finally:
                    if self._watch is scope:
                        self._watch = None

        if self._session.run_later(watch, "lease"):
            self._watch = scope
