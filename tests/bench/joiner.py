"""The late joiner of scenario S4, in a process of its own: ``python -m tests.bench.joiner SPEC``.

The spec is ``{"host", "port", "session", "epoch", "replay"}``: the hub's address, the session
to attach to, and the ``replayFrom`` to attach with. The process opens and initializes one
connection, then talks to the scenario over its standard streams, one line each way:

1. it prints ``ready`` once the connection is initialized;
2. on ``go`` (a line on stdin) it attaches, and prints ``live`` when the first live update
   after the replay has arrived (or ``late`` if none came within 30 s);
3. on ``stop`` it prints one JSON line: the times (``CLOCK_MONOTONIC``, the clock of every
   process of the machine) of the attach request, its answer and the first live update, what
   the replay brought, and the stream checks of ``scenarios.correctness``; then it closes.

Why a process of its own: the replay is a thousand frames (5 MB in the full scenario) that the
joiner parses and checks as they come. In the load generator's process, that parsing held up
the event loop that timestamps the other observers' updates, so the scenario's figure (the
others' p99 with the joiner against without) counted the load generator's work as the hub's.
The joiner stands for a client on another machine: it shares the load generator's core here,
at nice 19, so that it never takes the CPU from the process that measures.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from tests.bench import loop
from tests.bench.payload import now
from tests.bench.scenarios import correctness, wait_until
from tests.bench.targets import HubTarget, Session
from tests.bench.wsclient import Recorder

__all__ = ["main"]

LIVE_WITHIN = 30.0
"""How long the joiner waits for its first live update after attaching."""


async def _stdin_lines() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    loop_ = asyncio.get_running_loop()
    await loop_.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _expect(commands: asyncio.StreamReader, word: str) -> None:
    line = (await commands.readline()).decode().strip()
    if line != word:
        raise RuntimeError(f"joiner: expected {word!r}, got {line!r}")


async def _run(spec: dict[str, Any]) -> dict[str, Any]:
    commands = await _stdin_lines()
    target = HubTarget(spec["host"], int(spec["port"]))
    joiner = await target.open(Recorder())
    session = Session(str(spec["session"]), spec.get("epoch"), joiner)
    _say("ready")
    await _expect(commands, "go")
    t0 = now()
    seq = await target.attach(joiner, session, spec.get("replay"))
    answered = now()
    arrived = await wait_until(lambda: joiner.first_live_at is not None, within=LIVE_WITHIN)
    _say("live" if arrived else "late")
    await _expect(commands, "stop")
    result = {
        "t0": t0,
        "answered": answered,
        "first_live_at": joiner.first_live_at,
        "response_seq": seq,
        "replay_frames": joiner.replay_frames,
        "replay_bytes": joiner.frame_bytes,
        "replay_marks": joiner.replay_marks,
        "correctness": correctness([joiner]),
    }
    joiner.close()
    if not await wait_until(joiner.closed.done, within=10):
        joiner.abort()
    return result


def main(argv: list[str] | None = None) -> int:
    """Join as ``argv[0]`` (a JSON spec) says; print the record."""
    args = sys.argv[1:] if argv is None else argv
    os.nice(19)
    result = loop.run(_run(json.loads(args[0])))
    _say(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
