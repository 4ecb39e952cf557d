"""The SQLite store's worker thread: lower in priority than the event loop, one call at a time,
and a started call is waited for even when its caller is cancelled."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio
import pytest

from hub.store.sqlite import WORKER_NICE, SqliteStore


def _nice(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
async def test_the_worker_runs_nicer_than_the_event_loop(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "hub.db"))
    async with store.running():
        loop_nice = _nice(threading.get_native_id())
        worker_tid, worker_nice = await store._in_worker(
            lambda: (threading.get_native_id(), _nice(threading.get_native_id()))
        )
        assert worker_tid != threading.get_native_id()
        assert worker_nice == min(19, loop_nice + WORKER_NICE)
        # The event loop's thread, and so the fan-out, kept its priority.
        assert _nice(threading.get_native_id()) == loop_nice
        # Every call runs on that one thread, the store's writes included.
        tids = {await store._in_worker(threading.get_native_id) for _ in range(5)}
        assert tids == {worker_tid}


async def test_a_cancelled_caller_waits_for_its_started_call(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "hub.db"))
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def slow() -> str:
        started.set()
        release.wait(30)
        finished.append("done")
        return "done"

    async with store.running():
        returned = anyio.Event()
        scopes: list[anyio.CancelScope] = []
        caught: list[bool] = []

        async def call() -> None:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await store._in_worker(slow)
            caught.append(scope.cancelled_caught)
            returned.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await anyio.to_thread.run_sync(started.wait, 30)
            scopes[0].cancel()
            # Cancelled, but its call still runs: the caller has not returned (without the
            # shield it returns at once).
            await anyio.sleep(0.1)
            assert not returned.is_set()
            release.set()
            with anyio.fail_after(30):
                await returned.wait()
        assert caught == [True]
        assert finished == ["done"]
