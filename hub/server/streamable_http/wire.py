"""The HTTP side of the Streamable HTTP profile: its headers and cookie, how a POST's body is
read, and the plain and JSON-RPC error answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope

from hub.server.forward import RELAYED_HEADER

CONNECTION_HEADER = "acp-connection-id"
SESSION_HEADER = "acp-session-id"
COOKIE = "acp-connection"
COOKIE_MAX_AGE = 86_400
"""Seconds the ``acp-connection`` cookie lives after the last answer that set it (the
``initialize`` answer, then every ``202`` to a POST that carried it)."""


def base_url_of(scope: Scope) -> str | None:
    """``http(s)://host`` as the client reached the hub (its ``Host`` passed the host check
    before any route ran), for the links the hub hands out."""
    for key, value in scope.get("headers", ()):
        if key == b"host":
            secure = scope.get("scheme") in ("https", "wss")
            return f"{'https' if secure else 'http'}://{bytes(value).decode('latin-1')}"
    return None


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A plain HTTP error with a JSON body ``{"error": message}`` (no JSON-RPC message)."""
    return Response(
        orjson.dumps({"error": message}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def connection_id_of(request: Request | Scope) -> str | None:
    """``Acp-Connection-Id``, else the ``acp-connection`` cookie."""
    req = request if isinstance(request, Request) else Request(request)
    return req.headers.get(CONNECTION_HEADER) or req.cookies.get(COOKIE)


def came_over_https(request: Request) -> bool:
    """Whether the client reached the hub over https: uvicorn takes ``X-Forwarded-Proto``
    only from the proxies ``trusted_proxies`` names; a request another node relayed carries the
    scheme that node saw. (A client that claims https without it only makes its own cookie
    ``Secure``: the claim can add the flag, never take it away.)"""
    if request.url.scheme == "https":
        return True
    relayed = RELAYED_HEADER.decode() in request.headers
    return relayed and request.headers.get("x-forwarded-proto") == "https"


def set_cookie(response: Response, request: Request, connection_id: str) -> None:
    """Name the connection in the ``acp-connection`` cookie: ``HttpOnly``, ``SameSite=Strict``
    (never sent across sites), ``Max-Age`` ``COOKIE_MAX_AGE``, ``Secure`` over https."""
    response.set_cookie(
        COOKIE,
        connection_id,
        max_age=COOKIE_MAX_AGE,
        path="/acp",
        secure=came_over_https(request),
        httponly=True,
        samesite="strict",
    )


def gone(request: Request, connection_id: str | None, message: str) -> Response:
    """``404`` for a connection that is unknown, closed or another principal's; the cookie is
    cleared when it names that connection (a cookie jar would present it for ever)."""
    response = json_error(404, message)
    if connection_id is not None and request.cookies.get(COOKIE) == connection_id:
        clear_cookie(response, request)
    return response


def clear_cookie(response: Response, request: Request) -> None:
    """Expire the ``acp-connection`` cookie."""
    response.delete_cookie(
        COOKIE,
        path="/acp",
        secure=came_over_https(request),
        httponly=True,
        samesite="strict",
    )


async def drain(receive: Receive) -> None:
    """Wait until the client of a streaming response disconnects."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


@dataclass(frozen=True, slots=True)
class Posted:
    """A POST's body and the JSON-RPC message it holds (an object, its id valid)."""

    body: bytes
    message: dict[str, Any]

    @property
    def initialize(self) -> bool:
        """Whether it is an ``initialize`` request."""
        return self.message.get("method") == "initialize" and "id" in self.message


async def read_body(request: Request, limit: int) -> bytearray | Response:
    """The request's body, or ``413`` once it passes ``limit`` bytes (the rest is not read)."""
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            return json_error(413, f"a message may not exceed {limit} bytes")
    return body


def rpc_error(status: int, code: int, message: str, data: Any, request_id: Any = None) -> Response:
    error = {"code": code, "message": message, "data": data}
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")
