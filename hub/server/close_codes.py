"""Every WebSocket close code the hub uses, in one table.

The standard codes are websockets' ``CloseCode`` values (RFC 6455, section 7.4.1), named here
for what the hub means by them; the hub's own codes are in the private range 4000-4099 (a
client chooses those; ``hub.server.metrics`` labels by this range). A Streamable HTTP stream
ends with the same codes in its last ``event: close``. The web client has the same table in
``hub/web/static/close-codes.js``.
"""

from __future__ import annotations

from typing import Final

from websockets.frames import CloseCode

__all__ = [
    "GOING_AWAY",
    "HANDSHAKE_FAILED",
    "KEEPALIVE_TIMEOUT",
    "NORMAL",
    "POLICY",
    "RESYNC",
    "SLOW_CONSUMER",
    "UNSUPPORTED_DATA",
]

NORMAL: Final = int(CloseCode.NORMAL_CLOSURE)
"""1000: the connection ended as asked (the client ended it, or its ``initialize`` failed)."""
GOING_AWAY: Final = int(CloseCode.GOING_AWAY)
"""1001: the hub shuts down, or a Streamable HTTP connection idled out; come back."""
UNSUPPORTED_DATA: Final = int(CloseCode.UNSUPPORTED_DATA)
"""1003: a binary frame (the hub takes text frames only)."""
POLICY: Final = int(CloseCode.POLICY_VIOLATION)
"""1008: the credential does not (or no longer) admit the client: refused, revoked, expired;
or the client broke a rule of the hub (no ``initialize`` in time)."""
KEEPALIVE_TIMEOUT: Final = int(CloseCode.INTERNAL_ERROR)
"""1011: the client answered no keepalive ping in time."""
SLOW_CONSUMER: Final = int(CloseCode.TRY_AGAIN_LATER)
"""1013: the client did not read its frames fast enough; it resumes with its cursor."""

RESYNC: Final = 4000
"""The web client's own close: it reconnects at once and resumes from its cursor."""
HANDSHAKE_FAILED: Final = 4001
"""The web client's own close: its ``initialize`` failed; it reconnects."""
