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
  ``starts[i]`` (``CLOCK_MONOTONIC`` seconds; default: at once); answered at once. The
  frames come from a feed, a process of their own (``feed.py``), as the hub's come from the
  bench agent.

Run: ``python -m tests.bench.baseline [--port 0] [--no-uvloop] [--feed-cpus 1]``; prints
``baseline: listening on http://127.0.0.1:PORT`` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from typing import Any

from websockets.asyncio.server import ServerConnection, broadcast, serve
from websockets.exceptions import ConnectionClosed

from tests.bench import loop
from tests.bench.payload import baseline_tail

__all__ = ["main"]

_groups: defaultdict[str, set[ServerConnection]] = defaultdict(set)
_seqs: defaultdict[str, int] = defaultdict(int)
_tasks: set[asyncio.Task[None]] = set()
FEED_CPUS: list[int] = []
"""Where the feeds run (``--feed-cpus``; empty: wherever the kernel likes)."""


async def _relay(
    groups: list[str], rate: float, count: int, size: int, starts: list[float] | None
) -> None:
    """Broadcast what a feed (``feed.py``) makes for ``groups``: ``count`` frames each, at
    ``rate`` per group (``0``: as fast as possible), group ``i``'s first at ``starts[i]``.

    The feed runs on ``FEED_CPUS`` (the load generator's core, where the bench agent runs for
    the hub), stamps every update as it makes it and writes those due together in one write;
    this reads them from its pipe, appends each group's next seq and broadcasts them in order,
    as the hub reads the bench agent's lines and fans them out. So in both servers an
    update's latency counts from when another process made it, stalls of the server included.
    """
    spec = {
        "groups": groups,
        "rate": rate,
        "count": count,
        "size": size,
        "starts": starts,
        "cpus": FEED_CPUS,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.bench.feed", json.dumps(spec), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    rest = b""
    try:
        while chunk := await proc.stdout.read(1 << 16):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                index, body = line.split(b" ", 1)
                group = groups[int(index)]
                seq = _seqs[group] + 1
                _seqs[group] = seq
                broadcast(_groups[group], body + baseline_tail(seq), text=True)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


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
                # The relay outlives this handler's iteration; it is kept referenced here.
                task = asyncio.get_running_loop().create_task(
                    _relay(
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
    parser.add_argument("--feed-cpus", default="", help="comma-separated CPUs for the feeds")
    args = parser.parse_args(argv)
    FEED_CPUS[:] = [int(c) for c in args.feed_cpus.split(",") if c]
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
