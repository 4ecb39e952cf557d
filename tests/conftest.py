"""Test configuration shared by every test module."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.credentials import hub_env
from tests.redis_server import RedisServer
from tests.support import ROOT, hypothesis_profile, require_binary

settings.register_profile("ci", max_examples=200, deadline=None, database=None, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)


settings.load_profile(hypothesis_profile(os.environ))

SERIAL_GROUPS = {
    # One wheel built and installed by a module fixture: its tests on one worker, built once.
    "tests/test_package.py": "package",
}
"""Files whose tests share an expensive module or session fixture: under ``pytest-xdist``
(``make unit`` runs ``-n 4 --dist loadgroup``) all the tests of a group run on one worker, so
that the fixture is set up once; every other test goes to whichever worker is free."""

GROUPED_BY_FILE = ("tests/web/",)
"""Directories each of whose files runs on one worker: a browser test module drives one
Chromium through Playwright's sync API (``tests/web/conftest.py``), which holds an event loop
of its own in the worker's thread for as long as it runs, so that it must end (at the end of
its module) before the worker runs an asyncio test."""


def xdist_group_of(where: str) -> str | None:
    """The ``xdist_group`` of the test file at ``where`` (relative to the repository, with
    slashes), or None for a file whose tests go to whichever worker is free."""
    for prefix, group in SERIAL_GROUPS.items():
        if where.startswith(prefix):
            return group
    return where if where.startswith(GROUPED_BY_FILE) else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests of ``SERIAL_GROUPS`` and ``GROUPED_BY_FILE`` (first: ``pytest-xdist``
    reads the groups in this hook), and run the ``slow`` tests first (the order is the same in
    every worker): a long test started last would leave the other workers idle."""
    for item in items:
        group = xdist_group_of(item.path.relative_to(ROOT).as_posix())
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


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
