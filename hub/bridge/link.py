"""Opening the bridge's WebSocket to a hub, and naming every way that fails.

``connect(target)`` opens ``ws://`` or ``wss://`` ``/acp`` with the token as
``Authorization: Bearer`` (never logged) and returns the ``websockets`` connection. A failure
raises ``LinkFailure`` whose ``error`` is the JSON-RPC error the editor is owed, with a message
a person can act on, and whose ``fatal`` says whether trying again can help:

* a URL that is not ``ws://`` / ``wss://`` with a host: ``-32050``, fatal;
* the hub answers the upgrade with 401 / 403: ``-32000`` (ACP's authentication required), fatal:
  "the hub refused the token" or "the hub requires a token" (a 403 may also be a wrong path:
  Starlette refuses upgrades to paths it does not serve with 403, and the message says so);
* another HTTP status (404: no ACP endpoint at that path, 5xx): ``-32050``, fatal for 4xx;
* refused, unreachable, timed out, TLS failures, the hub going away: ``-32050``, not fatal
  (the bridge retries within its reconnect window).
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from hub.bridge.frames import unreachable
from hub.protocol.errors import AUTH_REQUIRED, RpcError

log = logging.getLogger("hub.bridge")

OPEN_TIMEOUT = 10.0
"""Seconds for the TCP connect, the TLS and the WebSocket handshakes together."""


@dataclass(frozen=True)
class Target:
    """Where the bridge connects and with what."""

    url: str
    token: str | None = None
    max_frame: int | None = 64 * 1024 * 1024
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


class LinkFailure(Exception):
    """The hub could not be reached or refused the bridge; ``error`` is for the editor."""

    def __init__(self, error: RpcError, *, fatal: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.fatal = fatal


def check_url(url: str) -> None:
    """Raise a fatal ``LinkFailure`` unless ``url`` is a ``ws://`` or ``wss://`` URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise LinkFailure(
            unreachable(f"bad hub URL {url!r}: expected ws://HOST:PORT/acp or wss://HOST/acp", url),
            fatal=True,
        )


async def connect_hub(target: Target) -> ClientConnection:
    """Open the WebSocket to the hub; ``LinkFailure`` as described in the module docs."""
    url = target.url
    check_url(url)
    try:
        return await connect(
            url,
            additional_headers=target.headers,
            max_size=target.max_frame,
            compression=None,
            open_timeout=OPEN_TIMEOUT,
            ping_interval=target.ping_interval,
            ping_timeout=target.ping_timeout,
            user_agent_header="acp-hub-bridge",
        )
    except InvalidURI as exc:
        raise LinkFailure(unreachable(f"bad hub URL {url!r}: {exc}", url), fatal=True) from None
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status == 401:
            if target.token:
                message = f"the hub at {url} refused the token (HTTP 401)"
            else:
                message = (
                    f"the hub at {url} requires a token (HTTP 401): "
                    "pass --token or set ACP_HUB_TOKEN"
                )
        elif status == 403:
            # Starlette answers an upgrade to a path it does not serve with 403 too.
            message = (
                f"the hub at {url} refused the connection (HTTP 403): "
                + ("the token is not accepted there" if target.token else "a token is required")
                + ", or the path is wrong (the hub's endpoint is /acp)"
            )
        if status in (401, 403):
            raise LinkFailure(
                RpcError(AUTH_REQUIRED, message, {"url": url, "status": status}), fatal=True
            ) from None
        if status == 404:
            message = f"no ACP endpoint at {url} (HTTP 404): is the path /acp?"
        else:
            message = f"the hub at {url} refused the WebSocket upgrade (HTTP {status})"
        raise LinkFailure(
            unreachable(message, url, status=status), fatal=400 <= status < 500
        ) from None
    except ssl.SSLError as exc:
        raise LinkFailure(
            unreachable(f"TLS with the hub at {url} failed: {exc}", url), fatal=False
        ) from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise LinkFailure(
            unreachable(f"cannot reach the hub at {url}: {reason or type(exc).__name__}", url),
            fatal=False,
        ) from None
