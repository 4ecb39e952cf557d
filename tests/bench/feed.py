"""The baseline's feed: the process that makes and stamps the updates the baseline broadcasts.

The hub's updates are made by the bench agent (``agent.py``), a process of its own on the load
generator's core, which stamps each update as it makes it and writes it to the hub's pipe. This
process does the same for the baseline (``baseline.py``), so that both servers are measured
from the same point: an update stamped by another process, read from a pipe, sent on.

Until the twenty-first measurements the baseline made its updates itself, on its own core. A
stall of its event loop or of its process then came before the stamp and did not count: the
updates due meanwhile were stamped late, not delivered late. The hub's stalls counted in full,
and the load generator's core carried the bench agent in the hub's runs and nothing in the
baseline's.

``python -m tests.bench.feed '<json spec>'`` with ``{"groups": [...], "rate", "count", "size",
"starts": [...] | null, "cpus": [...]}`` writes ``count`` updates per group on stdout, one line
each: the group's index, a space, and the frame without its tail (``payload.baseline_body``;
the baseline appends the tail with the group's seq). Group ``i``'s update ``k`` (from 0) falls
due at ``starts[i] + k / rate``; the feed sleeps until the next is due, but at least ``TICK``,
and writes every update due by then in one write, stamped as it is made, as the bench agent's
scheduler does. ``rate`` 0: as fast as the pipe takes them. It exits when done or when the
pipe closes.
"""

from __future__ import annotations

import heapq
import json
import os
import sys
import time

from tests.bench.payload import TICK, baseline_body, now

__all__ = ["main"]


def _write(out: int, lines: list[bytes]) -> None:
    data = b"".join(lines)
    while data:
        data = data[os.write(out, data) :]


def feed(
    groups: list[str], rate: float, count: int, size: int, starts: list[float] | None, out: int
) -> None:
    """Write the stream of the module docstring on the file descriptor ``out``."""
    if rate <= 0:
        n = 0
        while n < count:
            lines: list[bytes] = []
            for _ in range(min(count, n + 100) - n):
                n += 1
                lines += [b"%d %s\n" % (i, baseline_body(g, n, size)) for i, g in enumerate(groups)]
            _write(out, lines)
        return
    start = now()
    firsts = starts or [start] * len(groups)
    sent = [0] * len(groups)
    due = [(firsts[i], i) for i in range(len(groups))]
    heapq.heapify(due)
    while due:
        t = now()
        lines = []
        while due and due[0][0] <= t:
            _, i = heapq.heappop(due)
            sent[i] += 1
            lines.append(b"%d %s\n" % (i, baseline_body(groups[i], sent[i], size)))
            if sent[i] < count:
                heapq.heappush(due, (firsts[i] + sent[i] / rate, i))
        _write(out, lines)
        if due:
            time.sleep(max(TICK, due[0][0] - now()))


def main(argv: list[str] | None = None) -> int:
    """Run the feed of the spec in ``argv[0]``."""
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    cpus = spec.get("cpus")
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus})
    try:
        feed(
            [str(g) for g in spec["groups"]],
            float(spec["rate"]),
            int(spec["count"]),
            int(spec["size"]),
            [float(x) for x in spec.get("starts") or []] or None,
            sys.stdout.fileno(),
        )
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
