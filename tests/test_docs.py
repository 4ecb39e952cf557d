"""The commands, configs and exchanges of README.md and docs/*.md run as written.

Every fenced block of the documentation in these languages is taken from the files (none is
copied here):

- ``sh``: each command line runs in a shell, as a reader types it (``.venv/bin/`` is this
  environment's, ``~`` a temporary home, a server gets ``--port 0`` and is stopped with
  SIGINT once its banner is out), or is listed in ``SKIPPED`` with the reason it cannot run
  here. A command in neither list fails the test: a new command in the docs needs one.
- ``toml``: each block is loaded as ``acp-hub`` loads a config file (agents and ``[hub]``
  settings checked).
- ``json``/``jsonc``: each parses (with its ``…`` placeholders); the README's tour (its
  ``jsonc`` exchanges, ``→`` sent, ``←`` received) runs against a real hub with the token the
  README's own ``acp-hub token`` command mints, and each ``←`` line matches what the hub
  answers (``…`` matches anything; objects may carry more members).
- ``python``: docs/security.md's backend runs and the hub, configured with the issuer block
  beside it, accepts its token; docs/agents.md's API sketch compiles and names only what an
  agent has. ``nginx``: the real nginx accepts the block (``nginx -t``). ``yaml``: parses.
  Not run: the ``html`` snippets (the widget and the iframe run in tests/web/test_embedding.py)
  and the ``dockerfile`` one (needs a Docker daemon).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import yaml
from websockets.asyncio.client import connect

from hub.access.gate import Gate
from hub.agents.agent import Agent
from hub.agents.spec import load_config
from hub.settings import Settings
from tests.credentials import hub_env
from tests.hubproc import stop
from tests.server.harness import SCRIPTED, AcpClient
from tests.support import ROOT, missing

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", re.M | re.S)
VENV_BIN = Path(sys.executable).parent
TIMEOUT = 60.0
ELLIPSIS = "…"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(*langs: str) -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in FENCE.finditer(text):
            if match.group(2) in langs:
                line = text.count("\n", 0, match.start()) + 1
                found.append(Block(path, line, match.group(2), match.group(3)))
    return found


def commands() -> list[tuple[str, str]]:
    """Every command line of the ``sh`` blocks (comments dropped), with where it is."""
    found = []
    for block in blocks("sh"):
        for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
            command = re.sub(r"\s+#\s.*$", "", line).strip()
            if command and not command.startswith("#"):
                found.append((f"{block.path.relative_to(ROOT)}:{number}", command))
    return found


SKIPPED = {
    "make test": "the whole suite (lint, types, every test): CI's own command (.ci/run); "
    "run from inside the suite it would run itself",
    "pip install .": "installs the package into the running environment; deploy/Dockerfile "
    "does it (tests/test_deploy.py checks the file)",
    "acp-hub serve --config /etc/acp-hub.toml": "the reader's own config file at /etc; the "
    "shipped ones run in tests/test_deploy_run.py",
    "acp-hub serve --config /etc/acp-hub.toml --store sqlite:////var/lib/acp-hub/hub.db": (
        "the reader's own config file at /etc and a store under /var/lib; the SQLite store "
        "runs in tests/store"
    ),
    "docker build -f deploy/Dockerfile -t acp-hub .": "needs a Docker daemon",
    'docker run --rm -p 127.0.0.1:8765:8765 -v "$PWD/acp-hub.toml:/etc/acp-hub.toml:ro" '
    "acp-hub": "needs a Docker daemon",
    "docker compose up": "needs a Docker daemon; tests/test_deploy_run.py runs its topology "
    "(two hubs, one Redis, the shipped nginx.conf) as processes",
}


@dataclass
class Shell:
    """Where a documented command runs: a temporary home and working directory, this
    checkout's package, the test key (so that tokens minted by one command are accepted by the
    hubs of others), no configuration of the machine's."""

    home: Path

    @property
    def env(self) -> dict[str, str]:
        # A reader's shell: none of the hub's variables, and not inside a make of ours (a
        # nested make would print "Entering directory" before what the reader sees).
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("ACP_HUB_") and k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")
        }
        env.update(
            HOME=str(self.home),
            PYTHONPATH=str(ROOT),
            PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            ACP_HUB_DEMO_FAST="1",
            **hub_env(self.home / "state"),
        )
        return env

    def line(self, command: str) -> str:
        return command.replace(".venv/bin/", f"{VENV_BIN}/")

    def run(self, command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", self.line(command)],
            env=self.env,
            cwd=cwd or self.home,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    def serve(self, command: str, cwd: Path | None = None) -> list[str]:
        """Run a server command until its banner is out, then SIGINT to its process group
        (Ctrl+C); the banner's lines. ``make`` itself ends by the signal, the hub with 0."""
        # A process of its own whose output the test reads as it comes (not tests/hubproc.py).
        process = subprocess.Popen(
            ["bash", "-c", f"exec {self.line(command)}"],
            env=self.env,
            cwd=cwd or self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert process.stdout is not None
            banner = []
            for line in process.stdout:  # ends at EOF if it died
                banner.append(line.rstrip("\n"))
                if line.startswith("acp-hub:   stop with"):
                    break
            os.killpg(process.pid, signal.SIGINT)
            code = process.wait(timeout=TIMEOUT)
            assert process.stderr is not None
            errors = process.stderr.read()
            assert banner, errors
            assert banner[-1].startswith("acp-hub:   stop with"), (banner, errors)
            assert code == (-signal.SIGINT if command.startswith("make ") else 0), errors
            assert "Traceback" not in errors, errors
            return banner
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()


def _config_example() -> Block:
    """docs/configuration.md's config file (the one ``serve --config acp-hub.toml`` reads)."""
    (block,) = [
        b
        for b in blocks("toml")
        if b.path.name == "configuration.md" and b.text.startswith("default_agent")
    ]
    return block


def _run_command(command: str, shell: Shell) -> None:
    """Run one documented command (see the module docstring); fails if it does not work."""
    if command == "make demo":
        # The same target with this environment's virtualenv (already set up: not remade)
        # and a free port.
        venv = VENV_BIN.parent
        make = shutil.which("make")
        if make is None:
            pytest.skip("make is not installed")
        line = f"make -o {venv}/.installed -o {venv}/bin/python demo VENV={venv} PORT=0"
        banner = shell.serve(line, cwd=ROOT)
        assert banner[0].startswith("acp-hub: listening on http://127.0.0.1:")
        assert any("the demo agent is ready to prompt" in b for b in banner), banner
        return
    bare = command.removeprefix(".venv/bin/")  # acp-hub is on PATH too
    if bare.startswith("acp-hub serve"):
        (shell.home / "projects").mkdir(exist_ok=True)
        cwd = shell.home
        if "--config acp-hub.toml" in command:
            # The reader's acp-hub.toml: docs/configuration.md's, its /srv paths under home.
            srv = shell.home / "srv"
            text = _config_example().text.replace("/srv/", f"{srv}/")
            (srv / "work").mkdir(parents=True, exist_ok=True)
            (shell.home / "acp-hub.toml").write_text(text)
        banner = shell.serve(f"{command} --port 0", cwd=cwd)
        assert banner[0].startswith("acp-hub: listening on http://127.0.0.1:")
        assert banner[1].startswith("acp-hub: owner URL: ")
        return
    if bare.startswith("acp-hub token"):
        done = shell.run(command)
        assert done.returncode == 0, done.stderr
        (token,) = done.stdout.split()
        assert token.count(".") == 2  # a JWT
        return
    raise AssertionError(f"no way to run {command!r}: run it in _run_command or skip it")


@pytest.mark.parametrize(("where", "command"), commands(), ids=[w for w, _ in commands()])
def test_every_documented_command_runs(where: str, command: str, tmp_path: Path) -> None:
    if command in SKIPPED:
        pytest.skip(f"{where}: {SKIPPED[command]}")
    _run_command(command, Shell(tmp_path))


def test_the_skip_list_names_only_documented_commands() -> None:
    documented = {command for _, command in commands()}
    assert set(SKIPPED) - documented == set()


@pytest.mark.parametrize("block", blocks("toml"), ids=[b.where for b in blocks("toml")])
def test_every_documented_config_is_one_the_hub_accepts(block: Block, tmp_path: Path) -> None:
    parsed = tomllib.loads(block.text)
    path = tmp_path / "acp-hub.toml"
    if "agents" not in parsed:
        # A fragment of [hub] settings: with an agent, as a whole file has one.
        path.write_text(f"{block.text}\n[agents.a]\ncommand = 'true'\n")
    else:
        path.write_text(block.text)
    config = load_config(path)
    settings = Settings().merged(dict(config.hub))
    assert settings is not None


def _pattern(text: str) -> Any:
    """A documented JSON line as a pattern: ``…`` (and ``...`` between members) stand for
    anything."""
    text = re.sub(r",\s*\.\.\.\s*,", ",", text)
    text = re.sub(r"\d+" + ELLIPSIS, f'"{ELLIPSIS}"', text)
    text = text.replace(f"[{ELLIPSIS}]", f'"{ELLIPSIS}"').replace(
        f"{{{ELLIPSIS}}}", f'"{ELLIPSIS}"'
    )
    return orjson.loads(text)


def _matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, str) and ELLIPSIS in expected:
        return True
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and _matches(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _exchange_lines(block: Block) -> Iterator[tuple[str, str]]:
    """The ``→``/``←`` lines of an exchange block (continuation lines joined)."""
    current: list[str] = []
    for line in block.text.splitlines():
        if line.startswith(("→ ", "← ")):
            if current:
                yield current[0][0], " ".join(current)[2:]
            current = [line]
        elif current:
            current.append(line.strip())
    if current:
        yield current[0][0], " ".join(current)[2:]


@pytest.mark.parametrize(
    "block", blocks("json", "jsonc"), ids=[b.where for b in blocks("json", "jsonc")]
)
def test_every_documented_json_parses(block: Block) -> None:
    lines = list(_exchange_lines(block))
    if not lines:
        text = block.text
        try:
            orjson.loads(text)
        except orjson.JSONDecodeError:
            # Several objects, one per line (a stream of notifications), or one object
            # wrapped over lines.
            for obj in re.split(r"\n(?=\{)", text.strip()):
                orjson.loads(obj)
        return
    for _, text in lines:
        if text.strip() in (ELLIPSIS, "") or text.startswith(f"{ELLIPSIS} "):
            continue  # "← … live updates": prose
        _pattern(text)


# -- the README's tour ---------------------------------------------------------------------------


@asynccontextmanager
async def raw_client(url: str, token: str) -> AsyncIterator[AcpClient]:
    """A recording client that sends nothing by itself (the README's messages do)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with connect(url, additional_headers=headers, max_size=None) as ws:
        client = AcpClient(ws, 2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.reader)
            try:
                yield client
            finally:
                await ws.close()
                tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_readme_tour_runs_with_the_readme_token(tmp_path: Path) -> None:
    shell = Shell(tmp_path)
    readme = [c for w, c in commands() if w.startswith("README.md") and " token " in c]
    minted = shell.run(readme[0])  # the token the README says to mint for this tour
    assert minted.returncode == 0, minted.stderr
    token = minted.stdout.strip()
    project = tmp_path / "home" / "me" / "project"  # the README's cwd, under the temp home
    project.mkdir(parents=True)
    scripted = f"{sys.executable} {SCRIPTED} --protocol 2"
    process = await anyio.open_process(
        [
            *(str(VENV_BIN / "acp-hub"), "serve", "--port", "0", "--workspace", str(project)),
            *("--agent", f"claude={scripted}"),  # the README's agent name
        ],
        env=shell.env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        seen = b""
        with anyio.fail_after(TIMEOUT):
            while b"listening on" not in seen or not seen.endswith(b"\n"):
                seen += await process.stdout.receive()
        match = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", seen)
        assert match is not None, seen
        url = f"ws://127.0.0.1:{int(match.group(1))}/acp"
        await _play_readme(url, token, project)
    finally:
        await stop(process, signal.SIGINT, TIMEOUT)


async def _play_readme(url: str, token: str, project: Path) -> None:
    """Each README exchange block on a connection of its own (the first client, a late
    joiner, a reconnecting client), the documented values filled in as the hub gives them."""
    exchanges = [b for b in blocks("jsonc") if b.path.name == "README.md"]
    assert len(exchanges) == 3
    found: dict[str, Any] = {}
    for block in exchanges:
        async with raw_client(url, token) as client:
            if "initialize" not in block.text:
                await _initialize(client)  # a new connection starts with it
            last_id: Any = None
            for direction, text in _exchange_lines(block):
                if direction == "→":
                    message = orjson.loads(_filled(text, found, project))
                    last_id = message.get("id")
                    await client.send(message)
                    continue
                expected = _pattern(text)
                if "id" in expected:
                    response = await client.response(expected["id"])
                    assert _matches(expected, response), (text, response)
                    _note(response, found)
                else:
                    await _notified(client, expected)
            if last_id is not None and not any(
                d == "←" and f'"id":{last_id},' in t for d, t in _exchange_lines(block)
            ):
                response = await client.response(last_id)
                assert "result" in response, response  # the documented request succeeds
                _note(response, found)


async def _notified(client: AcpClient, expected: Any) -> None:
    """Wait until ``client`` received a notification matching ``expected``."""
    await client.wait_for(lambda: any(_matches(expected, n) for n in client.notifications))


async def _initialize(client: AcpClient) -> None:
    init = {"protocolVersion": 2, "info": {"name": "me", "version": "1"}}
    await client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    assert "result" in await client.response(1)


def _note(response: dict[str, Any], found: dict[str, Any]) -> None:
    result = response.get("result") or {}
    if "sessionId" in result:
        found["session"] = result["sessionId"]
    meta = result.get("_meta", {}).get("acp-hub", {})
    if "epoch" in meta:
        found["epoch"], found["seq"] = meta["epoch"], meta["seq"]


def _filled(text: str, found: dict[str, Any], project: Path) -> str:
    """A documented message with the hub's own values: the session it created, its epoch
    and a seq it has, the README's project directory under the test's home."""
    text = text.replace('"/home/me/project"', orjson.dumps(str(project)).decode())
    if "session" in found:
        text = re.sub(r'"s-[0-9a-f]*…"', orjson.dumps(found["session"]).decode(), text)
    if "epoch" in found:
        text = re.sub(r"\d+…", str(found["epoch"]), text)
        text = re.sub(r'"seq":\d+', f'"seq":{found["seq"]}', text)
    return text


# -- the other snippets ----------------------------------------------------------------------------


def _one(lang: str, doc: str, starts: str = "") -> Block:
    (block,) = [b for b in blocks(lang) if b.path.name == doc and b.text.startswith(starts)]
    return block


@pytest.mark.anyio
async def test_the_backend_minting_example_mints_tokens_the_documented_issuer_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/security.md's Python backend, run, and its token checked by a hub configured with
    the issuer block beside it."""
    secret = "a secret of the application's, 32 bytes or more"
    monkeypatch.setenv("APP_ACP_SECRET", secret)  # where the backend and the hub read it
    namespace: dict[str, Any] = {}
    exec(compile(_one("python", "security.md").text, "security.md", "exec"), namespace)
    token = namespace["embed_token"]("u-1", "Erin", "s-5f2a")
    config = tmp_path / "acp-hub.toml"
    config.write_text(f"{_one('toml', 'security.md').text}\n[agents.a]\ncommand = 'true'\n")
    settings = Settings().merged(
        {**load_config(config).hub, "state_dir": str(tmp_path / "state"), "audit_log": "off"}
    )
    gate = Gate.from_settings(settings)
    principal = await gate.verify(token)
    # The principal, named by the issuer (no issuer can claim another's users).
    assert (principal.sub, principal.name, principal.role) == ("app:u-1", "Erin", "viewer")
    assert principal.sessions == frozenset({"s-5f2a"})


def test_the_agent_api_example_names_what_the_api_has() -> None:
    """docs/agents.md's sketch of the supervisor's API compiles (inside a coroutine, as it is
    meant), and every method and attribute it calls on an agent exists."""
    text = _one("python", "agents.md").text
    compile("async def example():\n" + textwrap.indent(text, "    "), "agents.md", "exec")
    used = set(re.findall(r"\bagent\.(\w+)", text))
    assert used, text
    assert used - set(dir(Agent)) == set()
    assert "load_config" in text
    assert "Supervisor(" in text


def test_the_nginx_example_is_a_config_nginx_accepts(tmp_path: Path) -> None:
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        missing("nginx is not installed (Debian: apt-get install nginx-light)")
        return
    block = _one("nginx", "deployment.md")
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{ access_log off; server {{ listen 127.0.0.1:1;\n{block.text}\n}} }}\n"
    )
    done = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_prometheus_example_is_yaml_naming_the_metrics_endpoint() -> None:
    scrape = yaml.safe_load(_one("yaml", "deployment.md").text)
    (job,) = scrape["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"


def test_the_docs_name_the_current_claude_adapter() -> None:
    """``@zed-industries/claude-code-acp`` was renamed: the docs name the current package."""
    for path in [*DOCS, ROOT / "deploy" / "Dockerfile"]:
        text = path.read_text()
        assert "claude-code-acp" not in text, path
    readme = (ROOT / "README.md").read_text()
    assert "@agentclientprotocol/claude-agent-acp" in readme
