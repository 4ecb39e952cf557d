"""The bench agent: an ACP v2 agent over stdio that streams stamped updates at a given rate.

``session/prompt`` text (or the ``ACP_HUB_BENCH_PROMPT`` environment variable when the prompt
text is empty) holds ``key=value`` words:

- ``rate``: updates per second (``0``: as fast as the pipe takes them; default ``100``);
- ``count``: how many updates (default ``1000``);
- ``size``: about how many bytes each update takes on the hub's wire (default ``280``);
- ``per_message``: chunks per message id (default ``100``), so that a long session compacts
  into many messages rather than one enormous one;
- ``variant``: ``chunk`` (default) or ``title``: ``session_info_update`` snapshots whose
  title carries the marker, so that the session's state does not grow (memory scenarios);
- ``start``: when the first update is due, in ``CLOCK_MONOTONIC`` seconds (the same clock in
  every process of the machine; default: at once), so that the load generator decides which
  streams are in step and which are not (see ``Target.stream``).

The prompt is accepted at once (v2: ``{}``), then the agent sends ``user_message``,
``state_update running``, ``count`` ``agent_message_chunk`` updates whose text starts with
``payload.marker`` (its own number and the monotonic send time), and ``state_update idle``
with ``end_turn`` (``cancelled`` after ``session/cancel``). One scheduler wakes when
the next update is due (at most once a millisecond) and writes every update that is due,
for all sessions, in one write.

Two plain threads, no event loop: the main one reads and answers requests, the scheduler
sleeps (``threading.Event.wait``, woken early by a new prompt or a cancellation) and writes;
one lock keeps the streams and the writes in order. The agent shares the load generator's
core, and its ticks, a thousand a second, cost a sleep each this way: on an asyncio loop
(uvloop) each tick was a timer, a task and an epoll round, and the agent took 17-18% of that
core at 24 updates/s per session in S2-phased, beside the load generator's 60%.

``--cpus 1`` (comma-separated CPU numbers) pins the agent, so that it does not share the
server's core. It is an argument, not an environment variable: the hub gives its agents only
the variables of ``hub.agents.process.ENV_KEEP`` and their spec's own ``env``.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

if not __package__:
    # Run as ``python tests/bench/agent.py``: make the repository importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.payload import (
    HUB_META_ESTIMATE,
    TICK,
    chunk_update,
    marker,
    now,
    pad_text,
)

__all__ = ["main"]


@dataclass
class _Stream:
    session_id: str
    rate: float
    count: int
    size: int
    per_message: int
    turn: int
    variant: str
    sent: int = 0
    start: float = field(default_factory=now)
    cancelled: bool = False
    overhead: int = 0


class _Agent:
    def __init__(self) -> None:
        self.out = sys.stdout.buffer
        self.sessions = itertools.count(1)
        self.turns = itertools.count(1)
        self.streams: dict[str, _Stream] = {}
        self.wake = threading.Event()
        self.lock = threading.Lock()
        """Held while the streams change and while lines are written."""
        self.due: list[tuple[float, int, str]] = []
        self.order = itertools.count()

    def write(self, lines: list[bytes]) -> None:
        if lines:
            self.out.write(b"".join(lines))
            self.out.flush()

    @staticmethod
    def line(message: dict[str, Any]) -> bytes:
        return orjson.dumps(message) + b"\n"

    def update(self, session_id: str, update: dict[str, Any]) -> bytes:
        return self.line(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
        )

    def handle(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        rid = message.get("id")
        params: dict[str, Any] = message.get("params") or {}
        if method is None or rid is None:
            if method == "session/cancel":
                stream = self.streams.get(str(params.get("sessionId")))
                if stream is not None:
                    stream.cancelled = True
                    heapq.heappush(self.due, (now(), next(self.order), stream.session_id))
                    self.wake.set()
            return
        result: dict[str, Any] | None = None
        if method == "initialize":
            result = {
                "protocolVersion": min(int(params.get("protocolVersion", 2)), 2),
                "info": {"name": "acp-hub-bench-agent", "version": "0.1.0"},
                "capabilities": {"session": {}},
                "authMethods": [],
            }
        elif method == "session/new":
            result = {"sessionId": f"bench-{next(self.sessions)}"}
        elif method in ("session/resume", "session/close", "session/delete"):
            result = {}
        elif method == "session/list":
            result = {"sessions": []}
        elif method == "session/prompt":
            self.write([self.line({"jsonrpc": "2.0", "id": rid, "result": {}})])
            self.prompt(str(params["sessionId"]), params.get("prompt") or [])
            return
        if result is None:
            error = {"code": -32601, "message": f"method not found: {method}"}
            self.write([self.line({"jsonrpc": "2.0", "id": rid, "error": error})])
        else:
            self.write([self.line({"jsonrpc": "2.0", "id": rid, "result": result})])

    def prompt(self, session_id: str, prompt: list[dict[str, Any]]) -> None:
        text = " ".join(str(b.get("text", "")) for b in prompt if b.get("type") == "text")
        if not text.strip():
            text = os.environ.get("ACP_HUB_BENCH_PROMPT", "")
        words = dict(w.split("=", 1) for w in text.split() if "=" in w)
        turn = next(self.turns)
        stream = _Stream(
            session_id=session_id,
            rate=float(words.get("rate", 100)),
            count=int(words.get("count", 1000)),
            size=int(words.get("size", 280)),
            per_message=max(1, int(words.get("per_message", 100))),
            turn=turn,
            variant=words.get("variant", "chunk"),
            start=float(words["start"]) if "start" in words else now(),
        )
        probe = self.update(session_id, chunk_update(f"t{turn}-m000000", ""))
        stream.overhead = len(probe) - 1 + HUB_META_ESTIMATE
        user = {
            "sessionUpdate": "user_message",
            "messageId": f"t{turn}-u",
            "content": [{"type": "text", "text": text}],
        }
        running = {"sessionUpdate": "state_update", "state": "running"}
        self.write([self.update(session_id, user), self.update(session_id, running)])
        self.streams[session_id] = stream
        heapq.heappush(self.due, (stream.start, next(self.order), session_id))
        self.wake.set()

    def _line_for(self, sid: str, s: _Stream) -> bytes:
        s.sent += 1
        mid = f"t{s.turn}-m{(s.sent - 1) // s.per_message:06d}"
        text = pad_text(marker(s.sent, now()), s.overhead, s.size)
        update: dict[str, object]
        if s.variant == "title":
            update = {"sessionUpdate": "session_info_update", "title": text}
        else:
            update = chunk_update(mid, text)
        return self.update(sid, update)

    def _finish(self, sid: str, s: _Stream, lines: list[bytes]) -> None:
        reason = "cancelled" if s.cancelled else "end_turn"
        idle = {"sessionUpdate": "state_update", "state": "idle", "stopReason": reason}
        lines.append(self.update(sid, idle))
        del self.streams[sid]

    def due_lines(self) -> tuple[list[bytes], float]:
        """Every update that is due now, and how long until the next one is.

        Streams wait in a heap ordered by when their next update is due, so that a tick
        costs what is due, not one look at every stream (200 streams at 24 updates/s each
        would otherwise cost a pass over all of them for each of 4,800 updates a second).
        """
        lines: list[bytes] = []
        t = now()
        heap = self.due
        while heap and (heap[0][0] <= t or self.streams.get(heap[0][2]) is None):
            _, _, sid = heapq.heappop(heap)
            s = self.streams.get(sid)
            if s is None:
                continue
            if s.cancelled:
                self._finish(sid, s, lines)
                continue
            wanted = s.sent + 200 if s.rate <= 0 else int((t - s.start) * s.rate) + 1
            target = min(s.count, wanted)
            while s.sent < target:
                lines.append(self._line_for(sid, s))
            if s.sent >= s.count:
                self._finish(sid, s, lines)
                continue
            due = t if s.rate <= 0 else s.start + s.sent / s.rate
            heapq.heappush(heap, (due, next(self.order), sid))
        wait = max(0.0, heap[0][0] - now()) if heap else 1.0
        return lines, wait

    def pump(self) -> None:
        """The scheduler thread: write what is due, then sleep until the next is."""
        while True:
            with self.lock:
                lines, wait = self.due_lines()
                try:
                    self.write(lines)
                except (BrokenPipeError, ValueError):
                    return  # the hub is gone
                idle = not self.streams
            if idle:
                self.wake.wait()
            elif not self.wake.is_set():
                # Sleep at least a millisecond: updates due within it go out in one write.
                self.wake.wait(max(TICK, wait))
            self.wake.clear()

    def run(self) -> None:
        """Answer requests from stdin until it closes (the scheduler runs beside)."""
        threading.Thread(target=self.pump, name="scheduler", daemon=True).start()
        for line in sys.stdin.buffer:
            if line.strip():
                message = orjson.loads(line)
                with self.lock:
                    self.handle(message)


def main() -> int:
    """Serve ACP v2 on stdin/stdout until stdin closes."""
    parser = argparse.ArgumentParser(prog="tests/bench/agent.py")
    parser.add_argument("--cpus", default="", help="comma-separated CPUs to pin the agent to")
    cpus = parser.parse_args().cpus
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        except (OSError, ValueError):
            pass
    try:
        _Agent().run()
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
