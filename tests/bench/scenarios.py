"""The benchmark scenarios, run inside the load generator process against one target.

Each scenario takes the target, its parameters and the server's pid (to read its RSS), and
returns a JSON-able result: ``figures`` (the numbers the report shows), ``correctness`` (every
observer's stream checked: duplicates, gaps, resets, unexpected closes) and ``detail``.
Scenarios S4, S5, S7 and S9 exercise the hub's replay, cursors, outbox and per-connection limits,
which the baseline does not have: against the baseline they return ``{"skipped": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import resource
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.bench.nodelog import Takeover, takeover
from tests.bench.payload import TS_MARK, now
from tests.bench.servers import children
from tests.bench.stats import percentile
from tests.bench.targets import ClusterTarget, Session, Target, open_many
from tests.bench.wsclient import Conn, Recorder, RequestFailed

__all__ = ["SCENARIOS", "Result"]

Result = dict[str, Any]
Params = dict[str, Any]


def rss(pid: int) -> int:
    """The resident set size of process ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU time (user + system) the processes ``pids`` have used so far, in seconds."""
    total = 0
    for pid in pids:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def server_socket(server_port: int, client_port: int) -> tuple[str, int] | None:
    """The server's side of a loopback connection: (TCP state in hex, unsent bytes).

    Read from ``/proc/net/tcp``; state ``01`` is ESTABLISHED. The unsent bytes are what the
    kernel holds for a client that does not read (they are not in the server's RSS).
    """
    local = f"0100007F:{server_port:04X}"
    remote = f"0100007F:{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[1] == local and parts[2] == remote:
            return parts[3], int(parts[4].split(":")[0], 16)
    return None


def log_mentions(path: str | None, text: str, start: int) -> tuple[bool, int]:
    """Whether the server log grew a line containing ``text`` after byte ``start``."""
    if not path:
        return False, start
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read()
    return text.encode() in data, start + len(data)


async def wait_until(predicate: Callable[[], bool], within: float, every: float = 0.02) -> bool:
    """Poll ``predicate`` until it holds (True) or ``within`` seconds pass (False)."""
    deadline = now() + within
    while not predicate():
        if now() > deadline:
            return False
        await asyncio.sleep(every)
    return True


async def _bench_process(
    module: str, spec: dict[str, Any], *, commands: bool = True
) -> asyncio.subprocess.Process:
    """``python -m tests.bench.MODULE SPEC``: a client of the scenario in a process of its own
    (S4's joiner, S9's flooder, S12's openers), its stdout piped to the scenario, and its
    stdin too when the scenario sends it ``commands``."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        f"tests.bench.{module}",
        json.dumps(spec),
        stdin=asyncio.subprocess.PIPE if commands else None,
        stdout=asyncio.subprocess.PIPE,
    )


def correctness(conns: Iterable[Conn], *, expect_open: bool = True) -> dict[str, int]:
    """The stream checks summed over ``conns``."""
    conns = list(conns)
    return {
        "observers": len(conns),
        "duplicates": sum(c.duplicates for c in conns),
        "gaps": sum(c.gaps for c in conns),
        "resets": sum(c.resets for c in conns),
        "early": sum(c.early for c in conns),
        "skipped": sum(c.skipped for c in conns),
        "number_gaps": sum(c.number_gaps for c in conns),
        "number_duplicates": sum(c.number_duplicates for c in conns),
        "closed": sum(1 for c in conns if c.closed.done()) if expect_open else 0,
    }


def latency_ms(samples: Sequence[float]) -> dict[str, float]:
    """p50/p99/max of latency samples, in milliseconds."""
    return {
        "p50_ms": percentile(samples, 50) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "max_ms": max(samples) * 1000 if samples else float("nan"),
        "samples": float(len(samples)),
    }


def mean_frame(conns: Iterable[Conn]) -> float:
    conns = list(conns)
    frames = sum(c.frames for c in conns)
    return sum(c.frame_bytes for c in conns) / frames if frames else 0.0


async def _drain(conns: Sequence[Conn], targets: Sequence[int], within: float) -> bool:
    """Wait until every open connection has seen its target number of stamped updates."""
    return await wait_until(
        lambda: all(c.closed.done() or c.marks >= t for c, t in zip(conns, targets, strict=True)),
        within,
    )


async def _setup(
    target: Target, recorder: Recorder, sessions: int, per_session: int
) -> tuple[list[Session], list[Conn]]:
    """``sessions`` sessions with ``per_session`` live observers each (creators included)."""
    creators = [await target.open_observer(recorder) for _ in range(sessions)]
    made = await asyncio.gather(*(target.create(c) for c in creators))
    others = await open_many(target, recorder, made, per_session - 1) if per_session > 1 else []
    return list(made), creators + others


async def _window(
    target: Target,
    recorder: Recorder,
    sessions: Sequence[Session],
    conns: Sequence[Conn],
    rate: float,
    seconds: float,
    warmup: float,
    size: int,
    phased: bool = False,
    pids: Sequence[int] = (),
    beside: dict[str, Callable[[], Sequence[int]]] | None = None,
) -> dict[str, float]:
    """Stream for ``seconds`` at ``rate``; measure after ``warmup``; wait for the drain.

    With ``pids`` (the servers' processes), the figures also hold the CPU those processes
    used per second of the window (``server_cpu``; 1.0 is one core busy); with ``beside``,
    that of other processes by name (``NAME_cpu``: the bench agent or the baseline's feed, and
    Redis, which share the load generator's core), each found once the stream has started.

    Several sessions start together, a quarter of a second after the call, on the same
    clock in both servers: in step (every session's update ``n`` due in the same instant),
    or with ``phased`` each at a random phase within one period (``1 / rate``), the same
    phases for both servers, as independent agents would.
    """
    # Half a second more than the window, so that the stream covers the whole window even
    # at low rates (a few updates per second).
    count = max(1, math.ceil(rate * (seconds + 0.5)))
    # Each observer of a session receives ``count`` stamps.
    goals = [c.marks + count for c in conns]
    starts = None
    if len(sessions) > 1 and rate > 0:
        rng = random.Random(len(sessions))
        at = now() + 0.25
        starts = [at + (rng.uniform(0.0, 1.0 / rate) if phased else 0.0) for _ in sessions]
    await target.stream(sessions, rate, count, size, starts=starts)
    await asyncio.sleep(warmup)
    # Each group of processes whose CPU is read over the window, by name (``NAME_cpu``).
    found = {name: find() for name, find in (beside or {}).items()}
    groups = {name: list(g) for name, g in {"server": pids, **found}.items() if g}
    before = {name: cpu_seconds(group) for name, group in groups.items()}
    cpu0, t0 = time.process_time(), now()
    recorder.start()
    await asyncio.sleep(max(0.1, seconds - warmup))
    samples = recorder.stop()
    t1, cpu1 = now(), time.process_time()
    after = {name: cpu_seconds(group) for name, group in groups.items()}
    deliveries = recorder.deliveries
    drained = await _drain(conns, goals, within=max(15.0, 3 * seconds))
    figures = latency_ms(samples)
    figures.update(
        rate=rate,
        deliveries_per_s=deliveries / (t1 - t0),
        offered_per_s=rate * len(conns),
        loadgen_cpu=(cpu1 - cpu0) / (t1 - t0),
        drained=float(drained),
        closed=float(sum(1 for c in conns if c.closed.done())),
    )
    for name in groups:
        figures[f"{name}_cpu"] = (after[name] - before[name]) / (t1 - t0)
    return figures


async def _ramp(
    target: Target,
    recorder: Recorder,
    sessions: Sequence[Session],
    conns: Sequence[Conn],
    p: Params,
    *,
    phased: bool = False,
    pids: Sequence[int] = (),
) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Raise the rate by ``factor`` per step until ``p["misses"]`` steps in a row miss
    (default 1; a miss: p99 over the limit, not drained, a close, or under 90% of the
    offered deliveries); the steps and the best step that held."""
    steps: list[dict[str, float]] = []
    best: dict[str, float] | None = None
    rate = float(p["start_rate"])
    missed = 0
    for _ in range(p["max_steps"]):
        step = await _window(
            target,
            recorder,
            sessions,
            conns,
            rate,
            p["step_s"],
            p["warmup_s"],
            p["size"],
            phased,
            pids,
        )
        steps.append(step)
        ok = step["p99_ms"] < p["p99_limit_ms"] and step["drained"] and not step["closed"]
        ok = ok and step["deliveries_per_s"] >= 0.9 * step["offered_per_s"]
        missed = 0 if ok else missed + 1
        if missed >= p.get("misses", 1):
            break
        if ok and (best is None or step["deliveries_per_s"] > best["deliveries_per_s"]):
            best = step
        rate *= p["factor"]
    return steps, best or {"deliveries_per_s": 0.0, "p99_ms": float("nan"), "rate": 0.0}


async def s1_fanout(target: Target, p: Params, server_pid: int) -> Result:
    """S1: one session, many observers, rising rate; the best deliveries/s with p99 < limit."""
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, p["observers"])
    steps, best = await _ramp(target, recorder, sessions, conns, p)
    return {
        "figures": {
            "deliveries_per_s": best["deliveries_per_s"],
            "p99_ms": best["p99_ms"],
            "rate": best["rate"],
        },
        "correctness": correctness(conns),
        "detail": {"steps": steps, "frame_bytes": mean_frame(conns)},
    }


async def s2_wide(target: Target, p: Params, server_pid: int) -> Result:
    """S2: many sessions with a few observers each at a fixed rate; end-to-end latency."""
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, p["sessions"], p["observers"])
    step = await _window(
        target,
        recorder,
        sessions,
        conns,
        p["rate"],
        p["seconds"],
        p["warmup_s"],
        p["size"],
        bool(p.get("phased", False)),
        # The server's own CPU over the window: how near its core's limit the rate is. And
        # what shares the load generator's core: the process that makes the updates (the
        # hub's bench agent, the baseline's feed) and Redis (S2-store), so that a figure
        # taken while the process that times it had no core to spare shows as such.
        pids=(server_pid,),
        beside={
            "agent": lambda: children([server_pid]),
            "redis": lambda: p.get("redis_pids", []),
        },
    )
    # Each step's figures, as the best step's above: alike in shape only.
    return {
        "figures": {
            "p50_ms": step["p50_ms"],
            "p99_ms": step["p99_ms"],
            "deliveries_per_s": step["deliveries_per_s"],
        },
        "correctness": correctness(conns),
        "detail": {"step": step, "frame_bytes": mean_frame(conns)},
    }


async def s2_scale(target: Target, p: Params, server_pid: int) -> Result:
    """S2-scale: S2's many sessions at a rising rate (each at its own phase); the best
    deliveries/s with p99 under the limit, and the servers' CPU per delivery at that step.

    Against one node or two (``SpreadHubTarget``: each node owns half of the sessions and
    serves their observers), the ratio is what a second node adds.
    """
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, p["sessions"], p["observers"])
    steps, best = await _ramp(target, recorder, sessions, conns, p, phased=True, pids=p["pids"])
    cpu = best.get("server_cpu", float("nan"))
    return {
        "figures": {
            "deliveries_per_s": best["deliveries_per_s"],
            "p99_ms": best["p99_ms"],
            "rate": best["rate"],
            "server_cpu": cpu,
            "cpu_us_per_delivery": cpu / best["deliveries_per_s"] * 1e6
            if best["deliveries_per_s"]
            else float("nan"),
        },
        "correctness": correctness(conns),
        "detail": {"steps": steps, "frame_bytes": mean_frame(conns)},
    }


async def _preload(
    target: Target, session: Session, count: int, size: int, per: int, variant: str = "chunk"
) -> float:
    """Stream ``count`` updates as fast as possible; seconds until the creator has them all."""
    goal = session.creator.marks + count
    t0 = now()
    await target.stream([session], 0, count, size, per_message=per, variant=variant)
    if not await wait_until(lambda: session.creator.marks >= goal, within=600):
        raise RuntimeError(f"preload: {session.creator.marks}/{goal} updates arrived")
    return now() - t0


def _skip(target: Target) -> Result | None:
    if target.kind != "hub":
        return {"skipped": "the baseline has no replay, cursors or outbox"}
    return None


async def s4_late_join(target: Target, p: Params, server_pid: int) -> Result:
    """S4: attach with full replay to a long session while updates keep arriving.

    The joiner runs in a process of its own (``joiner.py``): parsing its replay here would
    hold up the loop that timestamps the other observers' updates.
    """
    if (skipped := _skip(target)) is not None:
        return skipped
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, 1)
    session = sessions[0]
    # The history is written before the other observers attach: only its size matters here.
    preload_s = await _preload(target, session, p["preload"], p["size"], p["per_message"])
    conns += await open_many(target, recorder, sessions, p["observers"] - 1)
    spec = {
        "host": target.host,
        "port": target.port,
        "session": session.id,
        "epoch": session.epoch,
        "replay": {"type": "start"},
    }
    joiner = await _bench_process("joiner", spec)
    try:
        await _joiner_says(joiner, ("ready",))
        live = int(p["rate"] * (2 * p["window_s"] + 30))
        await target.stream([session], p["rate"], live, p["size"])
        await asyncio.sleep(1.0)
        recorder.start()
        await asyncio.sleep(p["window_s"])
        without = recorder.stop()

        recorder.start()
        t0 = now()
        told = await _joiner_says(joiner, ("live", "late"), "go")
        rest = p["window_s"] - (now() - t0)
        if rest > 0:
            await asyncio.sleep(rest)
        with_joiner = recorder.stop()
        record: dict[str, Any] = json.loads(await _joiner_says(joiner, None, "stop"))
        await asyncio.wait_for(joiner.wait(), 15)
    finally:
        if joiner.returncode is None:
            joiner.kill()
            await joiner.wait()
    await asyncio.sleep(0.5)
    target.cancel(session)
    first = record["first_live_at"]
    joined = record["correctness"]
    others = correctness(conns)
    p99_without = percentile(without, 99)
    p99_with = percentile(with_joiner, 99)
    return {
        "figures": {
            "attach_to_live_s": first - record["t0"] if first is not None else float("nan"),
            "attach_to_response_s": record["answered"] - record["t0"],
            "others_p99_ratio": p99_with / p99_without,
        },
        "correctness": {
            **{key: others[key] + joined[key] for key in others},
            "joiner_gaps": joined["gaps"],
            "joiner_duplicates": joined["duplicates"],
            "joiner_live": int(told == "live"),
            "replay_covers_preload": int(record["replay_marks"] >= p["preload"]),
        },
        "detail": {
            "preload_s": preload_s,
            "response_seq": record["response_seq"],
            "replay_frames": record["replay_frames"],
            "replay_bytes": record["replay_bytes"],
            "replayed_chunks": record["replay_marks"],
            "others_without": latency_ms(without),
            "others_with": latency_ms(with_joiner),
        },
    }


async def _joiner_says(
    joiner: asyncio.subprocess.Process, accepted: tuple[str, ...] | None, command: str = ""
) -> str:
    """Send ``command`` (a line, if any) to the joiner process, then read its next line, which
    must be one of ``accepted`` (``None``: any line but none)."""
    assert joiner.stdin is not None
    assert joiner.stdout is not None
    if command:
        joiner.stdin.write(command.encode() + b"\n")
        await joiner.stdin.drain()
    line = (await joiner.stdout.readline()).decode().strip()
    if not line or (accepted is not None and line not in accepted):
        raise RuntimeError(f"S4: the joiner said {line!r}, not one of {accepted}")
    return line


def _worst(recorder: Recorder) -> list[tuple[float, float]]:
    """The five worst 100 ms slots of the last window: (seconds into it, max latency ms)."""
    if not recorder.received:
        return []
    t0 = recorder.received[0]
    slots: dict[int, float] = {}
    for t, lat in zip(recorder.received, recorder.latencies, strict=True):
        k = int((t - t0) * 10)
        slots[k] = max(slots.get(k, 0.0), lat)
    worst = sorted(slots.items(), key=lambda kv: -kv[1])[:5]
    return [(k / 10, v * 1000) for k, v in worst]


def _first_live(conn: Conn) -> Callable[[], bool]:
    return lambda: conn.first_live_at is not None


async def s5_blip(target: Target, p: Params, server_pid: int) -> Result:
    """S5: reconnect with a cursor ``behind`` updates back; time until the stream is live."""
    if (skipped := _skip(target)) is not None:
        return skipped
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, p["observers"])
    session = sessions[0]
    creator = session.creator
    await _preload(target, session, 2 * p["behind"], p["size"], 100)
    live = int(p["rate"] * (p["blips"] * 0.5 + 30))
    await target.stream([session], p["rate"], live, p["size"])
    await asyncio.sleep(0.5)
    to_response: list[float] = []
    to_live: list[float] = []
    blippers: list[Conn] = []
    caught_up = 0
    own = Recorder()
    for _ in range(p["blips"]):
        conn = await target.open(own)
        assert creator.last_seq is not None
        cursor = creator.last_seq - p["behind"]
        conn.last_seq = cursor
        t0 = now()
        await target.attach(
            conn, session, {"type": "_hub_after", "epoch": session.epoch, "seq": cursor}
        )
        to_response.append(now() - t0)
        if await wait_until(_first_live(conn), within=5, every=0.001):
            assert conn.first_live_at is not None
            to_live.append(conn.first_live_at - t0)
        caught_up += int(conn.updates >= p["behind"])
        conn.close()
        await wait_until(conn.closed.done, within=2)
        blippers.append(conn)
        await asyncio.sleep(p["interval_s"])
    target.cancel(session)
    return {
        "figures": {
            "resume_to_live_p99_ms": percentile(to_live, 99) * 1000,
            "resume_to_live_p50_ms": percentile(to_live, 50) * 1000,
            "resume_to_response_p99_ms": percentile(to_response, 99) * 1000,
        },
        "correctness": {
            **correctness(conns),
            "blips": len(blippers),
            "blip_gaps": sum(c.gaps for c in blippers),
            "blip_duplicates": sum(c.duplicates for c in blippers),
            "blip_resets": sum(c.resets for c in blippers),
            "blips_caught_up": caught_up,
            "blips_live": len(to_live),
        },
        "detail": {"to_live_ms": [x * 1000 for x in to_live]},
    }


def _split(killed_wall: float, p: Params, session: Session) -> Takeover | None:
    """The takeover of ``session`` after the kill, from the surviving nodes' logs."""
    logs = [log for log in p.get("server_logs", []) if log != p.get("kill_log")]
    return takeover(logs, session.id, killed_wall)


def _split_figures(split: Takeover | None, killed_wall: float) -> dict[str, float]:
    """Detection (kill to claim) and takeover (claim to the agent serving), in seconds."""
    if split is None:
        return {"detection_s": math.nan, "takeover_s": math.nan}
    serving = split.serving if split.serving is not None else math.nan
    return {"detection_s": split.claimed - killed_wall, "takeover_s": serving - split.claimed}


def _live_after(conn: Conn, t0: float, seen: dict[int, float]) -> None:
    """Record in ``seen[id(conn)]`` when ``conn`` first gets an update the agent sent after
    ``t0`` (``CLOCK_MONOTONIC``): live again, not catching up."""

    def hook(data: bytes, received: float) -> None:
        if id(conn) in seen or data.find(b'"replay":true') >= 0:
            return
        i = data.find(TS_MARK)
        while i >= 0:
            end = data.find(b"@", i + 4)
            if float(data[i + 4 : end]) > t0:
                seen[id(conn)] = received
                return
            i = data.find(TS_MARK, i + 4)

    conn.on_session_update = hook


async def s10_storm(target: Target, p: Params, server_pid: int) -> Result:
    """S10 reconnect storm: ``observers`` clients watch a session through node C while it
    streams; C is killed (SIGKILL) and every client reconnects at once to A or B with the
    cursor of the last event it got. By default node B owns the session and C follows it
    through Redis, so nothing is taken over; with ``kill_owner`` C owns it too, and a client
    on A that was watching all along starts a new stream as soon as C is killed (the prompt
    waits for the next owner, ``owner_wait``). Figures: the time from the kill until every
    client has its resume answered, and until every client has an update the agent sent after
    the kill (live again); with ``kill_owner`` also detection (kill to another node's claim)
    and takeover (claim to its agent serving), from the nodes' logs."""
    if (skipped := _skip(target)) is not None:
        return skipped
    if not isinstance(target, ClusterTarget) or len(target.ports) < 3 or "kill_pid" not in p:
        raise RuntimeError("S10 needs three nodes and the pid of the one to kill")
    a, b, c = target.ports[:3]
    kill_owner = bool(p.get("kill_owner"))
    recorder = Recorder()
    session = await target.create(await target.open_on(c if kill_owner else b, recorder))
    gate = asyncio.Semaphore(p["concurrency"])

    async def watch_on_c() -> Conn:
        async with gate:
            conn = await target.open_on(c, recorder)
            await target.attach(conn, session)
            return conn

    firsts = list(await asyncio.gather(*(watch_on_c() for _ in range(p["observers"]))))
    # With ``kill_owner``, the client of A that starts the stream again (it watches all along).
    controller = await target.open_on(a, recorder) if kill_owner else None
    if controller is not None:
        await target.attach(controller, session)
    count = int(p["rate"] * p["max_s"])
    await target.stream([session], p["rate"], count, p["size"])
    if not await wait_until(lambda: all(c.marks > 0 for c in firsts), within=60):
        raise RuntimeError("the observers on node C did not all receive the stream")
    await asyncio.sleep(p["warm_s"])
    killed, killed_wall = now(), time.time()
    os.kill(p["kill_pid"], signal.SIGKILL)
    resumed: list[float] = []
    live_at: dict[int, float] = {}
    restream: asyncio.Future[None] | None = None
    if controller is not None:
        # The stream died with its owner: a client of A starts another, which runs once the
        # next owner serves the session.
        again = Session(session.id, session.epoch, controller)
        restream = asyncio.ensure_future(target.stream([again], p["rate"], count, p["size"]))

    stages: dict[str, list[float]] = {"lost": [], "opened": []}

    async def reconnect(index: int, old: Conn) -> Conn:
        await old.closed
        stages["lost"].append(now() - killed)
        async with gate:
            conn = await target.open_on((a, b)[index % 2], recorder)
        stages["opened"].append(now() - killed)
        # The new connection continues the old one's checks: no gap, no duplicate.
        conn.last_seq, conn.last_n = old.last_seq, old.last_n
        _live_after(conn, killed, live_at)
        cursor = {"type": "_hub_after", "epoch": session.epoch, "seq": old.last_seq}
        await target.attach(conn, session, cursor)
        resumed.append(now() - killed)
        answered[id(conn)] = now()
        return conn

    answered: dict[int, float] = {}
    seconds = list(await asyncio.gather(*(reconnect(i, o) for i, o in enumerate(firsts))))
    live = await wait_until(lambda: len(live_at) == len(seconds), 60)
    if restream is not None:
        await restream
    target.cancel(session)
    watching = [controller] if controller is not None else []
    # Live again: the resume answered and an update sent after the kill received.
    lives = [max(t, answered[k]) - killed for k, t in live_at.items()]
    all_live = max(lives) if live else math.nan
    stages["resumed"], stages["live"] = resumed, lives
    figures = {
        "all_live_s": all_live,
        "live_p50_s": percentile(lives, 50),
        "live_p99_s": percentile(lives, 99),
        "all_resumed_s": max(resumed),
    }
    if kill_owner:
        split = _split(killed_wall, p, session)
        figures.update(_split_figures(split, killed_wall))
        if split is not None and split.serving is not None:
            figures["after_takeover_s"] = all_live - (split.serving - killed_wall)
        owner = f"C (killed): taken over by {Path(split.log).name if split else 'nobody'}"
    else:
        owner = "B, not killed: no detection, no takeover; the time is all reconnect"
    return {
        "figures": figures,
        "correctness": {
            **correctness(seconds),
            "before_gaps": sum(c.gaps for c in [*firsts, *watching]),
            "before_duplicates": sum(c.duplicates for c in [*firsts, *watching]),
            "all_live": int(live),
        },
        "detail": {
            "caught_up_updates": sum(c.updates for c in seconds),
            "owner": owner,
            # Seconds after the kill when the clients saw their connection lost, had a new
            # one open (handshake and initialize), their resume answered, an update live.
            **{
                f"{stage}_p{q}_s": round(percentile(times, q), 3)
                for stage, times in stages.items()
                for q in (10, 50, 90, 100)
            },
        },
    }


async def s13_failover(target: Target, p: Params, server_pid: int) -> Result:
    """S13 failover: three nodes on one Redis; node C owns a session that ``observers``
    clients watch through A and B (the prompter among them, on A). C is killed (SIGKILL)
    while the session is idle; ``prompt_after_s`` later the prompter sends a prompt (it waits
    for the next owner, ``owner_wait``). Figures: the time from the kill until the prompter
    sees the turn end (``state_update`` idle), split into detection (kill to another node's
    claim), takeover (claim to its agent serving the session) and the rest (the prompt's wait
    for the agent and its turn). Any error an observer sees, or an error answer to the prompt,
    fails the run; so does a gap or a duplicate in any observer's stream across the takeover."""
    if (skipped := _skip(target)) is not None:
        return skipped
    if not isinstance(target, ClusterTarget) or len(target.ports) < 3 or "kill_pid" not in p:
        raise RuntimeError("S13 needs three nodes and the pid of the one to kill")
    a, b, c = target.ports[:3]
    recorder = Recorder()
    session = await target.create(await target.open_on(c, recorder))
    gate = asyncio.Semaphore(100)

    async def watch(port: int) -> Conn:
        async with gate:
            conn = await target.open_on(port, recorder)
            await target.attach(conn, session)
            return conn

    prompter = await watch(a)
    others = await asyncio.gather(*(watch((b, a)[i % 2]) for i in range(p["observers"] - 1)))
    observers = [prompter, *others]
    errors: list[str] = []
    ends: list[float] = []

    def on_update(data: bytes, received: float) -> None:
        if data.find(b'"error"') >= 0:
            errors.append(data[:400].decode(errors="replace"))

    def on_prompter(data: bytes, received: float) -> None:
        on_update(data, received)
        if data.find(b'"state_update"') >= 0 and data.find(b'"idle"') >= 0:
            ends.append(received)

    for conn in others:
        conn.on_session_update = on_update
    prompter.on_session_update = on_prompter
    # A first turn, so that every observer's node follows the session and the turn is over.
    warm = max(1, int(p["rate"] * p["warm_s"]))
    await target.stream([session], p["rate"], warm, p["size"])
    if not await wait_until(lambda: bool(ends) and all(o.marks >= warm for o in observers), 60):
        raise RuntimeError("the observers did not all receive the first turn")
    await asyncio.sleep(0.5)
    killed, killed_wall = now(), time.time()
    os.kill(p["kill_pid"], signal.SIGKILL)
    await asyncio.sleep(max(0.0, killed + p["prompt_after_s"] - now()))
    sent = now()
    before = len(ends)
    accepted = math.nan
    try:
        turn = Session(session.id, session.epoch, prompter)
        await target.stream([turn], p["rate"], p["count"], p["size"])
        accepted = now() - killed
    except (RequestFailed, ConnectionError) as exc:
        errors.append(f"the prompt: {exc}")
    ended = await wait_until(lambda: len(ends) > before, within=p["max_s"])
    turn_end = ends[before] - killed if ended else math.nan
    goal = warm + p["count"]
    delivered = await wait_until(lambda: all(o.marks >= goal for o in observers), 10)
    split = _split(killed_wall, p, session)
    figures = {"turn_end_s": turn_end, **_split_figures(split, killed_wall)}
    figures["rest_s"] = turn_end - figures["detection_s"] - figures["takeover_s"]
    figures["accepted_s"] = accepted
    return {
        "figures": figures,
        "correctness": {
            **correctness(observers),
            "turn_ended": int(ended),
            "all_delivered": int(delivered),
            "errors_surfaced": len(errors),
        },
        "detail": {
            "prompt_sent_s": sent - killed,
            "taken_over_by": Path(split.log).name if split else None,
            "errors": errors[:5],
        },
    }


async def s7_slow(target: Target, p: Params, server_pid: int) -> Result:
    """S7: one observer stops reading; it must be closed with 1013 and cost nobody else.

    The slow observer reads again once the hub's log reports the slow consumer (or after
    ``max_pause_s``), before the hub's close timeout aborts the connection, so that it can
    see the close frame queued behind everything the kernel held for it. The others' latency
    while it is stuck is compared with theirs over a window of the same length after it is
    gone (``others_after``); ``others_before`` is a shorter window before it stopped.
    """
    if (skipped := _skip(target)) is not None:
        return skipped
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, 1)
    session = sessions[0]
    # Snapshots (session title), so that the session's state does not grow, and a log that
    # already holds as many events as it ever will: the hub's memory should then grow only by
    # what the slow consumer costs. Written before the others attach, at full speed.
    await _preload(target, session, p["preload"], p["size"], 100, "title")
    conns += await open_many(target, recorder, sessions, p["observers"] - 2)
    slow = await target.open(Recorder(), rcvbuf=4096)
    await target.attach(slow, session)
    live = int(p["rate"] * (p["window_s"] + p["max_pause_s"] + 30))
    await target.stream([session], p["rate"], live, p["size"], variant="title")
    await asyncio.sleep(1.0)
    recorder.start()
    await asyncio.sleep(p["window_s"])
    without = recorder.stop()

    log = p.get("server_log")
    _, log_pos = log_mentions(log, "", 0)
    rss_before = rss(server_pid)
    peak = rss_before
    kernel_peak = 0
    slow.pause()
    recorder.start()
    t0 = now()
    closed_after: float | None = None
    while now() - t0 < p["max_pause_s"]:
        await asyncio.sleep(0.1)
        peak = max(peak, rss(server_pid))
        side = server_socket(target.port, slow.local_port)
        if side is not None:
            kernel_peak = max(kernel_peak, side[1])
        seen, log_pos = log_mentions(log, "slow consumer", log_pos)
        if seen:
            closed_after = now() - t0
            await asyncio.sleep(0.5)
            peak = max(peak, rss(server_pid))
            break
    with_slow = recorder.stop()
    worst_with = _worst(recorder)
    with_s = now() - t0
    slow.resume()
    closed = await wait_until(slow.closed.done, within=30)
    # The others again without the slow observer, for as long as they were measured with it:
    # a p99 over a longer window catches rarer stalls, so the two windows must be equal.
    await asyncio.sleep(1.0)
    recorder.start()
    # The same polling as while the slow observer was stuck (it runs on this process's
    # event loop, between the others' frames), so that only the slow observer differs.
    t1 = now()
    while now() - t1 < with_s:
        await asyncio.sleep(0.1)
        rss(server_pid)
        server_socket(target.port, slow.local_port)
        log_mentions(log, "slow consumer", log_pos)
    after = recorder.stop()
    target.cancel(session)
    p99_without = percentile(after, 99)
    p99_with = percentile(with_slow, 99)
    return {
        "figures": {
            "close_code": float(slow.close_code or 0),
            "seconds_to_close": closed_after if closed_after is not None else float("nan"),
            "rss_growth_mb": (peak - rss_before) / 2**20,
            "rss_growth_per_bound": (peak - rss_before) / p["bound"],
            "others_p99_ratio": p99_with / p99_without,
        },
        "correctness": {
            **correctness(conns),
            "slow_closed": int(closed),
            "slow_close_1013": int(slow.close_code == 1013),
            "slow_gaps": slow.gaps,
            "slow_duplicates": slow.duplicates,
        },
        "detail": {
            "bound_bytes": p["bound"],
            "frame_bytes": mean_frame(conns),
            "kernel_unsent_peak_bytes": kernel_peak,
            "others_before": latency_ms(without),
            "others_with": latency_ms(with_slow),
            "others_after": latency_ms(after),
            "others_worst_100ms_with": worst_with,
            "others_worst_100ms_after": _worst(recorder),
        },
    }


async def s8_idle(target: Target, p: Params, server_pid: int) -> Result:
    """S8: many attached, idle observers; the server's memory per observer."""
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, p["warm"])
    await asyncio.sleep(p["settle_s"])
    before = rss(server_pid)
    more = await open_many(target, recorder, sessions, p["observers"] - p["warm"])
    await asyncio.sleep(p["settle_s"])
    after = rss(server_pid)
    # Check the observers are really attached and live: one update reaches them all.
    everyone = conns + more
    goals = [c.marks + 1 for c in everyone]
    await target.stream(sessions, 0, 1, p["size"])
    delivered = await _drain(everyone, goals, within=60)
    return {
        "figures": {"kb_per_observer": (after - before) / 1024 / len(more)},
        "correctness": {**correctness(everyone), "all_delivered": int(delivered)},
        "detail": {"rss_before_mb": before / 2**20, "rss_after_mb": after / 2**20},
    }


async def _round_trips(
    conn: Conn, seconds: float, interval: float, at: list[float] | None = None
) -> list[float]:
    """``session/list`` one after another for ``seconds`` (``interval`` apart, well under the
    request rate limit); the round trip of each, in seconds (``at``: when each was sent)."""
    out: list[float] = []
    end = now() + seconds
    while now() < end:
        t0 = now()
        await conn.request("session/list", {})
        out.append(now() - t0)
        if at is not None:
            at.append(t0)
        await asyncio.sleep(interval)
    return out


async def s9_fairness(target: Target, p: Params, server_pid: int) -> Result:
    """S9: a client floods small requests and never reads; another one's round trips.

    The normal client sends ``session/list`` one after another (``interval_s`` apart) for
    ``window_s`` without the flood, then for ``window_s`` while a flooder sends the same
    request as fast as the hub reads it and never reads an answer. A flooder the hub closes
    is replaced by a new one (as an attacker would), so that the flood lasts the whole
    window. Every flooder reads what it was sent once the hub's log reports it as a slow
    consumer, before the hub's close timeout: how its requests were answered (results or
    ``-32044``) and its close code.
    """
    if (skipped := _skip(target)) is not None:
        return skipped
    log = p.get("server_log")
    creator = await target.open(Recorder())
    sessions = [await target.create(creator) for _ in range(p["sessions"])]
    normal = await target.open(Recorder())
    # Warm up (first answers, allocations), then the reference window without the flood.
    await _round_trips(normal, 1.0, p["interval_s"])
    without = await _round_trips(normal, p["window_s"], p["interval_s"])

    # The flooder runs in a process of its own: reading what the hub sent it (tens of
    # thousands of frames) must not hold up this process's event loop, which measures.
    spec = {
        "host": target.host,
        "port": target.port,
        "log": log,
        "seconds": p["window_s"] + 0.5,
        "chunk_requests": p["chunk_requests"],
        "rcvbuf": p.get("flood_rcvbuf"),
    }
    rss_before = rss(server_pid)
    proc = await _bench_process("flood", spec, commands=False)
    assert proc.stdout is not None
    ready = await proc.stdout.readline()  # the first flooder is under way
    if not ready:
        raise RuntimeError("the flooder did not start")
    sent_at: list[float] = []
    with_flood = await _round_trips(normal, p["window_s"], p["interval_s"], sent_at)
    rss_peak = rss(server_pid)
    out, _ = await proc.communicate()
    floods: list[dict[str, Any]] = json.loads(out.decode().strip().splitlines()[-1])
    # The hub serves everyone after the flood: one more answer, and every session still listed.
    listed = await normal.request("session/list", {})
    listed_ids = {s["sessionId"] for s in listed["sessions"]}
    first = floods[0]
    p99_without = percentile(without, 99)
    p99_with = percentile(with_flood, 99)
    closed = [f for f in floods if f["seconds_to_close"] is not None]
    return {
        "figures": {
            "p99_ratio": p99_with / p99_without,
            "p99_without_ms": p99_without * 1000,
            "p99_with_ms": p99_with * 1000,
            "p50_without_ms": percentile(without, 50) * 1000,
            "p50_with_ms": percentile(with_flood, 50) * 1000,
            "flooder_close_code": float(first["close_code"] or 0),
            "flooder_seconds_to_close": first["seconds_to_close"] or float("nan"),
            "flooder_seconds_to_rate_limit": first["seconds_to_rate_limit"] or float("nan"),
            "flooders": float(len(floods)),
        },
        "correctness": {
            **correctness([normal]),
            "normal_answered": int(len(with_flood) > 0),
            "flooders_closed_1013": sum(1 for f in closed if f["close_code"] == 1013),
            "flooders_closed": len(closed),
            "all_listed": int({s.id for s in sessions} <= listed_ids),
        },
        "detail": {
            "floods": floods,
            "round_trips_without": latency_ms(without),
            "round_trips_with": latency_ms(with_flood),
            "rss_growth_mb": (rss_peak - rss_before) / 2**20,
            # The slowest round trips with the flood: (seconds after the first flooder
            # started, ms), to match them against the flooders' ``started`` and ``gone``.
            "slowest_with": sorted(
                (
                    (t - floods[0]["started"], rtt * 1000)
                    for t, rtt in zip(sent_at, with_flood, strict=True)
                ),
                key=lambda x: -x[1],
            )[:5],
        },
    }


async def s11_observers(target: Target, p: Params, server_pid: int) -> Result:
    """S11: one session, ``observers`` (10,000) observers, at one offered rate.

    A sample of the observers (one in ``sample``, the creator included) is read in full: seq
    check and latency; the others only count their stamped updates (``Conn.counting``), so
    that the load generator's one core reads them all in time. Nothing lost: every observer
    has every update of the window's stream once it drains. Memory: the server's RSS growth
    from the creator alone to every observer attached, per observer.

    With ``rates`` (calibration, against the baseline), the window runs at each rate in turn
    until its p99 passes ``p99_limit_ms``; the harness then runs both servers at the highest
    rate under the limit.
    """
    recorder = Recorder()
    sessions, conns = await _setup(target, recorder, 1, 1)
    await asyncio.sleep(p["settle_s"])
    before = rss(server_pid)
    t0 = now()
    more = await open_many(target, recorder, sessions, p["observers"] - 1)
    open_s = now() - t0
    await asyncio.sleep(p["settle_s"])
    after = rss(server_pid)
    everyone = conns + more
    sampled = [c for i, c in enumerate(everyone) if i % p["sample"] == 0]
    for i, conn in enumerate(everyone):
        conn.counting = i % p["sample"] != 0
    steps: list[dict[str, float]] = []
    lost = 0
    for rate in p.get("rates") or [p["rate"]]:
        count = max(1, math.ceil(rate * (p["seconds"] + 0.5)))
        goals = [c.marks + count for c in everyone]
        recorded = [c.recorded for c in sampled]
        step = await _window(
            target,
            recorder,
            sessions,
            everyone,
            rate,
            p["seconds"],
            p["warmup_s"],
            p["size"],
            pids=p["pids"],
        )
        lost = sum(max(0, g - c.marks) for c, g in zip(everyone, goals, strict=True))
        # The recorder counts the sampled observers' deliveries: scaled to all of them.
        step["deliveries_per_s"] *= len(everyone) / len(sampled)
        step["lost"] = float(lost)
        # Sampled observers that got nothing within the window (all of it late, or none).
        step["silent"] = float(
            sum(1 for c, r in zip(sampled, recorded, strict=True) if c.recorded == r)
        )
        steps.append(step)
        if step["p99_ms"] >= p["p99_limit_ms"] or lost or step["closed"] or step["silent"]:
            break
    under = [
        s for s in steps if s["p99_ms"] < p["p99_limit_ms"] and not s["lost"] and not s["silent"]
    ]
    step = under[-1] if p.get("rates") and under else steps[-1]
    return {
        "figures": {
            "rate": step["rate"],
            "deliveries_per_s": step["deliveries_per_s"],
            "p99_ms": step["p99_ms"],
            "p50_ms": step["p50_ms"],
            "lost": step["lost"],
            "kb_per_observer": (after - before) / 1024 / len(more),
            "server_cpu": step.get("server_cpu", math.nan),
        },
        "correctness": {
            **correctness(sampled),
            "observers": len(everyone),
            "closed": sum(1 for c in everyone if c.closed.done()),
            "lost": lost,
            # Every sampled observer got updates within the window (the latencies measured
            # some), not only once the stream drained.
            "sampled_delivered": int(step["silent"] == 0),
        },
        "detail": {
            "steps": steps,
            "open_s": open_s,
            "sampled": len(sampled),
            "rss_before_mb": before / 2**20,
            "rss_after_mb": after / 2**20,
            "frame_bytes": mean_frame(sampled),
        },
    }


def _s12_count(p: Params) -> int:
    """How many connections S12 opens: ``connections``, or fewer when the open-file limit
    (inherited by the server, and not to be raised past its hard value) would not hold them
    with the server's other files (the agents' pipes, its listening socket, ...)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        return int(p["connections"])
    return int(min(p["connections"], hard - p["fd_reserve"]))


async def s12_idle_many(target: Target, p: Params, server_pid: int) -> Result:
    """S12: ``connections`` idle connections (initialized, attached to ``sessions`` sessions,
    keepalive pings on): the server's CPU over ``measure_s`` and its memory per connection.

    The sessions and their creators live in this process; the other connections in
    ``workers`` processes (``tests/bench/idle.py``), each from its own ``127.0.0.x``. After
    the measurement one update per session must reach every connection, none closed.
    """
    recorder = Recorder()
    sessions, creators = await _setup(target, recorder, p["sessions"], 1)
    await asyncio.sleep(p["settle_s"])
    before = rss(server_pid)
    total = _s12_count(p) - len(creators)
    workers = int(p["workers"])
    ids = [[s.id, s.epoch] for s in sessions]
    procs = []
    t0 = now()
    for w in range(workers):
        share = total // workers + (1 if w < total % workers else 0)
        spec = {
            "kind": target.kind,
            "host": target.host,
            "port": target.port,
            "sessions": ids,
            "count": share,
            "offset": w,
            "source": f"127.0.0.{w + 2}",
            "concurrency": p.get("concurrency", 100),
        }
        procs.append(await _bench_process("idle", spec))
    try:
        opened = 0
        for proc in procs:
            assert proc.stdout is not None
            line = await proc.stdout.readline()
            if not line:
                raise RuntimeError("an S12 worker failed while opening its connections")
            opened += int(json.loads(line)["ready"])
        open_s = now() - t0
        await asyncio.sleep(p["settle_s"])
        after = rss(server_pid)
        cpu0, t1 = cpu_seconds(p["pids"]), now()
        await asyncio.sleep(p["measure_s"])
        cpu1, t2 = cpu_seconds(p["pids"]), now()
        peak = rss(server_pid)
        goals = [c.marks + 1 for c in creators]
        await target.stream(sessions, 0, 1, p["size"])
        records = []
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"check\n")
            await proc.stdin.drain()
        for proc in procs:
            assert proc.stdout is not None
            line = await proc.stdout.readline()
            if not line:
                raise RuntimeError("an S12 worker failed during the check")
            records.append(json.loads(line))
        await _drain(creators, goals, within=30)
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
            await proc.wait()
    mine = correctness(creators)
    keys = ("duplicates", "gaps", "resets", "number_gaps", "number_duplicates", "closed")
    summed = {k: mine[k] + sum(int(r[k]) for r in records) for k in keys}
    undelivered = sum(int(r["undelivered"]) for r in records)
    undelivered += sum(1 for c, g in zip(creators, goals, strict=True) if c.marks < g)
    connections = opened + len(creators)
    return {
        "figures": {
            "connections": float(connections),
            "server_cpu": (cpu1 - cpu0) / (t2 - t1),
            "kb_per_connection": (after - before) / 1024 / opened,
        },
        "correctness": {
            **mine,
            **summed,
            "observers": connections,
            "all_delivered": int(undelivered == 0),
        },
        "detail": {
            "open_s": open_s,
            "opened": connections,
            "measure_s": t2 - t1,
            "rss_before_mb": before / 2**20,
            "rss_after_mb": after / 2**20,
            "rss_end_mb": peak / 2**20,
            "undelivered": undelivered,
        },
    }


Scenario = Callable[[Target, Params, int], Awaitable[Result]]

SCENARIOS: dict[str, Scenario] = {
    "S1": s1_fanout,
    "S2": s2_wide,
    "S2-phased": s2_wide,
    "S2-scale": s2_scale,
    "S4": s4_late_join,
    "S5": s5_blip,
    "S7": s7_slow,
    "S8": s8_idle,
    "S9": s9_fairness,
    "S10": s10_storm,
    "S10-owner": s10_storm,
    "S13": s13_failover,
    "S11": s11_observers,
    "S12": s12_idle_many,
}
