"""The flooder of scenario S9, in a process of its own: ``python -m tests.bench.flood SPEC``.

The spec is ``{"host", "port", "log", "seconds", "chunk_requests", "rcvbuf"}`` (``log``: the
hub's log file; ``rcvbuf``: a small socket receive buffer, or ``null`` for the default). For
``seconds`` it floods the hub with ``session/list`` requests from one connection after
another: each connection initializes, then never reads and sends requests whenever its socket
takes them, until the hub's log reports it as a slow consumer; then it reads what the hub
sent it (as a slow consumer that comes back would: how its requests were answered, and the
close code) and the next connection starts. The first connection floods until the hub
closes it, past ``seconds`` if need be (at most ``first_within`` seconds, 60 by default): its
close code is the scenario's figure, and on a busy machine the flooder (at nice 19) may need
longer than the window to fill what the hub holds for it. It prints one line when the first
connection floods, and at the end one JSON line: a record per connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from tests.bench import loop
from tests.bench.payload import now
from tests.bench.scenarios import log_mentions, wait_until
from tests.bench.targets import HubTarget, Target
from tests.bench.wsclient import Recorder, frame

__all__ = ["main"]


def _flood_chunk(requests: int) -> bytes:
    """``requests`` masked ``session/list`` request frames of about 60 bytes, back to back."""
    return b"".join(
        frame(1, b'{"jsonrpc":"2.0","id":%d,"method":"session/list"}' % i)
        for i in range(1, requests + 1)
    )


async def _flood_once(
    target: Target,
    chunk: bytes,
    per_chunk: int,
    log: str | None,
    stop: asyncio.Event,
    announce: bool,
    rcvbuf: int | None = None,
) -> dict[str, Any]:
    """One flooding connection: ``initialize``, then never read and send ``chunk`` whenever
    the socket takes it, until the hub's log reports it a slow consumer (or ``stop``). Then
    it reads what the hub sent (as a slow consumer that comes back would) to learn how each
    request was answered and the close code."""
    _, pos = log_mentions(log, "", 0)
    started = now()
    conn = await target.open(Recorder(), rcvbuf=rcvbuf)
    answers = {"results": 0, "rate_limited": 0, "other_errors": 0}
    conn.on_raw = lambda data: _count_raw(answers, data)
    conn.pause()
    t0 = now()
    if announce:
        print("flooding", flush=True)
    sent = 0
    refused_at: float | None = None
    closed_at: float | None = None
    poll = t0
    transport = conn.transport
    assert transport is not None
    while not stop.is_set() and not conn.closed.done():
        if transport.get_write_buffer_size() < len(chunk):
            transport.write(chunk)
            sent += per_chunk
        if now() >= poll:
            poll = now() + 0.05
            data, pos = _log_since(log, pos)
            if refused_at is None and b"over the request rate" in data:
                refused_at = now() - t0
            if b"slow consumer" in data:
                closed_at = now() - t0
                break
        await asyncio.sleep(0.002)
    conn.resume()
    if closed_at is None:
        conn.close()  # the window ended before the hub closed it
    gone = await wait_until(conn.closed.done, within=30)
    if not gone:
        conn.abort()
    return {
        "started": started,
        "gone": now(),
        "sent": sent,
        "seconds_to_rate_limit": refused_at,
        "seconds_to_close": closed_at,
        "close_code": conn.close_code,
        **answers,
    }


def _count_raw(answers: dict[str, int], data: bytes) -> None:
    """Count an answer without decoding it (tens of thousands arrive at once)."""
    if data.find(b'"result"') >= 0:
        answers["results"] += 1
    elif data.find(b'"code":-32044') >= 0:
        answers["rate_limited"] += 1
    elif data.find(b'"error"') >= 0:
        answers["other_errors"] += 1


def _log_since(path: str | None, start: int) -> tuple[bytes, int]:
    if not path:
        return b"", start
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    return data, start + len(data)


async def _run(spec: dict[str, Any]) -> list[dict[str, Any]]:
    target = HubTarget(spec["host"], int(spec["port"]))
    chunk = _flood_chunk(int(spec["chunk_requests"]))
    stop, first_stop = asyncio.Event(), asyncio.Event()
    seconds = float(spec["seconds"])
    asyncio.get_running_loop().call_later(seconds, stop.set)
    first_within = max(seconds, float(spec.get("first_within", 60.0)))
    asyncio.get_running_loop().call_later(first_within, first_stop.set)
    floods: list[dict[str, Any]] = []
    first = True
    while not stop.is_set():
        floods.append(
            await _flood_once(
                target,
                chunk,
                int(spec["chunk_requests"]),
                spec.get("log"),
                first_stop if first else stop,
                first,
                spec.get("rcvbuf"),
            )
        )
        first = False
    return floods


def main(argv: list[str] | None = None) -> int:
    """Flood as ``argv[0]`` (a JSON spec) says; print the records."""
    args = sys.argv[1:] if argv is None else argv
    # The flooder stands for a client on another machine: it shares the load generator's
    # core here, but must not take CPU from the client that measures (it needs little to
    # flood; reading its answers at the end is bookkeeping).
    os.nice(19)
    floods = loop.run(_run(json.loads(args[0])))
    print(json.dumps(floods), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
