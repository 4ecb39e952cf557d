"""What the bridge's core asks its I/O to do: the core's only output.

``hub.bridge.core`` takes the editor's lines, the hub's frames and the link's events and returns
a list of these, in the order they must happen; ``hub.bridge.relay`` carries them out. Frames
are serialized JSON-RPC messages.
"""

from __future__ import annotations

from dataclasses import dataclass

from hub.bridge.tracking import Pending

__all__ = ["Action", "Connect", "Notify", "OwnAnswer", "Reconnect", "Submit", "ToEditor", "ToHub"]


@dataclass(frozen=True)
class ToEditor:
    """Write ``frame`` to the editor."""

    frame: bytes


@dataclass(frozen=True)
class ToHub:
    """Send ``frame`` on the hub connection that is up (dropped when none is)."""

    frame: bytes


@dataclass(frozen=True)
class Connect:
    """The editor's ``initialize`` was accepted: open the first hub connection, then report
    ``Relay.initialized`` or ``Relay.initialize_failed`` for ``editor_id``."""

    editor_id: object


@dataclass(frozen=True)
class Submit:
    """An editor request for the hub: wait for the link, then ``Relay.submit`` it (or
    ``Relay.refuse`` it with the link's failure)."""

    pending: Pending


@dataclass(frozen=True)
class Notify:
    """An editor notification for the hub: wait for the link, then send ``frame``."""

    method: str
    frame: bytes


@dataclass(frozen=True)
class Reconnect:
    """The hub is needed and the link is down: reconnect (unless already under way)."""


@dataclass(frozen=True)
class OwnAnswer:
    """One of the bridge's own requests (``Relay.own_request``) is settled: its ``result`` or
    ``error`` (``lost``: with its connection) is on ``pending``."""

    pending: Pending


Action = ToEditor | ToHub | Connect | Submit | Notify | Reconnect | OwnAnswer
"""One step for the I/O to take."""
