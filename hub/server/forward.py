"""Relaying one Streamable HTTP request to the hub node that holds its connection.

Theory of operation
-------------------
With several nodes on one Redis, a Streamable HTTP connection lives in the process that
answered its ``initialize`` (``hub.server.placement`` records which). A ``POST``, ``GET`` or
``DELETE`` for it that a load balancer sends to another node is relayed there by ``forward``:
the request as the client sent it (its credential, ``Host``, ``Origin``, cookies,
``Last-Event-ID``; the hop-by-hop headers aside, ``X-Forwarded-For`` and ``-Proto`` as this
node saw the client, and ``RELAYED_HEADER`` added), over a new
HTTP/1.1 connection (``h11`` over an anyio socket), and the holder's answer back to the client
as it comes: its status, headers and body, an SSE stream included, chunk by chunk.

The relay keeps no buffer of its own: it reads the next chunk from the holder only once the
client's server took the last one, so a client that does not read backs up to the holder's
stream, whose outbox bound applies as if the client were its own (TCP buffers aside, as with
any proxy). The holder serves the relayed request exactly as a direct one: it checks the
credential again, and the connection's principal, and it never relays a request that carries
``RELAYED_HEADER`` (a connection it does not hold is ``404``; no loops).

Failures before the holder answered are exceptions for the caller to turn into a status:
``NodeGone`` (the connection was refused or cut: the process that held the connection is gone,
and the connection with it) and ``NodeSilent`` (no answer within the timeout: it may be
stopped or overloaded). Once the answer started, a failure just ends the response, as a
dropped connection would: an SSE client comes back with ``Last-Event-ID``.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11
from starlette.types import Receive, Scope, Send

log = logging.getLogger("hub.server")

RELAYED_HEADER = b"acp-hub-relayed-by"
"""Added to a relayed request, with the relaying node's name: the holder serves it itself."""
CONNECT_TIMEOUT = 5.0
"""Seconds to open the connection to the holder."""
ANSWER_TIMEOUT = 10.0
"""Seconds a relayed GET or DELETE waits for the head of the holder's answer (then ``503``)."""
POST_ANSWER_TIMEOUT = 30.0
"""Seconds a relayed POST waits: the holder's POST waits while the connection's inbox is full,
as a direct one does."""
READ_BYTES = 65536

# Headers about one hop, not the request (RFC 9110 section 7.6.1), and the ones the relay
# sets itself.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"te",
        b"trailer",
        b"upgrade",
        b"expect",
        b"content-length",
        RELAYED_HEADER,
    }
)
# Set again from what this node made of them (its own proxy settings decided whether to trust
# them): the holder, if it trusts this node, logs the client's address, not this node's.
_FORWARDED = frozenset({b"x-forwarded-for", b"x-forwarded-proto"})
# The client's server adds its own.
_NOT_RELAYED_BACK = frozenset({*_HOP_BY_HOP - {b"content-length"}, b"date", b"server"})


def relay_timeouts(method: str, keepalive: float) -> tuple[float, float]:
    """``forward``'s ``answer_timeout`` and ``idle_timeout`` for a request of ``method`` to a
    holder that writes an SSE keepalive every ``keepalive`` seconds: a silent stream (a holder
    that froze) ends after two keepalives missed and ``ANSWER_TIMEOUT``."""
    answer = POST_ANSWER_TIMEOUT if method == "POST" else ANSWER_TIMEOUT
    return answer, 2 * keepalive + ANSWER_TIMEOUT if method == "GET" else answer


class NodeGone(Exception):
    """The holder refused or dropped the relayed request before answering."""


class NodeSilent(Exception):
    """The holder did not answer the relayed request in time."""


async def forward(
    url: str,
    scope: Scope,
    body: bytes,
    receive: Receive,
    send: Send,
    relayed_by: str,
    answer_timeout: float,
    idle_timeout: float | None,
) -> int:
    """Send the request of ``scope`` with ``body`` to the node at ``url`` (``http(s)://host
    :port``) and relay its answer through ``send``; the answer's status.

    ``answer_timeout`` bounds the wait for the answer's head, ``idle_timeout`` (``None``: no
    bound) each wait for more of its body (a holder writes SSE keepalives). Raises
    ``NodeGone`` or ``NodeSilent`` when nothing was sent to the client yet; returns early
    when the client goes away (``receive`` says ``http.disconnect``: the status is then
    ``0``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    try:
        with anyio.fail_after(CONNECT_TIMEOUT):
            stream: anyio.abc.ByteStream = (
                await anyio.connect_tcp(host, port, tls=True, tls_hostname=host)
                if tls
                else await anyio.connect_tcp(host, port)
            )
    except TimeoutError:
        raise NodeSilent(f"{url}: no connection within {CONNECT_TIMEOUT:.0f} s") from None
    except OSError as exc:
        raise NodeGone(f"{url}: {exc.strerror or exc}") from None
    outcome: list[int | Exception] = []
    async with stream, anyio.create_task_group() as tg:

        async def watch_client() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()

        tg.start_soon(watch_client)
        try:
            outcome.append(
                await _exchange(
                    stream,
                    scope,
                    body,
                    send,
                    relayed_by,
                    parts.netloc,
                    answer_timeout,
                    idle_timeout,
                )
            )
        except (NodeGone, NodeSilent) as exc:
            outcome.append(exc)  # raised outside the task group, not in an exception group
        tg.cancel_scope.cancel()
    if not outcome:
        return 0
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


async def _exchange(
    stream: anyio.abc.ByteStream,
    scope: Scope,
    body: bytes,
    send: Send,
    relayed_by: str,
    netloc: str,
    answer_timeout: float,
    idle_timeout: float | None,
) -> int:
    conn = h11.Connection(our_role=h11.CLIENT)
    headers = [
        (k, v)
        for k, v in scope["headers"]
        if bytes(k).lower() not in _HOP_BY_HOP and bytes(k).lower() not in _FORWARDED
    ]
    if not any(k == b"host" for k, _ in headers):
        headers.append((b"host", netloc.encode()))
    client = scope.get("client")
    if client:
        headers.append((b"x-forwarded-for", str(client[0]).encode()))
    headers.append((b"x-forwarded-proto", str(scope.get("scheme", "http")).encode()))
    headers += [
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        (RELAYED_HEADER, relayed_by.encode()),
    ]
    target = bytes(scope.get("raw_path") or scope["path"].encode())
    if scope.get("query_string"):
        target += b"?" + bytes(scope["query_string"])
    request = h11.Request(method=scope["method"], target=target, headers=headers)
    try:
        out = conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        await stream.send(out)
        response = await _next(conn, stream, answer_timeout)
        while isinstance(response, h11.InformationalResponse):
            response = await _next(conn, stream, answer_timeout)
    except TimeoutError:
        raise NodeSilent(f"no answer within {answer_timeout:.0f} s") from None
    except (OSError, anyio.BrokenResourceError, anyio.EndOfStream, h11.ProtocolError) as exc:
        raise NodeGone(str(exc) or type(exc).__name__) from None
    if not isinstance(response, h11.Response):
        raise NodeGone(f"an answer that is not one: {type(response).__name__}")
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [(k, v) for k, v in response.headers if k not in _NOT_RELAYED_BACK],
        }
    )
    try:
        while True:
            event = await _next(conn, stream, idle_timeout)
            if not isinstance(event, h11.Data):
                break
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})
    except (TimeoutError, OSError, anyio.BrokenResourceError, h11.ProtocolError) as exc:
        # The holder stopped mid-answer: end the client's response as a dropped one.
        log.info("= a relayed answer ended early: %s", str(exc) or type(exc).__name__)
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return int(response.status_code)


async def _next(conn: h11.Connection, stream: anyio.abc.ByteStream, timeout: float | None) -> Any:
    """The next h11 event of the holder's answer, reading as needed (``TimeoutError``)."""
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        with anyio.fail_after(timeout):
            try:
                data = await stream.receive(READ_BYTES)
            except anyio.EndOfStream:
                data = b""
        conn.receive_data(data)
