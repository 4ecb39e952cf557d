"""The ``acp-hub`` console script's own surface: its help, what it says about a bad port, the
banner it starts with and the owner URL file each hub keeps (``acp-hub url``).

Each test runs the installed console script in a process, as a user runs it.
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.credentials import hub_env
from tests.support import ROOT

ACP_HUB = Path(sys.executable).parent / "acp-hub"
SUBCOMMANDS = ("serve", "demo", "agent-login", "token", "url", "export", "import", "bridge")
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


# -- the start banner and the owner URL files -----------------------------------------------------


@dataclass
class Started:
    process: subprocess.Popen[str]
    banner: list[str]
    stderr: Path

    @property
    def owner_url(self) -> str:
        (line,) = [b for b in self.banner if b.startswith("acp-hub: owner URL: ")]
        return line.removeprefix("acp-hub: owner URL: ")

    @property
    def port(self) -> int:
        match = re.match(r"^acp-hub: listening on http://127\.0\.0\.1:(\d+)$", self.banner[0])
        assert match is not None, self.banner
        return int(match.group(1))

    def stop(self) -> int:
        """SIGINT and wait: the clean shutdown; the exit status."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=TIMEOUT)


@contextmanager
def demo(tmp_path: Path, name: str, state: Path) -> Iterator[Started]:
    """``acp-hub demo --port 0`` with its state in ``state``, once its banner is printed (up
    to its last line, how to stop it); killed if still running."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path), **hub_env(state))
    stderr = tmp_path / f"{name}.stderr"
    with stderr.open("w") as err:
        # A process of its own whose output the test reads as it comes (not tests/hubproc.py).
        process = subprocess.Popen(
            [str(ACP_HUB), "demo", "--port", "0"],
            env=env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert process.stdout is not None
        banner = []
        for line in process.stdout:  # ends at EOF if the hub dies
            banner.append(line.rstrip("\n"))
            if line.startswith("acp-hub:   stop with"):
                break
        assert banner, stderr.read_text()
        assert banner[-1].startswith("acp-hub:   stop with"), (banner, stderr.read_text())
        yield Started(process, banner, stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


def _claims(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (the hub's own tests check signatures)."""
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((), "viewer token"),
        (("--role", "driver"), "driver token"),
        (("--sub", "ci-bot"), "ci-bot"),
        (("--name", "Alice", "--sub", "alice"), "Alice"),
    ],
)
def test_a_minted_token_carries_a_name_for_people(
    tmp_path: Path, args: tuple[str, ...], name: str
) -> None:
    done = run(tmp_path, "token", *args)
    assert done.returncode == 0, done.stderr
    assert _claims(done.stdout.strip())["name"] == name


def test_the_demo_prints_one_banner(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with demo(tmp_path, "hub", state) as hub:
        port, url = hub.port, hub.owner_url
        assert url.startswith(f"http://127.0.0.1:{port}/#token=")
        file = state / f"owner-url-{port}"
        assert hub.banner == [
            f"acp-hub: listening on http://127.0.0.1:{port}",
            f"acp-hub: owner URL: {url}",
            "acp-hub:   open it in a browser to use the hub as its owner; the demo agent is "
            "ready to prompt",
            f"acp-hub:   it is also in {file} (readable by you only); "
            f"`acp-hub url --port {port}` prints it again",
            "acp-hub:   stop with Ctrl+C (SIGINT) or SIGTERM",
        ]
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert file.read_text() == url + "\n"
        # The owner is named after the user who started the hub.
        assert _claims(url.split("#token=", 1)[1])["name"] == getpass.getuser()
        assert hub.stop() == 0
        # uvicorn's start and stop announcements are debug lines; nothing else was logged.
        assert hub.stderr.read_text() == ""
    assert not file.exists()  # a hub that stopped leaves no owner URL behind


def test_two_hubs_of_one_user_keep_their_own_owner_urls(tmp_path: Path) -> None:
    state = tmp_path / "state"  # the same state directory, as for every hub of one user
    with demo(tmp_path, "a", state) as a, demo(tmp_path, "b", state) as b:
        assert a.owner_url != b.owner_url
        for hub in (a, b):
            assert (state / f"owner-url-{hub.port}").read_text().strip() == hub.owner_url
            printed = run(tmp_path, "url", "--port", str(hub.port))
            assert printed.returncode == 0, printed.stderr
            assert printed.stdout == hub.owner_url + "\n"
        both = run(tmp_path, "url")
        assert both.returncode == 2
        ports = sorted((a.port, b.port))
        assert both.stderr == f"acp-hub: hubs run on ports {ports[0]}, {ports[1]}: pass --port\n"
        assert b.stop() == 0
        only = run(tmp_path, "url")
        assert only.returncode == 0, only.stderr
        assert only.stdout == a.owner_url + "\n"
        assert a.stop() == 0
    none = run(tmp_path, "url")
    assert none.returncode == 1
    (line,) = none.stderr.splitlines()
    assert line.startswith(f"acp-hub: no running hub left an owner URL in {state} "), line
    gone = run(tmp_path, "url", "--port", str(a.port))
    assert gone.returncode == 1
    assert f"no hub on port {a.port}" in gone.stderr
