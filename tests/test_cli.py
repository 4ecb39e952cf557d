"""The ``acp-hub`` console script's own surface: its help, and what it says about a bad port.

Each test runs the installed console script in a process, as a user runs it.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.credentials import hub_env
from tests.support import ROOT

ACP_HUB = Path(sys.executable).parent / "acp-hub"
SUBCOMMANDS = ("serve", "demo", "agent-login", "token", "bridge")
TIMEOUT = 30.0


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), **hub_env(tmp_path / "state"))
    return subprocess.run(
        [str(ACP_HUB), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _options(help_text: str) -> dict[str, str]:
    """Each option of a ``--help`` text with its description (wrapped lines joined)."""
    found: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        match = re.match(r"^  (-[-\w]+(?:, -[-\w]+)?)(?: [^ ]+)?(?:  +(.*))?$", line)
        if match is not None:
            current = match.group(1).split(", ")[-1]
            found[current] = match.group(2) or ""
        elif current is not None and line.startswith("      "):
            found[current] += " " + line.strip()
        else:
            current = None
    return {name: " ".join(text.split()) for name, text in found.items()}


def test_the_help_describes_every_subcommand_in_one_line(tmp_path: Path) -> None:
    done = run(tmp_path, "--help")
    assert done.returncode == 0
    listed = {}
    for line in done.stdout.splitlines():
        match = re.match(r"^    ([a-z-]+) +(\S.*)$", line)
        if match is not None:
            listed[match.group(1)] = match.group(2)
    assert set(listed) == set(SUBCOMMANDS), done.stdout
    for name in SUBCOMMANDS:
        assert len(listed[name]) > 20, name
        page = run(tmp_path, name, "--help")
        assert page.returncode == 0
        # The page opens with the same description, as a sentence.
        assert listed[name][1:] + "." in page.stdout, page.stdout


@pytest.mark.parametrize(
    ("command", "option", "says"),
    [
        ("serve", "--log-level", ["debug, info, warning or error", "default", "info"]),
        ("demo", "--log-level", ["debug, info, warning or error", "default", "info"]),
        ("bridge", "--log-level", ["debug, info, warning or error", "default", "info"]),
        ("agent-login", "--log-level", ["debug, info, warning or error", "default", "warning"]),
        ("demo", "--protocol", ["auto", "1 or 2", "the default"]),
        ("token", "--role", ["viewer, approver, driver or owner", "default viewer"]),
        ("agent-login", "--agent", ["NAME=COMMAND", "default"]),
        ("serve", "--port", ["0-65535", "default 8765"]),
    ],
)
def test_the_help_says_what_an_option_takes_and_its_default(
    tmp_path: Path, command: str, option: str, says: list[str]
) -> None:
    done = run(tmp_path, command, "--help")
    assert done.returncode == 0
    options = _options(done.stdout)
    every = set(options) - {"--help"}
    assert all(options[o] for o in every), {o: t for o, t in options.items() if not t}
    page = done.stdout
    line = options[option]
    for word in says:
        assert word in line or (word == "NAME=COMMAND" and f"{option} {word}" in page), (
            option,
            line,
        )


@pytest.mark.parametrize("port", ["99999", "-5", "65536", "eighty"])
def test_a_port_out_of_range_is_one_line_and_status_2(tmp_path: Path, port: str) -> None:
    done = run(tmp_path, "demo", f"--port={port}")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("acp-hub demo: argument --port: "), line
    assert "(see acp-hub demo --help)" in line


def test_a_port_out_of_range_in_the_config_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text("[hub]\nport = 99999\n[agents.a]\ncommand = 'true'\n")
    done = run(tmp_path, "serve", "--config", str(config), "--workspace", str(tmp_path))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line == f"acp-hub: {config}: [hub]: port must be between 0 and 65535 (0: any free port)"


def test_a_port_in_use_says_so_and_how_to_change_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = run(tmp_path, "demo", "--port", str(port))
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert (
        line == f"acp-hub: port {port} is in use: pass --port (another port, or 0 for any free one)"
    )


def test_an_unknown_subcommand_is_one_line(tmp_path: Path) -> None:
    done = run(tmp_path, "frob")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("acp-hub: argument command: invalid choice: 'frob'"), line
