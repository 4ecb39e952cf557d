"""Fixtures of the supervisor tests (``tests/agents/test_supervisor*.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from tests.agents.harness import Supervised, group_gone


@pytest.fixture
def agent_home(tmp_path: Path) -> Path:
    """A fresh ``HOME`` for the agents of one test (agents keep their sessions there)."""
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
async def supervised() -> AsyncIterator[Supervised]:
    """Make supervisors; afterwards assert that no process of any agent group they started
    is left running (grandchildren included)."""
    made = Supervised()
    yield made
    for supervisor in made.supervisors:
        await supervisor.aclose()
    # Poll the kernel (no event says that an orphaned process ended), for at most 5 s.
    leftovers = [pgid for pgid in made.pgids() if not group_gone(pgid)]
    for _ in range(100):
        if not leftovers:
            break
        await anyio.sleep(0.05)
        leftovers = [pgid for pgid in leftovers if not group_gone(pgid)]
    assert not leftovers, f"process groups still alive after the test: {leftovers}"
