"""A worker of S12 holding a share of its idle connections, in a process of its own.

``python -m tests.bench.idle '<json spec>'`` with ``{"kind", "host", "port", "sessions":
[[id, epoch], ...], "count", "offset", "source", "concurrency"}``: it opens ``count``
connections from the local address ``source``, initialized and attached (live) to the
sessions in turn, starting at ``offset``, prints ``{"ready": n}`` and then answers the
server's pings. On a ``check`` line on stdin it waits (up to 60 s) until every connection has
one stamped update more than when they were all open, and prints its correctness record as
one JSON line.

Twenty thousand sockets do not fit in one process under this machine's open-file limit
(20,000 hard), and one source address has about 28,000 ephemeral ports: several workers,
each on its own ``127.0.0.x``, hold them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.bench import loop
from tests.bench.loadgen import raise_nofile
from tests.bench.payload import now
from tests.bench.scenarios import wait_until
from tests.bench.targets import Session, make_target, open_from
from tests.bench.wsclient import Conn, Recorder

__all__ = ["main"]


async def _run(spec: dict[str, Any]) -> None:
    target = make_target(spec["kind"], spec["host"], int(spec["port"]))
    recorder = Recorder()
    ids: list[tuple[str, Any]] = [(str(s[0]), s[1]) for s in spec["sessions"]]
    gate = asyncio.Semaphore(int(spec.get("concurrency", 100)))

    async def one(i: int) -> Conn:
        async with gate:
            conn = await open_from(target, recorder, spec["source"])
            sid, epoch = ids[(int(spec["offset"]) + i) % len(ids)]
            await target.attach(conn, Session(sid, epoch, conn))
            return conn

    t0 = now()
    conns = list(await asyncio.gather(*(one(i) for i in range(int(spec["count"])))))
    # The update of the check may arrive before the check line: count from here.
    goals = [c.marks + 1 for c in conns]
    print(json.dumps({"ready": len(conns), "open_s": now() - t0}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await wait_until(
        lambda: all(c.closed.done() or c.marks >= g for c, g in zip(conns, goals, strict=True)),
        within=60.0,
        every=0.05,
    )
    record = {
        "observers": len(conns),
        "duplicates": sum(c.duplicates for c in conns),
        "gaps": sum(c.gaps for c in conns),
        "resets": sum(c.resets for c in conns),
        "number_gaps": sum(c.number_gaps for c in conns),
        "number_duplicates": sum(c.number_duplicates for c in conns),
        "closed": sum(1 for c in conns if c.closed.done()),
        "undelivered": sum(1 for c, g in zip(conns, goals, strict=True) if c.marks < g),
    }
    print(json.dumps(record), flush=True)
    for conn in conns:
        conn.abort()


def main(argv: list[str] | None = None) -> int:
    """Hold the connections of the spec in ``argv[0]``; see the module docstring."""
    args = sys.argv[1:] if argv is None else argv
    raise_nofile()
    loop.run(_run(json.loads(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
