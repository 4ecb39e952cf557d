"""How long a bench invocation takes, estimated from the scenarios' parameters.

``python -m tests.bench.budget [--quick]`` prints, per scenario, the runs times the servers
times (setup + the timed part), in seconds, and the total. The timed part follows from the
parameters (rate steps x ``step_s``, windows, preloads, pauses); setup from rates measured on
this 2-core machine (below); where a scenario's length depends on a server's capacity (the
ramps) it uses the rate at which the last full invocation's ramp stopped. An estimate to keep
``make bench`` within a round (25 minutes) and ``make bench-quick`` within 3 minutes, not a
measurement.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tests.bench.run import FULL, FULL_RUNS, HUB_ONLY, QUICK, RUNS, STORES, wide_calibration

__all__ = ["estimate", "main"]

START_S = {"baseline": 1.5, "hub": 2.0, "hub-sqlite": 2.0, "hub-redis": 3.0}
"""Starting and stopping a server (and Redis); a cluster of n nodes: n x the hub's."""
OPEN_PER_S = {"baseline": 1000.0, "hub": 500.0}
"""Connections opened, initialized and attached per second, and sessions created per second
on the hub (an agent process each): S2-phased's hub run (200 sessions, 1,000 connections, a
4 s window) took 9 s in all, and 7 s in the nineteenth invocation; these rates make it 11 s
(13 s with 50 sessions a second, up to the eighteenth)."""
SESSIONS_PER_S = 100.0
TITLE_FRAME = 406
"""Bytes of an S7 update's frame: a ``session_info_update`` whose title the hub clamps to
``hub.protocol.display.TITLE_MAX_CHARS`` (200), with the hub's metadata (S7's detail)."""
OPEN_S = {"S11": {"baseline": 5.0, "hub": 20.0}, "S12": {"baseline": 20.0, "hub": 50.0}}
"""Measured where the rate above does not hold: 10,000 observers of one session opened in 16 s
on the hub and 4.4 s on the baseline (113 s on the hub before its attach stopped growing with
the audience and the observers attached as viewers), and S12's 18,800 connections took 20 s
on the baseline (on a machine with a load average of 16) and 34 s on the hub (its whole run
109 s, in the first attempt at the twenty-third invocation; 95 s under that load)."""
PRELOAD_PER_S = 15_000.0
"""Updates written as fast as the agent goes (S4: 100,000 in 6.9 s)."""
STOPS = {
    "S1": {"baseline": 48.0, "hub": 75.0},
    "S1-2KB": {"baseline": 44.0, "hub": 55.0},
    "S2-scale": {"hub-redis": 24.0, "hub-spread": 20.0, "baseline": 93.1},
}
"""The rate step at which each ramp stopped in the last full invocation (4a530b6); the
baseline's S2-scale ramp (the S2 family's calibration, which ends at the second of two rungs
in a row that miss) is an estimate: it held 74.5 updates/s per session with a p99 of 4 ms,
and missed 93.1 and 116 (49 and 203 ms)."""
FIXED_S = {"S10": 30.0, "S10-owner": 35.0, "S13": 20.0}
"""The failover scenarios: the kill until everyone is live again (or the turn ends), plus
the warm-up and the node logs' reading; measured, not parameters."""


def _kind(kind: str) -> str:
    return "baseline" if kind == "baseline" else "hub"


def _rungs(p: dict[str, Any], stop: float) -> int:
    """How many steps a ramp from ``start_rate`` takes until the first at or past ``stop``."""
    n, rate = 1, float(p["start_rate"])
    while rate < stop * 0.999 and n < p["max_steps"]:
        rate *= p["factor"]
        n += 1
    return n


def _conns(p: dict[str, Any]) -> int:
    return int(p.get("connections") or p.get("sessions", 1) * p.get("observers", 1))


def _one(name: str, kind: str, p: dict[str, Any], quick: bool = False) -> float:
    """One run of ``name`` against ``kind``: its seconds."""
    return float(_seconds(name, kind, p, quick))


def _seconds(name: str, kind: str, p: dict[str, Any], quick: bool) -> Any:
    nodes = {"hub-2nodes": 2, "hub-spread": 2, "hub-3nodes": 3}.get(kind, 1)
    setup = START_S.get(kind, START_S["hub"]) * nodes
    opening = None if quick else OPEN_S.get(name, {}).get(_kind(kind))
    setup += opening if opening is not None else _conns(p) / OPEN_PER_S[_kind(kind)]
    if _kind(kind) == "hub":
        setup += p.get("sessions", 1) / SESSIONS_PER_S
    window = 0.25 + 1.0  # the stream's start, then the drain
    if name in STOPS:
        return setup + _rungs(p, STOPS[name][kind]) * (p["step_s"] + window)
    if name in FIXED_S:
        return setup + FIXED_S[name] + p.get("warm_s", 1.0)
    if name.startswith("S2"):
        return setup + p["seconds"] + window
    if name == "S4":
        return setup + p["preload"] / PRELOAD_PER_S + 2 * p["window_s"] + 2.5
    if name == "S5":
        return setup + 2 * p["behind"] / PRELOAD_PER_S + p["blips"] * (p["interval_s"] + 0.07)
    if name == "S7":
        # Stuck until the kernel's buffers (about 2.8 MB) and the outbox are full, then as
        # long again without it. Its updates are titles, which the hub clamps: the frames are
        # about TITLE_FRAME bytes whatever ``size`` asks for.
        frame = min(p["size"], TITLE_FRAME)
        close = (2.8 * 2**20 + p["bound"]) / (p["rate"] * frame)
        return setup + p["preload"] / PRELOAD_PER_S + 1 + p["window_s"] + 2 * close + 2
    if name == "S8":
        return setup + 2 * p["settle_s"] + 2
    if name == "S9":
        return setup + 1 + 2 * p["window_s"] + 3
    if name == "S11":
        return setup + 2 * p["settle_s"] + p["seconds"] + window
    if name == "S12":
        return setup + 2 * p["settle_s"] + p["measure_s"] + 5
    return setup + 10.0


def estimate(table: dict[str, dict[str, Any]], quick: bool) -> dict[str, float]:
    """Seconds per scenario of an invocation with ``table``'s parameters."""
    out: dict[str, float] = {}
    for name, p in table.items():
        kinds = STORES.get(name, ["hub"] if name in HUB_ONLY else ["baseline", "hub"])
        n = 1 if quick else RUNS.get(name, FULL_RUNS)
        total = n * sum(_one(name, kind, p, quick) for kind in kinds)
        if name == "S2" and "S2-scale" in table:
            # The S2 family's calibration: S2-scale's ramp, once, against the baseline.
            total += _one("S2-scale", "baseline", wide_calibration(table), quick)
        if "rates" in p:
            # The calibration: one baseline run through the rates (at most all of them).
            more = (len(p["rates"]) - 1) * (p["seconds"] + 1.25)
            total += _one(name, "baseline", p, quick) + more
        out[name] = total
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the estimate of a full (or ``--quick``) invocation."""
    parser = argparse.ArgumentParser(prog="python -m tests.bench.budget")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    table = QUICK if args.quick else FULL
    times = estimate(table, args.quick)
    for name, seconds in times.items():
        print(f"{name:10} {seconds:7.0f} s")
    total = sum(times.values())
    print(f"{'total':10} {total:7.0f} s ({total / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
