"""The ``Host`` and ``Origin`` checks of every request (pure functions).

``Host`` defends against DNS rebinding: a page on ``attacker.example`` whose name is made to
resolve to 127.0.0.1 reaches the hub with ``Host: attacker.example`` and a matching ``Origin``,
so a same-origin check alone would pass. Only the names in ``allowed_hosts`` are served; on a
loopback bind the default is the loopback names, elsewhere the setting is required.

``Origin`` defends against cross-site WebSocket hijacking: browsers send it on every upgrade,
other clients (editors, scripts) do not. ``/acp`` accepts no ``Origin``, the hub's own origin,
the ``allowed_origins``; an ``embed_origins`` origin only with an embed token whose
``origins`` claim names it. ``null`` (sandboxed frames, ``file:`` pages) is never accepted.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence

LOOPBACK_NAMES: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")


def is_loopback(bind: str) -> bool:
    """Whether binding to ``bind`` only listens on the loopback interface."""
    host = bind.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(host_header: str) -> str:
    """The name part of a ``Host`` header, lower case, without the port or IPv6 brackets."""
    value = host_header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def effective_allowed_hosts(bind: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """The host names served: ``allowed`` when set, else the loopback names on a loopback
    bind. Empty for a non-loopback bind without the setting (the settings refuse that)."""
    if allowed:
        return tuple(a.strip().lower().strip("[]").rstrip(".") for a in allowed)
    return LOOPBACK_NAMES if is_loopback(bind) else ()


def host_allowed(host_header: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request with ``Host: host_header`` may be served.

    ``allowed`` entries are names (``hub.example.com``), a leading-wildcard pattern
    (``*.example.com`` matches sub-domains only), or ``*`` (any host: only behind a proxy
    that checks it). A missing ``Host`` is refused.
    """
    if not host_header:
        return False
    name = host_name(host_header)
    if not name:
        return False
    for entry in allowed:
        if entry == "*" or entry == name:
            return True
        if entry.startswith("*.") and name.endswith(entry[1:]) and len(name) > len(entry) - 1:
            return True
    return False


def normalize_origin(origin: str) -> str:
    """``origin`` lower case without a trailing slash (browsers send no path)."""
    return origin.strip().rstrip("/").lower()


def same_origin(origin: str, host_header: str | None) -> bool:
    """Whether ``origin`` is the hub's own origin as the request's ``Host`` names it."""
    if not host_header:
        return False
    origin = normalize_origin(origin)
    host = host_header.strip().lower()
    return origin in (f"http://{host}", f"https://{host}")


def origin_matches(origin: str, patterns: Iterable[str]) -> bool:
    """Whether ``origin`` is one of ``patterns`` (``https://*.example.com`` matches the
    sub-domains of ``example.com`` on that scheme)."""
    origin = normalize_origin(origin)
    for pattern in patterns:
        pattern = normalize_origin(pattern)
        if pattern == origin:
            return True
        scheme, sep, rest = pattern.partition("://*.")
        if sep and origin.startswith(f"{scheme}://") and origin.endswith("." + rest):
            return True
    return False
