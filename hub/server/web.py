"""The browser UI's HTTP routes: pages, the embeddable widget and the static ES modules.

Every response carries a strict Content-Security-Policy: scripts and styles only from the hub
itself (no inline script, no third-party origin), WebSocket connections only back to the host
that served the page, and no framing at all except for ``/embed/{session_id}``, which the
configured embedding origins (setting ``embed_origins``) may frame.

The pages are static files: the session id is read by the page's script from the URL, so no
request data is ever written into a response body or a header other than the host in
``connect-src``, which is validated first.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

Endpoint = Callable[[Request], Awaitable[Response]]

__all__ = ["content_security_policy", "validate_embed_origin", "web_routes"]

# A Host header that is safe to repeat inside a CSP directive: a DNS name or an IPv4/IPv6
# literal with an optional port. Anything else (spaces, ';', ',') could inject directives.
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")

# An embedding origin as CSP source expressions accept it: scheme, host (optionally a
# leading "*." wildcard label) and optional port; no path, no spaces, no quotes.
_ORIGIN = re.compile(r"^https?://(?:\*\.)?(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(?::[0-9]{1,5})?$")

_STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}


def validate_embed_origin(origin: str) -> str:
    """Return ``origin`` without a trailing slash, or raise ``ValueError`` if it is not a plain
    ``http(s)://host[:port]`` origin (a CSP source expression must not smuggle directives)."""
    cleaned = origin.strip().rstrip("/")
    if not _ORIGIN.match(cleaned):
        raise ValueError(f"not an embedding origin (scheme://host[:port]): {origin!r}")
    return cleaned


def content_security_policy(host: str | None, *, frame_ancestors: Sequence[str] = ()) -> str:
    """The CSP for a response to a request whose ``Host`` header is ``host``.

    ``frame_ancestors`` empty means the response may not be framed at all (``'none'``);
    otherwise the page may be framed by itself and by those origins.
    """
    connect = ["'self'"]
    if host is not None and _HOST.match(host):
        # Older engines do not let 'self' cover ws:/wss:, so the host is named explicitly.
        connect += [f"ws://{host}", f"wss://{host}"]
    ancestors = " ".join(["'self'", *frame_ancestors]) if frame_ancestors else "'none'"
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src " + " ".join(connect),
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors " + ancestors,
        ]
    )


def _headers(request: Request, *, frame_ancestors: Sequence[str] = ()) -> dict[str, str]:
    headers = {
        "Content-Security-Policy": content_security_policy(
            request.headers.get("host"), frame_ancestors=frame_ancestors
        ),
        "X-Content-Type-Options": "nosniff",
        # Pages carry a token in their query string: never leak it through Referer.
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    if not frame_ancestors:
        headers["X-Frame-Options"] = "DENY"
    return headers


def web_routes(web_dir: Path, *, embed_origins: Sequence[str]) -> list[BaseRoute]:
    """The Starlette routes of the web UI, serving the files of ``web_dir``.

    - ``/``: the sessions page (``index.html``);
    - ``/s/{session_id}``: a live session (``session.html``);
    - ``/embed/{session_id}``: the minimal session view for iframes (``embed.html``), which
      the ``embed_origins`` may frame;
    - ``/widget.js``: the ``<acp-session>`` custom element for host pages;
    - ``/static/{path}``: the ES modules and style sheets under ``web_dir/static``.

    Raises ``ValueError`` for an embedding origin that is not ``scheme://host[:port]``.
    """
    origins = tuple(validate_embed_origin(origin) for origin in embed_origins)
    root = web_dir.resolve()
    static_root = (root / "static").resolve()

    def page(name: str, *, embeddable: bool = False) -> Endpoint:
        path = root / name

        async def endpoint(request: Request) -> Response:
            ancestors = origins if embeddable else ()
            return FileResponse(
                path,
                media_type="text/html; charset=utf-8",
                headers=_headers(request, frame_ancestors=ancestors),
            )

        return endpoint

    index = page("index.html")
    session = page("session.html")
    embed = page("embed.html", embeddable=True)

    async def widget(request: Request) -> Response:
        headers = _headers(request)
        # Host pages on other origins load this script with a plain <script> tag.
        headers["Cross-Origin-Resource-Policy"] = "cross-origin"
        return FileResponse(
            root / "widget.js", media_type="text/javascript; charset=utf-8", headers=headers
        )

    async def static(request: Request) -> Response:
        relative = str(request.path_params["path"])
        try:
            target = (static_root / relative).resolve()
            found = target.is_relative_to(static_root) and target.is_file()
        except (OSError, ValueError):  # an embedded NUL byte, a name too long, ...
            found = False
        media_type = _STATIC_TYPES.get(target.suffix) if found else None
        if media_type is None:
            return PlainTextResponse("not found", status_code=404, headers=_headers(request))
        return FileResponse(target, media_type=media_type, headers=_headers(request))

    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/s/{session_id}", session, methods=["GET", "HEAD"]),
        Route("/embed/{session_id}", embed, methods=["GET", "HEAD"]),
        Route("/widget.js", widget, methods=["GET", "HEAD"]),
        Route("/static/{path:path}", static, methods=["GET", "HEAD"]),
    ]
