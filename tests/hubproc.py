"""A real hub process for the tests: the ``acp-hub`` console script in a process of its own.

``hub_command`` starts ``acp-hub ARGS`` (with this checkout first on ``PYTHONPATH``, so the hub
and the agents it spawns import this tree) in a directory of the test's, waits for its banner
(``BANNER``, the one line ``hub.cli`` prints once the server listens) and yields a handle that
can interrupt it (SIGINT: a clean shutdown) or kill it (SIGKILL: a crash); the hub's stderr goes
to a file the test can read. ``hub_process`` is ``acp-hub serve`` with a store and an agent;
``hub_nodes`` starts several of them at once on one store, each in its own directory, and checks
at the end that none logged a traceback. Tests that start a hub some other way (an installed
wheel, a synchronous ``subprocess``) read its banner with ``BANNER`` too.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.text import TextReceiveStream

from tests.credentials import hub_env, owner_token

ROOT = Path(__file__).resolve().parents[1]
ACP_HUB = Path(sys.executable).parent / "acp-hub"
SCRIPTED = ROOT / "tests" / "agents" / "scripted_agent.py"
BANNER = re.compile(r"^acp-hub: listening on (http://(\S+):(\d+))$", re.MULTILINE)
"""The line ``acp-hub serve`` and ``acp-hub demo`` print once they listen: the base URL
(group 1), the host (2) and the port (3)."""
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


@dataclass
class HubProcess:
    process: anyio.abc.Process
    port: int
    stderr: Path

    @property
    def url(self) -> str:
        """``/acp`` with the test owner token (as ``HubHandle.url``)."""
        return f"ws://127.0.0.1:{self.port}/acp?token={owner_token()}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def interrupt(self) -> int:
        """SIGINT and wait: the clean shutdown; the exit status."""
        self.process.send_signal(signal.SIGINT)
        with anyio.fail_after(STOP_TIMEOUT):
            return await self.process.wait()

    async def kill(self) -> None:
        """SIGKILL and wait: a crash, nothing flushed, nothing marked."""
        self.process.kill()
        with anyio.fail_after(STOP_TIMEOUT):
            await self.process.wait()

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


def scripted(*flags: str, protocol: int = 2) -> str:
    """``--agent`` value for the scripted agent with ``flags``."""
    args = [sys.executable, str(SCRIPTED), "--protocol", str(protocol), *flags]
    return "scripted=" + shlex.join(args)


def hub_environment(workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a hub subprocess: none of the caller's ``ACP_HUB_*`` settings, this
    checkout on ``PYTHONPATH``, ``HOME`` in ``workdir``, the test key and a state directory
    there (``workdir/state``), then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env["PYTHONPATH"] = str(ROOT)
    env["HOME"] = str(workdir)
    env.update(hub_env(workdir / "state"))
    env.update(extra or {})
    return env


async def _start(
    workdir: Path, args: tuple[str, ...], env: Mapping[str, str] | None, name: str
) -> HubProcess:
    """``acp-hub ARGS`` in ``workdir`` until its banner names the port (killed if it fails)."""
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a test's own directory
    stderr = workdir / f"{name}.stderr"
    with stderr.open("ab") as err:
        process = await anyio.open_process(
            [str(ACP_HUB), *args],
            env=hub_environment(workdir, env),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        assert process.stdout is not None
        seen = ""
        port = None
        with anyio.fail_after(START_TIMEOUT):
            async for text in TextReceiveStream(process.stdout):
                seen += text
                match = BANNER.search(seen)
                if match is not None:
                    port = int(match.group(3))
                    break
        assert port is not None, f"no banner: {seen!r} {stderr.read_text()}"
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stop(process)
        raise
    return HubProcess(process, port, stderr)


async def stop(
    process: anyio.abc.Process, graceful: signal.Signals | None = None, timeout: float = 0.0
) -> None:
    """Stop ``process`` if it still runs, and release it: the signal ``graceful`` first, if
    given, then ``timeout`` seconds to exit before SIGKILL."""
    if process.returncode is None and graceful is not None:
        process.send_signal(graceful)
        with anyio.move_on_after(timeout):
            await process.wait()
    if process.returncode is None:
        process.kill()
        await process.wait()
    await process.aclose()


@asynccontextmanager
async def hub_command(
    workdir: Path, *args: str, env: Mapping[str, str] | None = None, name: str = "hub"
) -> AsyncIterator[HubProcess]:
    """``acp-hub ARGS`` (which should listen on ``--port 0``) run in ``workdir`` with
    ``hub_environment(workdir, env)``, its stderr in ``workdir/NAME.stderr``; killed at the end
    if still running."""
    hub = await _start(workdir, args, env, name)
    try:
        yield hub
    finally:
        with anyio.CancelScope(shield=True):
            await stop(hub.process)


def toml_value(value: Any) -> str:
    """``value`` in TOML: JSON's strings, numbers and arrays are TOML's; objects become
    inline tables."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return orjson.dumps(value).decode()


def _serve_args(
    workdir: Path, store: str, agent: str, extra: tuple[str, ...], name: str, hub: dict[str, Any]
) -> tuple[str, ...]:
    if hub:
        config = workdir / f"{name}.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(f"{k} = {toml_value(v)}\n" for k, v in hub.items())
        config.write_text("[hub]\n" + lines)
        extra = (*extra, "--config", str(config))
    return ("serve", "--port", "0", "--store", store, "--agent", agent, "--workspace", "/", *extra)


@asynccontextmanager
async def hub_process(
    workdir: Path,
    store: str,
    agent: str,
    *extra: str,
    name: str = "hub",
    hub: dict[str, Any] | None = None,
) -> AsyncIterator[HubProcess]:
    """``acp-hub serve --port 0 --store STORE --agent AGENT EXTRA``, with the ``[hub]``
    settings ``hub`` in a config file; killed if still running."""
    args = _serve_args(workdir, store, agent, extra, name, hub or {})
    async with hub_command(workdir, *args, name=name) as process:
        yield process


@asynccontextmanager
async def hub_nodes(
    workdir: Path,
    store: str,
    names: str = "abc",
    *,
    agent: str | None = None,
    hub: dict[str, Any] | None = None,
) -> AsyncIterator[list[HubProcess]]:
    """One ``acp-hub serve`` node per letter of ``names`` (``node_name`` ``node-X``, in
    ``workdir/node-X``) on the one store ``store``, started together. Their agent defaults to
    the scripted agent keeping its sessions in one directory (``workdir/agent-state``), so that
    a node taking a session over resumes it at its own agent. At the end, no node's log may
    hold a traceback."""
    if agent is None:
        state = workdir / "agent-state"
        state.mkdir(parents=True, exist_ok=True)
        agent = scripted("--state-dir", str(state))
    nodes: dict[str, HubProcess] = {}

    async def start(letter: str) -> None:
        name = f"node-{letter}"
        node_dir = workdir / name
        args = _serve_args(node_dir, store, agent, (), name, {"node_name": name, **(hub or {})})
        nodes[letter] = await _start(node_dir, args, None, name)

    try:
        async with anyio.create_task_group() as group:
            for letter in names:
                group.start_soon(start, letter)
        started = [nodes[letter] for letter in names]
        yield started
        for node in started:
            assert "Traceback" not in node.log(), node.log()
    finally:
        with anyio.CancelScope(shield=True):
            for node in nodes.values():
                await stop(node.process)
