"""One agent process: spawning, its process group, stderr capture and ordered shutdown.

Theory of operation
-------------------
Each agent runs in a process group of its own (``start_new_session=True``: the agent is the
leader, its pgid is its pid), so that everything it starts - shells, language servers, MCP
servers - can be ended together even when the agent itself is gone. It gets a trimmed
environment (``agent_environment``) plus its spec's ``env``; stdin and stdout carry ACP and
belong to the connection; stderr is read here into a bounded ring of lines
(``stderr_tail``) and logged under the agent's name.

Exit is detected from the leader itself (a pidfd where the platform has one), not from the
end of stdout and not from ``Process.wait()``: a grandchild that inherited stdout keeps the
pipes open, and asyncio's ``wait()`` only returns once every pipe is closed.

``stop(reason)`` is the ordered shutdown, shielded from cancellation and logged step by
step: close stdin, wait ``stdin_grace``; SIGTERM the group, wait ``term_grace``; SIGKILL the
group. ``end_group(reason)`` does the last two steps for a group whose leader already exited,
so no grandchild outlives its agent.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc

from hub.agents.spec import AgentSpec
from hub.protocol.framing import LineDecoder, LineTooLong

__all__ = [
    "ENV_KEEP",
    "AgentProcess",
    "ShutdownTimings",
    "agent_environment",
    "group_alive",
]

logger = logging.getLogger("hub.agents")
stderr_logger = logging.getLogger("hub.agents.stderr")

ENV_KEEP = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "SYSTEMROOT",
)
"""Variables of the hub's environment an agent inherits; everything else must come from its
spec's ``env`` (so the hub's secrets - its signing key, Redis URL, tokens - never leak)."""

STDERR_LINE_MAX = 8192
"""Longest stderr line kept whole; longer ones are replaced by a marker."""


@dataclass(frozen=True, slots=True)
class ShutdownTimings:
    """Seconds to wait at each step of ``AgentProcess.stop``."""

    stdin_grace: float = 2.0
    term_grace: float = 3.0
    kill_wait: float = 5.0


def agent_environment(spec: AgentSpec, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of ``spec``'s process: ``ENV_KEEP`` from ``base`` plus ``spec.env``."""
    source = os.environ if base is None else base
    env = {key: source[key] for key in ENV_KEEP if key in source}
    env.update(spec.env)
    return env


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class AgentProcess:
    """A spawned agent process (see the module docstring). Create with ``spawn``."""

    def __init__(self, name: str, process: anyio.abc.Process, *, stderr_lines: int = 200) -> None:
        self.name = name
        self._process = process
        self.pid = process.pid
        self.pgid = process.pid  # the leader of a new session: its pgid is its pid
        self._stderr: deque[str] = deque(maxlen=max(1, stderr_lines))
        self._stderr_line_event = anyio.Event()
        self._stdin_closed = False

    @classmethod
    async def spawn(
        cls, spec: AgentSpec, *, stderr_lines: int = 200, env: Mapping[str, str] | None = None
    ) -> AgentProcess:
        """Start ``spec`` in a new process group. Raises ``OSError`` if it cannot be run."""
        process = await anyio.open_process(
            spec.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=spec.cwd,
            env=agent_environment(spec, env),
            start_new_session=True,
        )
        logger.info("= agent %s started: pid %d, %s", spec.name, process.pid, spec.argv)
        return cls(spec.name, process, stderr_lines=stderr_lines)

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        assert self._process.stdout is not None
        return self._process.stdout

    @property
    def returncode(self) -> int | None:
        """The leader's exit status once it exited (negative: killed by that signal)."""
        return self._process.returncode

    def exit_status(self) -> tuple[int | None, str | None]:
        """``(exitCode, signal)`` of an exited leader; the other one is ``None``."""
        code = self.returncode
        if code is None:
            return None, None
        if code < 0:
            try:
                return None, signal.Signals(-code).name
            except ValueError:
                return None, f"SIG{-code}"
        return code, None

    def describe_exit(self) -> str:
        """How the leader ended, for a log line or an error: ``exit code N``, ``killed by
        SIGNAME`` or ``still running``."""
        code, sig = self.exit_status()
        if sig is not None:
            return f"killed by {sig}"
        if code is not None:
            return f"exit code {code}"
        return "still running"

    def stderr_tail(self) -> str:
        """The last lines the agent wrote to stderr (at most ``stderr_lines``)."""
        return "\n".join(self._stderr)

    async def pump_stderr(self) -> None:
        """Read stderr into the ring and the log until it closes."""
        stream = self._process.stderr
        if stream is None:
            return
        decoder = LineDecoder(STDERR_LINE_MAX)
        try:
            async for chunk in stream:
                for line in decoder.feed(chunk):
                    self._stderr_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        for line in decoder.close():
            self._stderr_line(line)

    def _stderr_line(self, line: bytes | LineTooLong) -> None:
        if isinstance(line, LineTooLong):
            text = f"[stderr line of {line.length}+ bytes not kept]"
        else:
            text = line.decode("utf-8", "replace")
        self._stderr.append(text)
        stderr_logger.info("agent %s stderr: %s", self.name, text)
        self._stderr_line_event.set()
        self._stderr_line_event = anyio.Event()

    async def next_stderr_line(self) -> None:
        """Return once the agent wrote another stderr line."""
        await self._stderr_line_event.wait()

    async def wait_exit(self) -> int:
        """Return the leader's exit status once it exited, whoever still holds its pipes."""
        code = self.returncode
        if code is not None:
            return code
        fd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                fd = os.pidfd_open(self.pid)
            except OSError:
                fd = None  # already reaped, or no pidfd support: poll below
        if fd is not None:
            try:
                await anyio.wait_readable(fd)
            finally:
                os.close(fd)
        # The event loop's child watcher reaps the leader and records the status.
        delay = 0.002
        while (code := self.returncode) is None:
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code

    async def wait_exit_for(self, seconds: float) -> bool:
        """Wait up to ``seconds`` for the leader to exit; whether it did."""
        with anyio.move_on_after(seconds):
            await self.wait_exit()
        return self.returncode is not None

    def signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the whole group; ``False`` if the group no longer exists."""
        try:
            os.killpg(self.pgid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:
            # The pgid was recycled by someone else's group: ours is gone.
            return False
        return True

    async def close_stdin(self) -> None:
        """Close the agent's stdin (its signal to finish); idempotent."""
        if self._stdin_closed:
            return
        self._stdin_closed = True
        try:
            await self.stdin.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass

    async def stop(self, reason: str, timings: ShutdownTimings | None = None) -> None:
        """Ordered, shielded shutdown: close stdin, SIGTERM the group, SIGKILL the group."""
        t = timings or ShutdownTimings()
        with anyio.CancelScope(shield=True):
            if self.returncode is None:
                logger.info("= agent %s: stopping (%s): closing stdin", self.name, reason)
                await self.close_stdin()
                if not await self.wait_exit_for(t.stdin_grace):
                    logger.info(
                        "= agent %s: still running %.1fs after stdin closed: SIGTERM to group %d",
                        self.name,
                        t.stdin_grace,
                        self.pgid,
                    )
                    self.signal_group(signal.SIGTERM)
                    # The escalation's next step, alike in shape to the one above.
                    if not await self.wait_exit_for(t.term_grace):
                        logger.warning(
                            "! agent %s: ignored SIGTERM for %.1fs: SIGKILL to group %d",
                            self.name,
                            t.term_grace,
                            self.pgid,
                        )
                        self.signal_group(signal.SIGKILL)
                        if not await self.wait_exit_for(t.kill_wait):
                            logger.error("! agent %s: pid %d survived SIGKILL", self.name, self.pid)
            await self.end_group(f"{reason}: agent exited", t)

    async def end_group(self, reason: str, timings: ShutdownTimings | None = None) -> None:
        """End what is left of the group after its leader exited: SIGTERM, wait, SIGKILL."""
        t = timings or ShutdownTimings()
        with anyio.CancelScope(shield=True):
            if not group_alive(self.pgid):
                return
            logger.info(
                "= agent %s: %s, processes left in group %d: SIGTERM",
                self.name,
                reason,
                self.pgid,
            )
            self.signal_group(signal.SIGTERM)
            if await self._wait_group_for(t.term_grace):
                return
            logger.warning(
                "! agent %s: group %d ignored SIGTERM for %.1fs: SIGKILL",
                self.name,
                self.pgid,
                t.term_grace,
            )
            self.signal_group(signal.SIGKILL)
            await self._wait_group_for(t.kill_wait)

    async def _wait_group_for(self, seconds: float) -> bool:
        # No event tells us when an orphaned grandchild dies, so poll (briefly, rarely).
        with anyio.move_on_after(seconds):
            delay = 0.005
            while group_alive(self.pgid):
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.1)
            return True
        return False

    async def aclose(self) -> None:
        """Release the pipes and reap the leader; call after it exited (``stop``/``end_group``)."""
        with anyio.CancelScope(shield=True):
            await self.close_stdin()
            for stream in (self._process.stdout, self._process.stderr):
                if stream is not None:
                    try:
                        await stream.aclose()
                    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass
            with anyio.move_on_after(5):
                await self._process.wait()
