"""Request-id remapping for one hop.

Theory of operation
-------------------
The hub forwards requests between peers that each choose their own ids: many clients may
all send ``id: 1``, and the agent must see ids that are unique on its connection. So on
every hop where the hub sends a request, it mints its own id (integers counting from 0)
with ``register`` and keeps, under that id, whatever context it needs to route the answer
back (the original peer and id, a future, ...). When the answer arrives, ``resolve`` pops
the context.

Nothing may hang: when a side goes away, every pending entry must fail with a defined
JSON-RPC error. ``IdMap`` does no I/O and knows nothing about errors; the caller takes the
contexts with ``reject_all()`` and answers each of them (for instance with
``hub.protocol.errors.AGENT_UNAVAILABLE`` or ``REQUEST_CANCELLED``).
"""

from __future__ import annotations

from typing import Generic, TypeVar

from hub.protocol.jsonrpc import RequestId

__all__ = ["IdMap"]

T = TypeVar("T")


class IdMap(Generic[T]):
    """A table from ids we minted to the context of the request each stands for."""

    __slots__ = ("_next", "_pending")

    def __init__(self) -> None:
        self._next = 0
        self._pending: dict[int, T] = {}

    def register(self, context: T) -> int:
        """Mint a fresh id for ``context`` and return it; ids are never reused."""
        new_id = self._next
        self._next += 1
        self._pending[new_id] = context
        return new_id

    def resolve(self, id: RequestId) -> T | None:
        """Pop and return the context of ``id``.

        Returns ``None`` for an id we never minted, one already resolved, or one of the
        wrong type (a string, a bool, ``None``): the caller treats that as a stray answer.
        """
        if not isinstance(id, int) or isinstance(id, bool):
            return None
        return self._pending.pop(id, None)

    def peek(self, id: RequestId) -> T | None:
        """Like ``resolve`` but leaves the entry in place."""
        if not isinstance(id, int) or isinstance(id, bool):
            return None
        return self._pending.get(id)

    def reject_all(self) -> list[T]:
        """Empty the table; return every pending context in registration order.

        The caller must answer each of them with an error. Ids keep counting afterwards,
        so a late answer to a rejected request can never match a new one.
        """
        contexts = list(self._pending.values())
        self._pending.clear()
        return contexts

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, id: object) -> bool:
        return isinstance(id, int) and not isinstance(id, bool) and id in self._pending
