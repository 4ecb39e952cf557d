"""``acp-hub agent-login NAME``: an agent's terminal login, run with its definition."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.agents.harness import SCRIPTED_AGENT


def _config(tmp_path: Path, home: Path, work: Path, *flags: str) -> Path:
    args = json.dumps([str(SCRIPTED_AGENT), *flags])
    config = tmp_path / "hub.toml"
    config.write_text(
        "[agents.scripted]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = {args}\n"
        f"env = {{ HOME = {json.dumps(str(home))} }}\n"
        f"cwd = {json.dumps(str(work))}\n"
    )
    return config


async def _agent_login(config: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    argv = [sys.executable, "-m", "hub.cli", "agent-login", "scripted", "--config", str(config)]
    with anyio.fail_after(60):
        return await anyio.run_process([*argv, *extra], check=False, env=dict(os.environ))


@pytest.mark.parametrize("protocol", ["1", "2"])
async def test_agent_login_runs_the_terminal_method_with_the_definition(
    tmp_path: Path, agent_home: Path, protocol: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = _config(tmp_path, agent_home, work, "--require-login", "--protocol", protocol)
    done = await _agent_login(config)
    assert done.returncode == 0, done.stderr.decode()
    assert b"terminal login done" in done.stdout
    assert b"scripted-terminal" in done.stderr  # what it runs is said first
    # It ran with the agent's command, its env (HOME) and cwd, plus the method's args.
    marker = json.loads((agent_home / "scripted-terminal-login").read_text())
    assert marker["cwd"] == str(work)
    assert "--terminal-login" in marker["argv"]
    assert "--require-login" in marker["argv"]


async def test_agent_login_says_when_there_is_no_terminal_method(
    tmp_path: Path, agent_home: Path
) -> None:
    config = _config(tmp_path, agent_home, tmp_path, "--require-login")
    done = await _agent_login(config, "--method", "nope")
    assert done.returncode == 2
    assert b"offers no terminal login 'nope'" in done.stderr
    assert b"scripted-login (agent)" in done.stderr
    unknown = await anyio.run_process(
        [sys.executable, "-m", "hub.cli", "agent-login", "other", "--config", str(config)],
        check=False,
    )
    assert unknown.returncode == 2
    assert b"unknown agent 'other' (defined: scripted)" in unknown.stderr
