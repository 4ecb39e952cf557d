"""ACP protocol version negotiation (https://agentclientprotocol.com/protocol/v2/initialization).

Theory of operation
-------------------
The client sends the latest version it supports in ``initialize``; the agent answers the
same version if it supports it, else its own latest; a client that cannot speak the answer
closes the connection. One connection speaks exactly one version after ``initialize``.

The hub plays both parts:

* towards an agent it is the client: ``offer(choice)`` gives the version to send and
  ``accept(offered, answered, choice)`` checks the agent's answer;
* towards each WebSocket client it is the agent: ``negotiate_as_agent(requested)``.

A version the other side cannot be held to raises ``VersionError`` (a ``PeerError``);
``choice`` is the configured ``protocol`` of the agent (``auto``, ``1`` or ``2``).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from hub.protocol.errors import VersionError

__all__ = [
    "LATEST",
    "SUPPORTED",
    "Choice",
    "accept",
    "negotiate_as_agent",
    "offer",
    "parse_choice",
]

LATEST = 2
SUPPORTED = (1, 2)

Choice: TypeAlias = Literal["auto", 1, 2]


def parse_choice(value: object) -> Choice:
    """Read a configured protocol choice: ``"auto"``, ``1``/``"1"`` or ``2``/``"2"``.

    Raises ``ValueError`` for anything else (a configuration mistake, not a peer's).
    """
    text = str(value).strip().lower() if not isinstance(value, bool) else ""
    if text == "auto":
        return "auto"
    if text == "1":
        return 1
    if text == "2":
        return 2
    raise ValueError(f"protocol must be 'auto', 1 or 2, got {value!r}")


def offer(choice: Choice) -> int:
    """The ``protocolVersion`` to send in ``initialize``: the latest for ``auto``."""
    return LATEST if choice == "auto" else choice


def accept(offered: int, answered: object, choice: Choice) -> int:
    """Check the agent's ``protocolVersion`` answer and return the version to speak.

    Raises ``VersionError`` if the answer is not an integer we support, is newer than what
    we offered, or differs from a fixed ``choice``.
    """
    if not isinstance(answered, int) or isinstance(answered, bool) or answered not in SUPPORTED:
        raise VersionError(f"agent answered protocol version {answered!r}; supported: 1, 2")
    if answered > offered:
        raise VersionError(f"agent answered protocol version {answered}, newer than {offered}")
    if choice != "auto" and answered != choice:
        raise VersionError(f"agent answered protocol version {answered}; configured {choice}")
    return answered


def negotiate_as_agent(requested: object, max_version: int = LATEST) -> int:
    """The version the hub answers a client's ``initialize`` with.

    ``min(requested, max_version)`` for an integer ``requested >= 1``: a newer client gets
    our latest and decides whether it can speak it. Raises ``VersionError`` for anything
    else, and ``ValueError`` if ``max_version`` is not a version we support.
    """
    if max_version not in SUPPORTED:
        raise ValueError(f"max_version must be one of {SUPPORTED}, got {max_version}")
    if not isinstance(requested, int) or isinstance(requested, bool):
        raise VersionError(f"protocolVersion must be an integer, got {requested!r}")
    if requested < 1:
        raise VersionError(f"protocolVersion must be at least 1, got {requested}")
    return min(requested, max_version)
