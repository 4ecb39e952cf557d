"""Starting and stopping the servers under test as subprocesses, pinned to their cores.

Both servers print ``...: listening on http://HOST:PORT`` on stdout once ready; the port is
read from that line (they bind port 0). The server is pinned to ``server_cpus`` from the moment
it starts (``preexec_fn``), so the hub's agent subprocess inherits that affinity until it pins
itself to ``agent_cpus`` (``agent.py --cpus``).
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from io import BufferedReader
from pathlib import Path
from typing import IO, cast

from tests.bench.payload import now
from tests.redis_server import RedisServer

__all__ = ["ROOT", "Server", "ServerFailed", "start_baseline", "start_hub", "start_redis"]

ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(rb"listening on http://([0-9.]+):(\d+)")


class ServerFailed(Exception):
    """A server did not start; the message carries the end of its log."""


@dataclass
class Server:
    """A running server subprocess."""

    kind: str
    proc: subprocess.Popen[bytes]
    host: str
    port: int
    log: Path
    closers: list[Callable[[], None]] = field(default_factory=list)
    """Run after the process has exited: join the log copier, close the pipe and the log."""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def placement(self) -> dict[str, list[int]]:
        """The CPUs the server and its agent subprocesses may run on, as the kernel has them.

        Read while the server runs, so that the report's placement is checked, not assumed:
        an agent inherits the server's affinity unless it pins itself.
        """
        seen: dict[str, list[int]] = {"server": _cpus(self.pid)}
        agents: set[int] = set()
        for child in children([self.pid]):
            try:
                agents.update(_cpus(child))
            except OSError:
                continue  # gone meanwhile
        if agents:
            seen["agent"] = sorted(agents)
        return seen

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; the whole process group (the hub's agents too)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        while self.closers:
            self.closers.pop(0)()


def children(pids: Iterable[int]) -> list[int]:
    """The processes whose parent is one of ``pids`` (a hub's agent processes), read from
    ``/proc`` (``/proc/PID/task/TID/children`` is not on every kernel)."""
    parents = set(pids)
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[1]) in parents:
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
    return found


def _cpus(pid: int) -> list[int]:
    try:
        return sorted(os.sched_getaffinity(pid))
    except (OSError, AttributeError):
        return []


def _pin(cpus: set[int] | None) -> None:
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cpus)


def _copy(stream: BufferedReader, log: IO[bytes]) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        log.write(chunk)
        log.flush()


def _start(
    kind: str,
    argv: list[str],
    log: Path,
    cpus: set[int] | None,
    env: dict[str, str],
    within: float = 60.0,
) -> Server:
    log.parent.mkdir(parents=True, exist_ok=True)
    out = log.open("wb")
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=out,
        env={**os.environ, **env},
        preexec_fn=lambda: _pin(cpus),
        start_new_session=True,
    )
    assert proc.stdout is not None
    stdout = cast(BufferedReader, proc.stdout)
    seen = b""
    deadline = now() + within
    while (match := _LISTENING.search(seen)) is None:
        left = deadline - now()
        if left <= 0 or proc.poll() is not None:
            proc.kill()
            proc.wait()
            out.close()
            tail = log.read_text(errors="replace")[-2000:]
            raise ServerFailed(f"{kind} did not start ({' '.join(argv)}):\n{seen!r}\n{tail}")
        ready, _, _ = select.select([stdout], [], [], min(left, 0.5))
        if ready:
            chunk = stdout.read1(65536)
            if not chunk:
                continue
            seen += chunk
            out.write(chunk)
    # Keep draining stdout into the log, so that the server never blocks on a full pipe.
    copier = threading.Thread(target=_copy, args=(stdout, out), daemon=True)
    copier.start()
    closers = [lambda: copier.join(10), stdout.close, out.close]
    return Server(kind, proc, match.group(1).decode(), int(match.group(2)), log, closers)


def start_baseline(
    log: Path,
    cpus: set[int] | None,
    feed_cpus: set[int] | None = None,
    *,
    ping_interval: float | None = None,
) -> Server:
    """The baseline broadcast server on an ephemeral loopback port, its feeds on
    ``feed_cpus`` (keepalive pings every ``ping_interval`` seconds when given, else none)."""
    argv = [sys.executable, "-m", "tests.bench.baseline", "--host", "127.0.0.1", "--port", "0"]
    if feed_cpus:
        argv += ["--feed-cpus", ",".join(str(c) for c in sorted(feed_cpus))]
    if ping_interval is not None:
        argv += ["--ping-interval", str(ping_interval)]
    return _start("baseline", argv, log, cpus, {})


def start_hub(
    log: Path,
    cpus: set[int] | None,
    agent_cpus: set[int] | None,
    *,
    config: Path | None = None,
    extra: list[str] | None = None,
) -> Server:
    """``acp-hub serve`` with the bench agent on an ephemeral loopback port."""
    exe = Path(sys.executable).with_name("acp-hub")
    agent = f"bench={sys.executable} tests/bench/agent.py"
    if agent_cpus:
        # An argument: the hub passes its agents only a few of its environment variables.
        agent += " --cpus " + ",".join(str(c) for c in sorted(agent_cpus))
    # Credentials off (loopback only): the benchmarks measure the fan-out, not the handshake.
    argv = [str(exe), "serve", "--host", "127.0.0.1", "--port", "0", "--auth", "none"]
    argv += ["--agent", agent, "--workspace", str(ROOT)]
    if config is not None:
        argv += ["--config", str(config)]
    argv += extra or []
    env = {"PYTHONPATH": str(ROOT)}
    return _start("hub", argv, log, cpus, env)


def start_redis(directory: Path, cpus: set[int] | None) -> RedisServer:
    """A ``redis-server`` of the run's own (``tests/redis_server.py``) on ``cpus``."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServerFailed("redis-server is not installed")
    redis = RedisServer(binary, directory)
    redis.start()
    if cpus and redis.proc is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(redis.proc.pid, cpus)
    return redis
