"""The package as a user installs it: a wheel built from the sources, installed into a fresh
virtualenv, serving the web UI from its package data.

The wheel is built from a copy of the sources (the build leaves nothing in the checkout), the
virtualenv has no pip of its own (the running pip installs into it) and its dependencies come
from pip's cache or index as for any user. The installed ``acp-hub demo`` runs from a directory
without the checkout on ``sys.path``, so a file the wheel lacks is a 404, not a lucky import.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hubproc import BANNER
from tests.support import ROOT

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "hub")
TOKEN = "package-test-metrics-token"
INSTALL_TIMEOUT = 300.0
STOP_TIMEOUT = 20.0


@dataclass
class Installed:
    venv: Path
    env: dict[str, str]
    build_output: str

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name


def _run(argv: list[str | Path], *, env: dict[str, str], cwd: Path) -> str:
    """Run ``argv`` to completion; its combined output, or a failure that shows it."""
    # An installed command run to completion: alike in shape to stdio_client.py's spawn only.
    done = subprocess.run(
        [str(arg) for arg in argv],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel of this checkout installed, with its dependencies, into a new virtualenv."""
    work = tmp_path_factory.mktemp("package")
    source = work / "source"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    # Nothing of the checkout or the test run may leak into the installed hub's imports.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "ACP_HUB_CONFIG", "VIRTUAL_ENV")
    }
    dist = work / "dist"
    pip = [sys.executable, "-m", "pip"]
    build_output = _run(
        [*pip, "wheel", "--no-deps", "--wheel-dir", dist, source], env=env, cwd=work
    )
    wheels = list(dist.glob("acp_hub-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env, cwd=work)
    _run([*pip, "--python", venv / "bin" / "python", "install", wheels[0]], env=env, cwd=work)
    run_env = {**env, "HOME": str(work), "ACP_HUB_DEMO_FAST": "1", "ACP_HUB_METRICS_TOKEN": TOKEN}
    return Installed(venv, run_env, build_output)


def test_the_build_prints_no_deprecation_warning(installed: Installed) -> None:
    # Metadata setuptools deprecates (a license table, license classifiers) prints dozens of
    # lines at every install, the first thing a new user reads.
    assert "deprecat" not in installed.build_output.lower(), installed.build_output
    assert "BuildBackendWarning" not in installed.build_output


def test_the_installed_hub_imports_from_the_virtualenv(
    installed: Installed, tmp_path: Path
) -> None:
    code = "import hub, hub.server.web as w; print(hub.__file__); print(w.web_assets())"
    out = _run([installed.bin("python"), "-c", code], env=installed.env, cwd=tmp_path)
    module, assets = out.splitlines()
    assert Path(module).is_relative_to(installed.venv), module
    assert Path(assets).is_relative_to(installed.venv), assets
    assert (Path(assets) / "static").is_dir()


def test_version_comes_from_the_package_metadata(installed: Installed, tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = _run([installed.bin("acp-hub"), "--version"], env=installed.env, cwd=tmp_path)
    assert out.strip() == f"acp-hub {project['version']}"


@pytest.fixture
def demo(installed: Installed, tmp_path: Path) -> Iterator[str]:
    """The installed ``acp-hub demo`` on a free port (the embedded default, no Redis): its URL.
    Stopped with SIGINT, which must end it with status 0."""
    stderr = tmp_path / "hub.stderr"
    with stderr.open("wb") as err:
        # A process of its own whose output the test reads as it comes (not tests/hubproc.py).
        process = subprocess.Popen(
            [installed.bin("acp-hub"), "demo", "--port", "0"],
            env=installed.env,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert process.stdout is not None
    try:
        url = None
        # The banner comes once the server listens; EOF (the hub died) ends the loop.
        for line in process.stdout:
            match = BANNER.match(line.strip())
            if match:
                url = match.group(1)
                break
        assert url is not None, f"no banner; stderr: {stderr.read_text()}"
        yield url
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=STOP_TIMEOUT) == 0, stderr.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def test_the_installed_demo_serves_the_web_ui(demo: str) -> None:
    web = ROOT / "hub" / "web"
    for path, file, media in (
        ("/", "index.html", "text/html"),
        ("/widget.js", "widget.js", "text/javascript"),
        ("/static/session.js", "static/session.js", "text/javascript"),
        ("/static/app.css", "static/app.css", "text/css"),
    ):
        status, content_type, body = _get(demo + path)
        assert status == 200, path
        assert content_type.startswith(media), (path, content_type)
        assert body == (web / file).read_bytes(), path
    status, _, body = _get(demo + "/healthz")
    assert status == 200
    assert b'"status":"ok"' in body
    assert _get(demo + "/metrics")[0] == 401
    status, _, body = _get(demo + "/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    assert b'acp_hub_agent_up{agent="demo"}' in body
