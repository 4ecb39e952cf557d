"""Admission by numbers: the connection caps, how many clients the hub holds in total, per
remote address, per principal.

``ConnectionCaps.admit`` returns a ``Ticket`` (the connection counts until the ticket is
released) or raises ``Refusal`` naming the cap that was hit (its ``code``) with the HTTP status
to refuse the upgrade with: 503 when the hub is full, 429 when this address or principal holds
too many connections. A cap of ``0`` means no cap. See ``docs/limits.md``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hub.access.principal import Refusal
from hub.protocol.errors import RATE_LIMITED, RpcError, hub_error

__all__ = ["ConnectionCaps", "Ticket", "too_many"]


class Ticket:
    """One admitted connection; ``release()`` (idempotent) gives its place back."""

    __slots__ = ("_caps", "_released", "address", "principal")

    def __init__(self, caps: ConnectionCaps, address: str, principal: str | None) -> None:
        self._caps = caps
        self._released = False
        self.address = address
        self.principal = principal

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._caps._release(self)


class ConnectionCaps:
    """Counts open connections against ``total``, ``per_address`` and ``per_principal``."""

    def __init__(self, *, total: int, per_address: int, per_principal: int) -> None:
        self.total = total
        self.per_address = per_address
        self.per_principal = per_principal
        self.open = 0
        self._by_address: Counter[str] = Counter()
        self._by_principal: Counter[str] = Counter()

    def admit(self, address: str, principal: str | None = None) -> Ticket:
        """Admit a connection from ``address`` for ``principal`` (``None``: no credential);
        ``Refusal`` when a cap is reached."""
        if self.total and self.open >= self.total:
            raise Refusal(
                "max_connections", f"the hub holds its maximum of {self.total} connections", 503
            )
        if self.per_address and self._by_address[address] >= self.per_address:
            raise Refusal(
                "max_connections_per_address",
                f"{self.per_address} connections from this address are open",
                429,
            )
        if (
            principal is not None
            and self.per_principal
            and self._by_principal[principal] >= self.per_principal
        ):
            raise Refusal(
                "max_connections_per_principal",
                f"{self.per_principal} connections of this principal are open",
                429,
            )
        self.open += 1
        self._by_address[address] += 1
        if principal is not None:
            self._by_principal[principal] += 1
        return Ticket(self, address, principal)

    def _release(self, ticket: Ticket) -> None:
        self.open -= 1
        _decrement(self._by_address, ticket.address)
        if ticket.principal is not None:
            _decrement(self._by_principal, ticket.principal)


def _decrement(counter: Counter[str], key: str) -> None:
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]  # no entry per address ever seen: the map stays as small as the load


def too_many(limit: str, *, retry_after: float | None = None) -> RpcError:
    """``-32044`` for a request over a per-connection limit (``data.limit`` names it; a rate
    refusal says after how many seconds one request will be accepted again)."""
    data: dict[str, Any] = {"limit": limit}
    if retry_after is not None:
        data["retryAfter"] = round(retry_after, 3)
        return hub_error(RATE_LIMITED, "Too many requests: slow down", data)
    return hub_error(RATE_LIMITED, "Too many requests in progress: wait for answers", data)
