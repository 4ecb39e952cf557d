"""Waiting for a client's answer to the agent while the clients who may give it come and go:
once nobody is left who may answer, the question waits ``answer_grace`` seconds for one to
come back (docs/arbitration.md). Permission requests and elicitations both wait this way."""

from __future__ import annotations

import time
from typing import Protocol

import anyio

__all__ = ["Awaited", "answered_in_grace"]


class Awaited(Protocol):
    """A question the agent waits on; whoever changes ``done`` or ``orphaned`` sets ``wake``."""

    done: anyio.Event
    wake: anyio.Event
    orphaned: float | None
    """When the last client who may answer it left (``time.monotonic()``; ``None``: one is
    there)."""


async def answered_in_grace(awaited: Awaited, grace: float) -> bool:
    """Wait until ``awaited.done`` is set (``True``) or until it has been orphaned for
    ``grace`` seconds with nobody back (``False``)."""
    while not awaited.done.is_set():
        wake = awaited.wake
        if wake.is_set():
            awaited.wake = wake = anyio.Event()
        orphaned = awaited.orphaned
        if orphaned is None:
            await wake.wait()
            continue
        with anyio.move_on_after(orphaned + grace - time.monotonic()):
            await wake.wait()
        if (
            not awaited.done.is_set()
            and awaited.orphaned is not None
            and time.monotonic() >= awaited.orphaned + grace
        ):
            return False
    return True
