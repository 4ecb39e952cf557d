"""Connection caps: how many clients the hub holds in total, per remote address, per principal.

``Admission.admit`` either returns a ``Ticket`` (the connection counts until the ticket is
released) or a ``Refusal`` naming the cap that was hit; the caller refuses the upgrade with the
refusal's HTTP status and logs one line. A cap of ``0`` means no cap. See ``docs/limits.md``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["Admission", "Refusal", "Ticket"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a connection was not admitted: ``status`` is the HTTP answer (503 when the hub is
    full, 429 when this address or principal holds too many connections)."""

    status: int
    limit: str
    reason: str


class Ticket:
    """One admitted connection; ``release()`` (idempotent) gives its place back."""

    __slots__ = ("_admission", "_released", "address", "principal")

    def __init__(self, admission: Admission, address: str, principal: str | None) -> None:
        self._admission = admission
        self._released = False
        self.address = address
        self.principal = principal

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._admission._release(self)


class Admission:
    """Counts open connections against ``total``, ``per_address`` and ``per_principal``."""

    def __init__(self, *, total: int, per_address: int, per_principal: int) -> None:
        self.total = total
        self.per_address = per_address
        self.per_principal = per_principal
        self.open = 0
        self._by_address: Counter[str] = Counter()
        self._by_principal: Counter[str] = Counter()

    def admit(self, address: str, principal: str | None = None) -> Ticket | Refusal:
        """Admit a connection from ``address`` for ``principal`` (``None``: no credential)."""
        if self.total and self.open >= self.total:
            return Refusal(503, "max_connections", f"the hub holds {self.total} connections")
        if self.per_address and self._by_address[address] >= self.per_address:
            return Refusal(
                429,
                "max_connections_per_address",
                f"{self.per_address} connections from this address are open",
            )
        if (
            principal is not None
            and self.per_principal
            and self._by_principal[principal] >= self.per_principal
        ):
            return Refusal(
                429,
                "max_connections_per_principal",
                f"{self.per_principal} connections of this principal are open",
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
