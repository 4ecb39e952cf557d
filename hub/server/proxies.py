"""Which reverse proxies the hub believes about a client's address and scheme.

uvicorn rewrites a request's client address from ``X-Forwarded-For`` (and its scheme from
``X-Forwarded-Proto``) when the request comes from an address it trusts; left to itself it
trusts ``127.0.0.1``, so any local process could choose the address the hub logs and counts
for ``max_connections_per_address``. The hub passes its own ``trusted_proxies`` instead
(default: none), and turns the rewriting off altogether when it trusts no proxy.
"""

from __future__ import annotations

from typing import Any

from hub.settings import Settings


def uvicorn_proxy_options(settings: Settings) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments for the ``trusted_proxies`` setting."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False, "forwarded_allow_ips": []}
    return {"proxy_headers": True, "forwarded_allow_ips": list(settings.trusted_proxies)}
