"""The bench's reading of a takeover from the nodes' logs (``tests/bench/nodelog.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.nodelog import log_time, takeover

LOG = """\
acp-hub: listening on http://127.0.0.1:4000
2026-12-03 10:08:14,889 I hub.sessions = s-1: new session on agent bench (bench-1)
2026-12-03 10:08:19,279 W hub.sessions ! cluster: node n-c stopped its heartbeat: this node \
takes 1 of its sessions
2026-12-03 10:08:19,283 I hub.sessions = s-1: restored (epoch 7, seq 19, continued after an \
unclean stop)
2026-12-03 10:08:19,290 I hub.sessions = s-1: agent bench took the session back
"""


def test_the_claim_is_the_heartbeat_line_and_serving_the_agent_taking_the_session_back(
    tmp_path: Path,
) -> None:
    other = tmp_path / "a.log"
    other.write_text("2026-12-03 10:08:19,100 I hub.server = nothing about s-1\n")
    taker = tmp_path / "b.log"
    taker.write_text(LOG)
    kill = log_time(b"2026-12-03 10:08:16,000 x")
    assert kill is not None
    found = takeover([str(other), str(taker), str(tmp_path / "gone.log")], "s-1", kill)
    assert found is not None
    assert found.log == str(taker)
    assert found.claimed - kill == pytest.approx(3.279, abs=1e-3)
    assert found.serving is not None
    assert found.serving - found.claimed == pytest.approx(0.011, abs=1e-3)


def test_a_claim_by_a_scan_is_its_restored_line_and_earlier_lines_do_not_count(
    tmp_path: Path,
) -> None:
    log = tmp_path / "a.log"
    lines = LOG.splitlines(keepends=True)
    log.write_text("".join(line for line in lines if "heartbeat" not in line))
    kill = log_time(b"2026-12-03 10:08:16,000 x")
    assert kill is not None
    found = takeover([str(log)], "s-1", kill)
    assert found is not None
    assert found.claimed - kill == pytest.approx(3.283, abs=1e-3)
    assert takeover([str(log)], "s-1", kill + 10) is None
    assert takeover([str(log)], "s-2", kill) is None
