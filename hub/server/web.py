"""The browser UI's HTTP routes: pages, the embeddable widget and the static ES modules.

Every response carries a strict Content-Security-Policy: scripts and styles only from the hub
itself (no inline script, no third-party origin), WebSocket connections only back to the host
that served the page, and no framing at all except for ``/embed/{session_id}``, which the
configured embedding origins (setting ``embed_origins``) may frame.

The pages are static files: the session id is read by the page's script from the URL, so no
request data is ever written into a response body or a header other than the host in
``connect-src``, which is validated first.

The files are package data (``hub/web``), reached through :mod:`importlib.resources` rather than
a path relative to this module, so they are found wherever and however the package is installed
(a checkout, an installed wheel, a zip). Each response reads its file afresh (edits show up
without a restart) and carries a strong ``ETag`` of its content, so that ``Cache-Control:
no-cache`` costs a ``304`` when nothing changed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

Endpoint = Callable[[Request], Awaitable[Response]]

__all__ = ["content_security_policy", "validate_embed_origin", "web_assets", "web_routes"]

# A Host header that is safe to repeat inside a CSP directive: a DNS name or an IPv4/IPv6
# literal with an optional port. Anything else (spaces, ';', ',') could inject directives.
_HOST = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$")

# An embedding origin as CSP source expressions accept it: scheme, host (optionally a
# leading "*." wildcard label) and optional port; no path, no spaces, no quotes.
_ORIGIN = re.compile(r"^https?://(?:\*\.)?(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(?::[0-9]{1,5})?$")

# One path segment under /static: no "..", no hidden files, no separators or encoded oddities.
# A Traversable cannot be resolved and compared like a Path, so the name itself must be safe.
_SEGMENT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")

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


def web_assets() -> Traversable:
    """The web UI's files as installed with the package (``hub/web``)."""
    return files("hub") / "web"


async def _asset(
    request: Request, resource: Traversable, media_type: str, headers: dict[str, str]
) -> Response:
    """``resource``'s bytes (or ``304`` when the client's ``If-None-Match`` still matches)."""
    # A thread, as FileResponse does: a disk read must not stall the event loop's other clients.
    body = await anyio.to_thread.run_sync(resource.read_bytes)
    etag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
    headers = {**headers, "ETag": etag}
    if etag in (tag.strip() for tag in request.headers.get("if-none-match", "").split(",")):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media_type, headers=headers)


def web_routes(web: Traversable | None = None, *, embed_origins: Sequence[str]) -> list[BaseRoute]:
    """The Starlette routes of the web UI, serving the files of ``web`` (default:
    :func:`web_assets`).

    - ``/``: the sessions page (``index.html``);
    - ``/s/{session_id}``: a live session (``session.html``);
    - ``/embed/{session_id}``: the minimal session view for iframes (``embed.html``), which
      the ``embed_origins`` may frame;
    - ``/widget.js``: the ``<acp-session>`` custom element for host pages;
    - ``/static/{path}``: the ES modules and style sheets under ``web/static`` (``404`` for
      anything else, including ``..`` and hidden names).

    Raises ``ValueError`` for an embedding origin that is not ``scheme://host[:port]``.
    """
    origins = tuple(validate_embed_origin(origin) for origin in embed_origins)
    root = web_assets() if web is None else web
    static_root = root / "static"

    def page(name: str, *, embeddable: bool = False) -> Endpoint:
        resource = root / name

        async def endpoint(request: Request) -> Response:
            ancestors = origins if embeddable else ()
            headers = _headers(request, frame_ancestors=ancestors)
            return await _asset(request, resource, "text/html; charset=utf-8", headers)

        return endpoint

    index = page("index.html")
    session = page("session.html")
    embed = page("embed.html", embeddable=True)

    async def widget(request: Request) -> Response:
        headers = _headers(request)
        # Host pages on other origins load this script with a plain <script> tag.
        headers["Cross-Origin-Resource-Policy"] = "cross-origin"
        return await _asset(request, root / "widget.js", "text/javascript; charset=utf-8", headers)

    async def static(request: Request) -> Response:
        parts = str(request.path_params["path"]).split("/")
        media_type = _STATIC_TYPES.get("." + parts[-1].rsplit(".", 1)[-1])
        if media_type is not None and all(_SEGMENT.match(part) for part in parts):
            target = static_root.joinpath(*parts)
            try:
                found = target.is_file()
            except (OSError, ValueError):  # a name too long for the file system, ...
                found = False
            if found:
                return await _asset(request, target, media_type, _headers(request))
        return PlainTextResponse("not found", status_code=404, headers=_headers(request))

    return [
        Route("/", index, methods=["GET", "HEAD"]),
        Route("/s/{session_id}", session, methods=["GET", "HEAD"]),
        Route("/embed/{session_id}", embed, methods=["GET", "HEAD"]),
        Route("/widget.js", widget, methods=["GET", "HEAD"]),
        Route("/static/{path:path}", static, methods=["GET", "HEAD"]),
    ]
