"""Agent processes: trimmed environment, own process group, stderr ring, ordered stop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio

from hub.agents.process import AgentProcess, ShutdownTimings, agent_environment
from hub.agents.spec import AgentSpec
from tests.agents.harness import live_members, wait_group_gone


def test_environment_is_trimmed_and_extended() -> None:
    base = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "HUB_SECRET": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "k",
    }
    spec = AgentSpec("a", "cmd", env={"HOME": "/tmp/agent-home", "API_KEY": "mine"})
    env = agent_environment(spec, base)
    assert env == {"PATH": "/bin", "HOME": "/tmp/agent-home", "LANG": "C.UTF-8", "API_KEY": "mine"}


async def test_spawned_process_gets_its_own_group_and_environment(tmp_path: Path) -> None:
    os.environ["ACP_HUB_TEST_SECRET"] = "do-not-leak"
    try:
        code = (
            "import json, os, sys; "
            "sys.stderr.write(json.dumps({'pgid': os.getpgid(0), 'sid': os.getsid(0), "
            "'env': dict(os.environ), 'cwd': os.getcwd()}) + '\\n'); sys.stderr.flush(); "
            "sys.stdin.read()"
        )
        spec = AgentSpec("env", sys.executable, ("-c", code), env={"EXTRA": "1"}, cwd=str(tmp_path))
        process = await AgentProcess.spawn(spec, stderr_lines=5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(process.pump_stderr)
            with anyio.fail_after(10):
                while not process.stderr_tail():
                    await process.next_stderr_line()
            seen = json.loads(process.stderr_tail())
            await process.stop("test over", ShutdownTimings(1, 1, 2))
        await process.aclose()
    finally:
        del os.environ["ACP_HUB_TEST_SECRET"]
    assert seen["pgid"] == process.pid == seen["sid"]  # a new session and group
    assert "ACP_HUB_TEST_SECRET" not in seen["env"]
    assert seen["env"]["EXTRA"] == "1"
    assert seen["cwd"] == str(tmp_path)
    assert process.exit_status() == (0, None)  # it ended on stdin EOF, the first step


async def test_stderr_ring_is_bounded() -> None:
    code = (
        "import sys\n"
        "for i in range(50): print('line', i, file=sys.stderr)\n"
        "print('x' * 10000, file=sys.stderr)"
    )
    process = await AgentProcess.spawn(
        AgentSpec("noisy", sys.executable, ("-c", code)), stderr_lines=3
    )
    await process.pump_stderr()
    await process.stop("done")
    await process.aclose()
    assert process.stderr_tail().splitlines() == [
        "line 48",
        "line 49",
        "[stderr line of 10000+ bytes not kept]",
    ]


async def test_stop_escalates_to_sigkill_for_the_whole_group() -> None:
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)']); "
        "print(child.pid, file=sys.stderr, flush=True); time.sleep(60)"
    )
    process = await AgentProcess.spawn(AgentSpec("stubborn", sys.executable, ("-c", code)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(process.pump_stderr)
        with anyio.fail_after(10):
            while not process.stderr_tail():
                await process.next_stderr_line()
        child = int(process.stderr_tail())
        assert child in live_members(process.pgid)
        await process.stop("test", ShutdownTimings(stdin_grace=0.2, term_grace=0.3, kill_wait=3))
    await process.aclose()
    assert process.exit_status() == (None, "SIGKILL")
    assert await wait_group_gone(process.pgid)
