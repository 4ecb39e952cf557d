"""The baseline: a minimal ``websockets`` server that broadcasts pre-encoded frames.

It is the practical limit for fan-out in Python on this machine: no JSON-RPC routing, no log,
no replay, no outbox, no compression, no pings (unless ``--ping-interval``, for S12); one
``websockets.broadcast()`` call per frame per group, which writes the same bytes to every open
connection of the group.

The wire protocol is a tiny JSON-RPC subset so that the load generator drives it like the hub:

- ``attach {group}``: join a group; result ``{"_meta": {"acp-hub": {"seq": S, "epoch": "e1"}}}``
  where ``S`` is the group's last seq (the next frame carries ``S + 1``);
- ``stream {groups, rate, count, size, starts?}``: broadcast ``count`` frames to each group at
  ``rate`` frames per second per group (``0``: as fast as possible), group ``i``'s first at
  ``starts[i]`` (``CLOCK_MONOTONIC`` seconds; default: at once); answered at once.

Run: ``python -m tests.bench.baseline [--port 0] [--no-uvloop]``; prints
``baseline: listening on http://127.0.0.1:PORT`` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import sys
from collections import defaultdict
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed

from tests.bench import loop
from tests.bench.payload import TICK, baseline_frame, now

__all__ = ["main"]

_groups: defaultdict[str, set[ServerConnection]] = defaultdict(set)
_seqs: defaultdict[str, int] = defaultdict(int)
_tasks: set[asyncio.Task[None]] = set()


async def _emit(
    groups: list[str], rate: float, count: int, size: int, starts: list[float] | None = None
) -> None:
    """Broadcast ``count`` frames to each group; at ``rate`` per group, or as fast as possible.

    Group ``i``'s frame ``k`` (from 0) falls due at ``starts[i] + k / rate``; each
    sleep lasts until the next frame is due, but at least ``TICK`` (as the bench agent's), and
    every frame due by then goes out: first all
    of them are built (each stamped as it is built), then broadcast in order, as the bench
    agent builds every due update (each stamped) and writes them to the hub in one write.
    So in both servers an update's latency counts from when it was made, and the updates
    made in the same instant wait for each other's delivery.
    """
    start = now()
    if rate <= 0:
        n = 0
        while n < count:
            for _ in range(min(count, n + 100) - n):
                n += 1
                for group in groups:
                    _send(group, n, size)
            await asyncio.sleep(0)
        return
    firsts = starts or [start] * len(groups)
    sent = [0] * len(groups)
    due = [(firsts[i], i) for i in range(len(groups))]
    heapq.heapify(due)
    while due:
        t = now()
        made: list[tuple[str, bytes]] = []
        while due and due[0][0] <= t:
            _, i = heapq.heappop(due)
            sent[i] += 1
            made.append(_make(groups[i], sent[i], size))
            if sent[i] < count:
                heapq.heappush(due, (firsts[i] + sent[i] / rate, i))
        for group, frame in made:
            broadcast(_groups[group], frame, text=True)
        if due:
            await asyncio.sleep(max(TICK, due[0][0] - now()))


def _make(group: str, n: int, size: int) -> tuple[str, bytes]:
    seq = _seqs[group] + 1
    _seqs[group] = seq
    return group, baseline_frame(group, seq, n, size)


def _send(group: str, n: int, size: int) -> None:
    broadcast(_groups[group], _make(group, n, size)[1], text=True)


async def _handler(ws: ServerConnection) -> None:
    joined: list[str] = []
    try:
        async for message in ws:
            request: dict[str, Any] = json.loads(message)
            params: dict[str, Any] = request.get("params") or {}
            result: dict[str, Any] = {}
            if request["method"] == "attach":
                group = str(params["group"])
                _groups[group].add(ws)
                joined.append(group)
                result = {"_meta": {"acp-hub": {"seq": _seqs[group], "epoch": "e1"}}}
            elif request["method"] == "stream":
                # The emitter outlives this handler's iteration; it is kept referenced here.
                task = asyncio.get_running_loop().create_task(
                    _emit(
                        [str(g) for g in params["groups"]],
                        float(params["rate"]),
                        int(params["count"]),
                        int(params["size"]),
                        [float(x) for x in params.get("starts") or []] or None,
                    )
                )
                _tasks.add(task)
                task.add_done_callback(_tasks.discard)
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}))
    except ConnectionClosed:
        pass
    finally:
        for group in joined:
            _groups[group].discard(ws)


async def _serve(host: str, port: int, ping_interval: float | None = None) -> None:
    async with serve(
        _handler,
        host,
        port,
        compression=None,
        ping_interval=ping_interval,
        max_size=None,
        backlog=4096,
    ) as server:
        bound = next(iter(server.sockets)).getsockname()[1]
        print(f"baseline: listening on http://{host}:{bound}", flush=True)
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """Run the baseline server until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.baseline")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-uvloop", action="store_true")
    parser.add_argument(
        "--ping-interval", type=float, help="keepalive pings every so many seconds (S12)"
    )
    args = parser.parse_args(argv)
    try:
        if args.no_uvloop:
            asyncio.run(_serve(args.host, args.port, args.ping_interval))
        else:
            loop.run(_serve(args.host, args.port, args.ping_interval))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
