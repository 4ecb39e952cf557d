"""The benchmark scenarios in quick mode: they run end to end and every stream is correct.

No timing is asserted here (that is what ``make bench`` and ``docs/benchmarks.md`` are for);
this test only proves that the harness, the baseline server, the bench agent, the load
generator and the hub work together, and that every observer of every scenario saw its seqs
rise by exactly one, with no duplicate and no gap.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hub.settings import Settings
from tests.bench.budget import estimate
from tests.bench.run import (
    FULL,
    HUB_CONFIG,
    HUB_ONLY,
    MACHINE_ENTRY,
    QUICK,
    STORES,
    WIDE,
    Outcome,
    _verdict,
    problems,
)
from tests.support import ROOT


def test_the_bench_hub_admits_every_full_scenario() -> None:
    # Every bench client is the one principal `local`: the per-principal caps must admit the
    # full scenarios' sessions and connections (the quick ones are far smaller).
    # A scenario's own `hub_config` adds to the bench's (S11 and S12 open more connections).
    for name, p in FULL.items():
        settings = Settings(**{**HUB_CONFIG, **p.get("hub_config", {})})
        sessions = p.get("sessions", 1)
        connections = max(sessions * p.get("observers", 1), p.get("connections", 0))
        assert settings.max_sessions_per_principal >= sessions, name
        assert settings.max_sessions >= sessions, name
        assert settings.max_connections_per_principal > connections, name
        assert settings.max_connections > connections, name


def test_the_full_bench_fits_in_a_round() -> None:
    # The estimate from the parameters (tests/bench/budget.py): `make bench` within 25
    # minutes on this kind of machine, S11 and S12 included.
    times = estimate(FULL, quick=False)
    assert set(times) == set(FULL)
    assert sum(times.values()) <= 25 * 60, times
    assert sum(estimate(QUICK, quick=True).values()) < sum(times.values()) / 4


def _s7(run: dict[str, Any]) -> None:
    # The slow consumer was closed with 1013.
    assert run["hub"]["figures"]["close_code"] == 1013


def _s4(run: dict[str, Any]) -> None:
    # The late joiner (a process of its own) got a replay that held the preload and went live,
    # and its stream checks count with the others'.
    s4 = run["hub"]
    assert s4["correctness"]["replay_covers_preload"] == 1
    assert s4["correctness"]["joiner_live"] == 1
    assert s4["correctness"]["observers"] == QUICK["S4"]["observers"] + 1
    assert s4["figures"]["attach_to_live_s"] > 0
    assert s4["detail"]["replay_frames"] > 0


def _s5(run: dict[str, Any]) -> None:
    assert run["hub"]["correctness"]["blip_gaps"] == 0


def _s9(run: dict[str, Any]) -> None:
    # The flooder that never reads was refused by the request rate and closed with 1013, and
    # the other client was answered throughout.
    s9 = run["hub"]
    assert s9["figures"]["flooder_close_code"] == 1013
    assert s9["detail"]["floods"][0]["rate_limited"] > 0
    assert s9["correctness"]["flooders_closed_1013"] == s9["correctness"]["flooders_closed"]
    assert s9["correctness"]["normal_answered"] == 1


def _s10(run: dict[str, Any]) -> None:
    # Every client of the killed node was live again on another.
    storm = run["hub-3nodes"]
    assert storm["correctness"]["all_live"] == 1
    assert storm["figures"]["all_live_s"] >= storm["figures"]["live_p50_s"] > 0


def _s10_owner(run: dict[str, Any]) -> None:
    # The killed node owned the session: another node claimed it, its agent served it again,
    # and every client of the killed node was live again on the others.
    storm = run["hub-3nodes"]
    assert storm["correctness"]["all_live"] == 1
    figures = storm["figures"]
    assert figures["detection_s"] > 0, figures
    assert figures["takeover_s"] >= 0, figures
    assert figures["all_live_s"] >= figures["detection_s"] + figures["takeover_s"], figures


def _s13(run: dict[str, Any]) -> None:
    # The owner was killed; the prompt sent 2 s later through another node ran once the next
    # owner served the session, its turn ended, and nobody saw an error.
    failover = run["hub-3nodes"]
    c, figures = failover["correctness"], failover["figures"]
    assert c["turn_ended"] == 1, c
    assert c["all_delivered"] == 1, c
    assert c["errors_surfaced"] == 0, failover["detail"]
    assert figures["detection_s"] > 0, figures
    assert figures["takeover_s"] >= 0, figures
    assert figures["turn_end_s"] > 2.0, figures  # the prompt left 2 s after the kill
    assert figures["turn_end_s"] == pytest.approx(
        figures["detection_s"] + figures["takeover_s"] + figures["rest_s"]
    )


def _s2_scale(run: dict[str, Any]) -> None:
    # The scale-out runs measured the servers' CPU, at every step (the best step's figure is
    # missing when no step kept its p99 under the limit, as on a loaded machine).
    for kind in ("hub-redis", "hub-spread"):
        steps = run[kind]["detail"]["steps"]
        assert steps, kind
        assert all(step["server_cpu"] > 0 for step in steps), (kind, steps)


def _s11(run: dict[str, Any]) -> None:
    # Every observer got every update of the window, on both servers at the same rate, every
    # sampled one some within the window itself (latencies measured), and the memory per
    # observer was measured.
    assert run["hub"]["figures"]["rate"] == run["baseline"]["figures"]["rate"]
    for kind in ("baseline", "hub"):
        figures = run[kind]["figures"]
        assert run[kind]["correctness"]["sampled_delivered"] == 1, (kind, run[kind]["detail"])
        assert figures["deliveries_per_s"] > 0, (kind, figures)
        assert figures["p99_ms"] == figures["p99_ms"], (kind, figures)  # not NaN
        assert figures["lost"] == 0, (kind, figures)
        assert figures["kb_per_observer"] > 0, (kind, figures)
        assert run[kind]["detail"]["sampled"] < run[kind]["correctness"]["observers"]


def _s12(run: dict[str, Any]) -> None:
    # Every idle connection stayed open through the pings and got the update sent after.
    for kind in ("baseline", "hub"):
        result = run[kind]
        assert result["correctness"]["all_delivered"] == 1, (kind, result["detail"])
        assert result["figures"]["connections"] == QUICK["S12"]["connections"], kind
        assert result["figures"]["server_cpu"] > 0, kind


def _s2_cpu(run: dict[str, Any]) -> None:
    # Each server's own CPU over the window is read, so that a saturated server shows; and
    # that of the process that makes the updates (the hub's bench agent, the baseline's feed)
    # and of Redis, which share the load generator's core.
    # Read from `/proc` in clock ticks (10 ms): over a quick window a few hundred updates a
    # second may round to 0, so the readings' presence is checked here, and their size in
    # the full invocation's report.
    for kind, result in run.items():
        step = result["detail"]["step"]
        assert 0.0 <= step["server_cpu"] < math.inf, (kind, step)
        assert "agent_cpu" in step, (kind, step)
        assert ("redis_cpu" in step) == (kind == "hub-redis"), (kind, step)


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "S2": _s2_cpu,
    "S2-phased": _s2_cpu,
    "S2-store": _s2_cpu,
    "S11": _s11,
    "S12": _s12,
    "S4": _s4,
    "S5": _s5,
    "S7": _s7,
    "S9": _s9,
    "S10": _s10,
    "S10-owner": _s10_owner,
    "S13": _s13,
    "S2-scale": _s2_scale,
}
"""What a scenario's quick run must show besides a clean correctness record."""


def test_s11_fails_when_the_hub_delivered_nothing_within_the_window() -> None:
    # Everything arrived once the stream drained (nothing lost), but too late for the window:
    # no latency was measured (p99 n/a), and that is a failure, not a pass or an n/a.
    def run(deliveries: float, p99: float, delivered: int) -> dict[str, Any]:
        return {
            "figures": {"deliveries_per_s": deliveries, "p99_ms": p99, "lost": 0.0},
            "correctness": {"observers": 10, "sampled_delivered": delivered},
        }

    baseline = run(5000.0, 100.0, 1)
    for hub in (run(0.0, float("nan"), 0), run(5000.0, 120.0, 0)):
        outcome = Outcome("S11", {}, [{"baseline": baseline, "hub": hub}])
        assert _verdict(outcome).met is False, hub
    assert _verdict(Outcome("S11", {}, [{"baseline": baseline, "hub": baseline}])).met
    assert "sampled_delivered=0" in problems("S11", run(0.0, float("nan"), 0))


def test_every_scenario_check_names_a_quick_scenario() -> None:
    assert set(CHECKS) <= set(QUICK)


def _run_bench(argv: list[str | Path]) -> subprocess.CompletedProcess[bytes]:
    """Run the bench; on a timeout it gets SIGTERM first, on which it stops the servers it
    started (in sessions of their own, which killing the runner alone would leave running)."""
    with subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


# One scenario per test, so that the scenarios run on several workers at once.
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(QUICK))
def test_quick_bench_runs_the_scenario_correctly(tmp_path: Path, name: str) -> None:
    raw = tmp_path / "bench.json"
    done = _run_bench(
        [sys.executable, "-m", "tests.bench.run", "--quick", "--scenarios", name, "--json", raw]
    )
    log = done.stderr.decode(errors="replace")
    assert raw.exists(), log
    outcomes: list[dict[str, Any]] = json.loads(raw.read_text())
    assert [o["name"] for o in outcomes] == [name, MACHINE_ENTRY]
    facts = outcomes[1]["facts"]
    assert facts["cores"] == str(os.cpu_count())
    (run,) = outcomes[0]["runs"]
    kinds = {"hub"} if name in HUB_ONLY else {"baseline", "hub"}
    kinds = set(STORES.get(name, kinds))
    assert set(run) == kinds, name
    for kind, result in run.items():
        assert "figures" in result, (name, kind, result.get("error"), log)
        assert problems(name, result) == [], (name, kind, result["correctness"])
        assert result["correctness"]["observers"] > 0
    if name in CHECKS:
        CHECKS[name](run)
    if name in WIDE:
        # The rate is half of the highest rung the baseline held on S2's shape, this run's.
        params = outcomes[0]["params"]
        held = float(params["calibration"].split("held up to ")[1].split("/s")[0])
        assert params["rate"] == pytest.approx(held / 2, rel=0.05), params
    assert done.returncode == 0, log
    if name == "S8":
        # A report rendered later from the file states the runs' machine, date and load
        # average, not those of the moment it is rendered.
        facts["date"] = "2000-01-01 00:00 UTC"
        raw.write_text(json.dumps(outcomes))
        out = tmp_path / "report.md"
        argv: list[str | Path] = [sys.executable, "-m", "tests.bench.run", "--report-from", raw]
        rendered = _run_bench([*argv, "--out", out, "--commit", "abc1234"])
        assert rendered.returncode == 0, rendered.stderr.decode(errors="replace")
        text = out.read_text()
        assert "| date | 2000-01-01 00:00 UTC |" in text
        load = "load average at the end (1, 5, 15 min)"
        assert f"| {load} | {facts[load]} |" in text
        assert "| commit | abc1234 |" in text


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
