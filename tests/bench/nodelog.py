"""When a surviving node took a killed node's session over, read from the nodes' logs.

A node logs, with a millisecond wall-clock stamp, ``! cluster: node X stopped its heartbeat:
this node takes N of its sessions`` when it has claimed them, then ``= <session>: restored``
for each, and ``= <session>: agent <name> took the session back`` once the agent runs it
again (``hub.sessions.cluster``, ``hub.sessions.registry``, ``hub.sessions.restore``). A
session claimed by a scan instead (its lease ran out) has no heartbeat line: its ``restored``
line is the claim. The load generator compares these stamps with the wall-clock time of the
kill (one clock: the machine's).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Takeover", "log_time", "takeover"]

_STAMP = re.compile(rb"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_HEARTBEAT = b"stopped its heartbeat"


def log_time(line: bytes) -> float | None:
    """The wall-clock time (``time.time()`` seconds) a log line was written, if stamped."""
    match = _STAMP.match(line)
    if match is None:
        return None
    stamp = datetime.datetime.strptime(match.group(1).decode(), "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()  # the log's stamps are local time, as is a naive datetime's


@dataclass
class Takeover:
    """Where and when a session was taken over (wall-clock seconds)."""

    log: str
    claimed: float
    """The claiming node's heartbeat line (or the ``restored`` line without one)."""
    serving: float | None
    """The agent took the session back on the new owner (None: not in the log)."""


def takeover(logs: Sequence[str], session_id: str, after: float) -> Takeover | None:
    """The first takeover of ``session_id`` logged at or after ``after`` in ``logs``."""
    restored = f"= {session_id}: restored".encode()
    took_back = f"= {session_id}: agent ".encode()
    found: list[Takeover] = []
    for path in logs:
        try:
            lines = Path(path).read_bytes().splitlines()
        except OSError:
            continue
        heartbeat: float | None = None
        claimed: float | None = None
        for line in lines:
            t = log_time(line)
            if t is None or t < after - 0.001:
                continue
            if claimed is None:
                if _HEARTBEAT in line:
                    heartbeat = t
                elif restored in line:
                    claimed = heartbeat if heartbeat is not None else t
            elif took_back in line and b"took the session back" in line:
                found.append(Takeover(path, claimed, t))
                break
        else:
            if claimed is not None:
                found.append(Takeover(path, claimed, None))
    return min(found, key=lambda f: f.claimed) if found else None
