"""``SessionFailure``: a client operation on a session failed."""

from __future__ import annotations

from hub.protocol.errors import RpcFailure

__all__ = ["SessionFailure"]


class SessionFailure(RpcFailure):
    """A client operation on a session failed; ``error`` is the JSON-RPC answer."""
