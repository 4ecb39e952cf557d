"""The rate-limited log of a client's mistakes."""

from __future__ import annotations

import logging

import pytest

from hub.mistakes import MistakeLog


def test_a_burst_then_one_line_per_interval_saying_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hub.test")
    now = [100.0]
    mistake = MistakeLog(
        logging.getLogger("hub.test"), "c-1", burst=3, interval=2.0, clock=lambda: now[0]
    )
    logged = [mistake("bad %s", i) for i in range(10)]
    assert logged == [True] * 3 + [False] * 7
    assert mistake.suppressed == 7
    now[0] += 1.0
    assert not mistake("still bad")  # half a line's worth of time
    now[0] += 1.0
    assert mistake("bad again")
    assert [r.getMessage() for r in caplog.records] == [
        "! c-1: bad 0",
        "! c-1: bad 1",
        "! c-1: bad 2",
        "! c-1: bad again (8 similar lines left out)",
    ]
    assert all(r.levelno == logging.INFO and r.exc_info is None for r in caplog.records)
    now[0] += 3600.0
    assert [mistake("x") for _ in range(4)] == [True, True, True, False]  # the burst, no more
