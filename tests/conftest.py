"""Test configuration shared by every test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.credentials import hub_env
from tests.redis_server import RedisServer
from tests.support import hypothesis_profile, require_binary

settings.register_profile("ci", max_examples=200, deadline=None, database=None, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)


settings.load_profile(hypothesis_profile(os.environ))


@pytest.fixture
def anyio_backend() -> str:
    """The event loop of every ``pytest.mark.anyio`` test: asyncio (the hub's own)."""
    return "asyncio"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real ``redis-server`` of this test's own (``tests/redis_server.py``), stopped after."""
    server = RedisServer(require_binary("redis-server"), tmp_path / "redis")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="session", autouse=True)
def hub_key_for_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every hub a test builds, in this process or in a subprocess that inherits the
    environment, signs with the test key and keeps its state in a temporary directory, never
    in the user's own state directory."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in hub_env(tmp_path_factory.mktemp("hub-state")).items():
            patch.setenv(name, value)
        yield
