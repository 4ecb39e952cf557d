"""The ``store`` setting: parsing, precedence (command line, environment, config file), and a
store that cannot be opened refused at start with one line and exit status 2."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from hub.cli import _parser
from hub.cli.serve import build
from hub.settings import Settings
from hub.store import parse_store_url
from tests.redis_server import RedisServer, free_port
from tests.support import require_binary

ACP_HUB = Path(sys.executable).parent / "acp-hub"


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("memory", "memory", ""),
        ("sqlite:///data/hub.db", "sqlite", "data/hub.db"),
        ("sqlite:////var/lib/acp-hub/hub.db", "sqlite", "/var/lib/acp-hub/hub.db"),
        ("redis://127.0.0.1:6379/0", "redis", "redis://127.0.0.1:6379/0"),
        ("rediss://:pw@redis.example:6380/2", "redis", "rediss://:pw@redis.example:6380/2"),
    ],
)
def test_store_urls_parse(text: str, kind: str, target: str) -> None:
    url = parse_store_url(text)
    assert (url.kind, url.target) == (kind, target)
    assert "pw" not in url.redacted()


# Cases of their own: table rows alike in shape only.
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("postgres://x", "store must be"),
        ("sqlite://relative.db", "three slashes"),
        ("sqlite:///hub.db?journal=off", "unknown sqlite option"),
        ("redis:///0", "redis://HOST:PORT/DB"),
    ],
)
def test_bad_store_settings_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings().merged({"store": text})


def test_command_line_beats_environment_beats_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "hub.toml"
    config.write_text('[hub]\nstore = "sqlite:///from-file.db"\n[agents.a]\ncommand = "x"\n')
    monkeypatch.delenv("ACP_HUB_STORE", raising=False)
    args = _parser().parse_args(["serve", "--config", str(config)])
    assert build(args)[0].store == "sqlite:///from-file.db"
    monkeypatch.setenv("ACP_HUB_STORE", "sqlite:///from-env.db")
    assert build(args)[0].store == "sqlite:///from-env.db"
    args = _parser().parse_args(["serve", "--config", str(config), "--store", "memory"])
    assert build(args)[0].store == "memory"


async def run_cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACP_HUB_CONFIG", "ACP_HUB_STORE")}
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [str(ACP_HUB), *args], env={**env, "HOME": str(tmp_path)}, cwd=tmp_path, check=False
        )
    return done.returncode, done.stderr.decode()


async def test_an_unreachable_redis_is_one_line_and_exit_2(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    code, stderr = await run_cli(tmp_path, "serve", "--agent", "a=true", "--store", url)
    assert code == 2
    (line,) = stderr.strip().splitlines()
    assert line.startswith("acp-hub: cannot reach the redis store:"), line


async def test_a_redis_cluster_node_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A Redis Cluster node is refused at start, not by every write: the write-behind runs
    one script over many sessions' keys, which a cluster refuses."""
    config = tmp_path / "redis" / "nodes.conf"
    server = RedisServer(
        require_binary("redis-server"),
        tmp_path / "redis",
        # The cluster bus on a port of its own: by default it is the port + 10,000, which a
        # free port above 55,535 cannot have.
        extra=(
            *("--cluster-enabled", "yes"),
            *("--cluster-config-file", str(config)),
            *("--cluster-port", str(free_port())),
        ),
    )
    server.start()
    try:
        code, stderr = await run_cli(tmp_path, "serve", "--agent", "a=true", "--store", server.url)
    finally:
        server.kill()
    assert code == 2
    (line,) = stderr.strip().splitlines()
    assert line.startswith("acp-hub: the redis store is a Redis Cluster node"), line


async def test_an_unwritable_sqlite_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = f"sqlite:///{blocker}/hub.db"
    code, stderr = await run_cli(tmp_path, "demo", "--port", "0", "--store", store)
    assert code == 2
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"acp-hub: cannot open the sqlite store {blocker}/hub.db"), line


async def test_a_bad_store_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    code, stderr = await run_cli(tmp_path, "demo", "--store", "mongodb://x")
    assert code == 2
    assert stderr.strip().splitlines() == [
        "acp-hub: store must be 'memory', 'sqlite:///PATH' or 'redis://HOST:PORT/DB'"
    ]
