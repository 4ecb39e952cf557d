"""A real ``redis-server`` for the tests: its own process, port and directory.

``RedisServer.start`` runs ``redis-server`` on a free loopback port with its data (an
append-only file, fsynced every second) in a directory of the test's, and returns once the
server says it accepts connections. ``stop`` (SIGTERM: Redis writes its data and exits),
``kill`` (SIGKILL), ``pause``/``resume`` (SIGSTOP/SIGCONT) let tests break it on purpose.
The ``redis_server`` fixture (``tests/conftest.py``) skips, with the reason, where the binary
is missing (fails under ``ACP_HUB_REQUIRE_ALL=1``).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

READY = b"Ready to accept connections"
START_TIMEOUT = 20.0


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RedisServer:
    """One ``redis-server`` process; see the module docstring."""

    binary: str
    directory: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    extra: tuple[str, ...] = ()
    """More ``redis-server`` arguments (``--cluster-enabled yes``, say)."""
    _log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log = self.directory / "redis.log"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start (or restart, on the same port and data) and wait until it is ready."""
        attempts = 3 if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or free_port()
            if self._start_on(port):
                self.port = port
                return
            if attempt == attempts - 1:
                raise RuntimeError(f"redis-server did not start: {self._log.read_text()[-2000:]}")

    def _start_on(self, port: int) -> bool:
        proc = subprocess.Popen(
            [
                self.binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--dir", str(self.directory),
                "--save", "",
                "--appendonly", "yes",
                "--appendfsync", "everysec",
                "--daemonize", "no",
                "--logfile", "",
                *self.extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        ready = threading.Event()
        assert proc.stdout is not None
        threading.Thread(target=self._drain, args=(proc.stdout, ready), daemon=True).start()
        if ready.wait(START_TIMEOUT) and proc.poll() is None:
            self.proc = proc
            return True
        proc.kill()
        proc.wait()
        return False

    def _drain(self, stream: IO[bytes], ready: threading.Event) -> None:
        """Copy the server's output to its log file (a full pipe would block the server),
        noting when it is ready."""
        with self._log.open("ab") as out:
            for line in stream:
                out.write(line)
                out.flush()
                if READY in line:
                    ready.set()
        ready.set()  # the process ended: `start` looks at its status

    def stop(self) -> None:
        """SIGTERM: Redis saves its data and exits."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: whatever was not fsynced is gone."""
        self._end(signal.SIGKILL)

    def _end(self, sig: signal.Signals) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(sig)
        proc.wait(timeout=START_TIMEOUT)
        assert proc.stdout is not None
        proc.stdout.close()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)


def store_setting(kind: str, sqlite_file: Path, request: pytest.FixtureRequest) -> str:
    """The ``store`` setting of a test run on each kind of store: ``memory``, the SQLite
    database ``sqlite_file``, or (``redis``) the ``redis_server`` fixture's server."""
    if kind == "memory":
        return "memory"
    if kind == "sqlite":
        return f"sqlite:///{sqlite_file}"
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url
