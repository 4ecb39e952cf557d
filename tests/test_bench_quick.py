"""The benchmark scenarios in quick mode: they run end to end and every stream is correct.

No timing is asserted here (that is what ``make bench`` and ``docs/benchmarks.md`` are for);
this test only proves that the harness, the baseline server, the bench agent, the load
generator and the hub work together, and that every observer of every scenario saw its seqs
rise by exactly one, with no duplicate and no gap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hub.settings import Settings
from tests.bench.run import FULL, HUB_CONFIG, HUB_ONLY, QUICK, STORES, problems
from tests.support import ROOT


def test_the_bench_hub_admits_every_full_scenario() -> None:
    # Every bench client is the one principal `local`: the per-principal caps must admit the
    # full scenarios' sessions and connections (the quick ones are far smaller).
    settings = Settings(**HUB_CONFIG)
    sessions = max(p.get("sessions", 1) for p in FULL.values())
    connections = max(p.get("sessions", 1) * p.get("observers", 1) for p in FULL.values())
    assert settings.max_sessions_per_principal >= sessions
    assert settings.max_sessions >= sessions
    assert settings.max_connections_per_principal > connections
    assert settings.max_connections > connections


@pytest.mark.slow
def test_quick_bench_runs_every_scenario_correctly(tmp_path: Path) -> None:
    raw = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.run", "--quick", "--json", str(raw)],
        cwd=ROOT,
        capture_output=True,
        timeout=180,
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
        kinds = set(STORES.get(name, kinds))
        assert set(run) == kinds, name
        for kind, result in run.items():
            assert "figures" in result, (name, kind, result.get("error"), log)
            assert problems(name, result) == [], (name, kind, result["correctness"])
            assert result["correctness"]["observers"] > 0
    # (S2-nodes has no plain `hub` run: its kinds are the Redis hub on one node and on two.)
    by_name = {o["name"]: o["runs"][0]["hub"] for o in outcomes if "hub" in o["runs"][0]}
    # The slow consumer was closed with 1013, and the late joiner's replay held the preload.
    assert by_name["S7"]["figures"]["close_code"] == 1013
    assert by_name["S4"]["correctness"]["replay_covers_preload"] == 1
    assert by_name["S5"]["correctness"]["blip_gaps"] == 0
    # The flooder that never reads was refused by the request rate and closed with 1013,
    # and the other client was answered throughout.
    s9 = by_name["S9"]
    assert s9["figures"]["flooder_close_code"] == 1013
    assert s9["detail"]["floods"][0]["rate_limited"] > 0
    assert s9["correctness"]["flooders_closed_1013"] == s9["correctness"]["flooders_closed"]
    assert s9["correctness"]["normal_answered"] == 1
    # Every client of the killed node was live again on another, and the scale-out runs
    # measured the servers' CPU.
    runs = {o["name"]: o["runs"][0] for o in outcomes}
    storm = runs["S10"]["hub-3nodes"]
    assert storm["correctness"]["all_live"] == 1
    assert storm["figures"]["all_live_s"] >= storm["figures"]["live_p50_s"] > 0
    for kind in ("hub-redis", "hub-spread"):
        assert runs["S2-scale"][kind]["figures"]["server_cpu"] > 0
    assert done.returncode == 0, log


@pytest.mark.slow
@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
    reason="placement needs at least two CPUs and sched_setaffinity",
)
def test_a_misplaced_agent_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The placement in the report is read back from the kernel: an agent that does not pin
    # itself (it inherits the server's core) makes the run fail instead of skewing it.
    from tests.bench import run, servers

    start_hub = servers.start_hub

    def unpinned_agent(log: Path, cpus: set[int] | None, agent: object, **kw: Any) -> Any:
        return start_hub(log, cpus, None, **kw)

    monkeypatch.setattr(run, "start_hub", unpinned_agent)
    place = run.Placement.choose(True)
    result = run.run_one("S2", "hub", {**QUICK["S2"], "size": 280}, place, tmp_path, 0, 100)
    assert result["placement"]["agent"] == sorted(place.server or [])
    assert any(p.startswith("misplaced: agent") for p in problems("S2", result)), result
