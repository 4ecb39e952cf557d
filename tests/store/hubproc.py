"""A real hub process for the restart and multi-node tests: ``acp-hub serve`` with a store.

``hub_process`` starts the console script (with this checkout first on ``PYTHONPATH``, so the
hub and the agents it spawns import this tree) on an ephemeral port with the project's scripted
agent, waits for its banner, and yields a handle that can interrupt it (SIGINT: a clean
shutdown) or kill it (SIGKILL: a crash). The hub's stderr goes to a file the test can read.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.text import TextReceiveStream

from tests.credentials import hub_env, owner_token

ROOT = Path(__file__).resolve().parents[2]
ACP_HUB = Path(sys.executable).parent / "acp-hub"
SCRIPTED = ROOT / "tests" / "agents" / "scripted_agent.py"
LISTENING = re.compile(r"^acp-hub: listening on http://127\.0\.0\.1:(\d+)$", re.MULTILINE)
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


def toml_value(value: Any) -> str:
    """``value`` in TOML: JSON's strings, numbers and arrays are TOML's; objects become
    inline tables."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return orjson.dumps(value).decode()


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
    workdir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - a test's own directory
    stderr = workdir / f"{name}.stderr"
    if hub:
        config = workdir / f"{name}.toml"
        lines = "".join(f"{k} = {toml_value(v)}\n" for k, v in hub.items())
        config.write_text("[hub]\n" + lines)
        extra = (*extra, "--config", str(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env["PYTHONPATH"] = str(ROOT)
    env["HOME"] = str(workdir)
    # The test key (test clients hold owner tokens of it), the hub's state beside its store.
    env.update(hub_env(workdir / "state"))
    with stderr.open("ab") as err:
        process = await anyio.open_process(
            [
                *(str(ACP_HUB), "serve", "--port", "0", "--store", store, "--agent", agent),
                *("--workspace", "/", *extra),
            ],
            env=env,
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
                match = LISTENING.search(seen)
                if match is not None:
                    port = int(match.group(1))
                    break
        assert port is not None, f"no banner: {seen!r} {stderr.read_text()}"
        yield HubProcess(process, port, stderr)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()
