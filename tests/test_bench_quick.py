"""The benchmark scenarios in quick mode: they run end to end and every stream is correct.

No timing is asserted here (that is what ``make bench`` and ``docs/benchmarks.md`` are for);
this test only proves that the harness, the baseline server, the bench agent, the load
generator and the hub work together, and that every observer of every scenario saw its seqs
rise by exactly one, with no duplicate and no gap.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.run import HUB_ONLY, QUICK, problems
from tests.support import ROOT

pytestmark = pytest.mark.slow


def test_quick_bench_runs_every_scenario_correctly(tmp_path: Path) -> None:
    raw = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.run", "--quick", "--json", str(raw)],
        cwd=ROOT,
        capture_output=True,
        timeout=110,
        check=False,
    )
    log = done.stderr.decode(errors="replace")
    assert raw.exists(), log
    outcomes: list[dict[str, Any]] = json.loads(raw.read_text())
    assert [o["name"] for o in outcomes] == list(QUICK)
    for outcome in outcomes:
        name = outcome["name"]
        (run,) = outcome["runs"]
        kinds = {"hub"} if name in HUB_ONLY else {"baseline", "hub"}
        assert set(run) == kinds, name
        for kind, result in run.items():
            assert "figures" in result, (name, kind, result.get("error"), log)
            assert problems(name, result) == [], (name, kind, result["correctness"])
            assert result["correctness"]["observers"] > 0
    by_name = {o["name"]: o["runs"][0]["hub"] for o in outcomes}
    # The slow consumer was closed with 1013, and the late joiner's replay held the preload.
    assert by_name["S7"]["figures"]["close_code"] == 1013
    assert by_name["S4"]["correctness"]["replay_covers_preload"] == 1
    assert by_name["S5"]["correctness"]["blip_gaps"] == 0
    assert done.returncode == 0, log
