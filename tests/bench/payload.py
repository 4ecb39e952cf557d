"""The bench payload: update text that carries a sequence number and a send timestamp.

Both servers under test (the hub fed by ``agent.py``, the baseline by ``feed.py``) get the
same marker in the text of an ``agent_message_chunk``: ``@n=<number>@ts=<monotonic seconds>@``
followed by padding. The load generator finds the markers with ``bytes.find`` instead of
decoding JSON, so that parsing stays cheaper than the server's work.

``time.monotonic`` is ``CLOCK_MONOTONIC`` on Linux: one clock for every process on the machine,
so a timestamp written by the agent process can be compared with the load generator's clock.
"""

from __future__ import annotations

import time

__all__ = [
    "HUB_META_ESTIMATE",
    "TICK",
    "TS_MARK",
    "baseline_body",
    "baseline_tail",
    "chunk_update",
    "marker",
    "now",
    "pad_text",
]

TS_MARK = b"@ts="
"""Precedes the send timestamp; the timestamp ends at the next ``@``."""

HUB_META_ESTIMATE = 48
"""About what the hub adds to an agent's update: ``,"_meta":{"acp-hub":{"seq":..,"epoch":..}}``."""

now = time.monotonic

TICK = 0.001
"""The shortest sleep of both update generators (the bench agent's scheduler and the
baseline's feed): updates that fall due within it are made, stamped and sent together.

One value for both, so that both servers get the same bursts. Without it the baseline's
emitter of before the feed, on uvloop (whose timers count whole milliseconds), spun through
sub-millisecond sleeps between phased streams' updates: a core kept busy, and every update
made alone at its own instant, while the agent's went to the hub a millisecond's worth at a
time.
"""


def marker(n: int, ts: float) -> str:
    """The marker for update ``n`` sent at ``ts``."""
    return f"@n={n}@ts={ts:.6f}@"


def pad_text(head: str, overhead: int, size: int) -> str:
    """``head`` padded with ``x`` so that the frame (``overhead`` + text) is ``size`` bytes."""
    return head + "x" * max(0, size - overhead - len(head))


def chunk_update(message_id: str, text: str) -> dict[str, object]:
    """A v2 ``agent_message_chunk`` update object."""
    return {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }


_BASELINE_TAIL = '"}},"_meta":{"acp-hub":{"seq":%d,"epoch":"e1"}}}}'
_BASELINE_TAIL_LEN = len(_BASELINE_TAIL % 100_000)
"""About what the tail takes (a six-digit seq), for the padding of a body."""


def baseline_body(group: str, n: int, size: int) -> bytes:
    """The baseline's frame for update ``n`` of ``group``, stamped now, without its tail:
    shaped like the hub's ``session/update``, about ``size`` bytes with the tail.

    The feed (``feed.py``) makes these and the baseline appends ``baseline_tail(seq)``, as the
    bench agent makes the hub's updates and the hub adds the seq. String formatting, not a
    JSON encoder: the baseline is the practical limit, so its per-update work is kept minimal.
    """
    head = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"' + group + '",'
        '"update":{"sessionUpdate":"agent_message_chunk","messageId":"m1",'
        '"content":{"type":"text","text":"'
    )
    return (head + pad_text(marker(n, now()), len(head) + _BASELINE_TAIL_LEN, size)).encode()


def baseline_tail(seq: int) -> bytes:
    """What closes a ``baseline_body``: the rest of the update and the group's ``seq``."""
    return (_BASELINE_TAIL % seq).encode()
