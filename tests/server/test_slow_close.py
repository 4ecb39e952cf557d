"""A slow consumer closed with 1013 always learns why, once it reads again (issue 25, A).

Twenty raw clients with a 4 KB receive buffer attach to one session and stop reading during a
long turn; the hub closes each for its outbox bound, behind the megabytes the kernel already
holds for it. Each reads again 8 s later, within the close timeout, at the pace of a slow link
(about 400 KB/s, so that its backlog takes longer to read than what is left of the close
timeout), and must find the 1013 close frame after a gapless prefix of the session's events,
never a reset: twenty real runs at once, on one hub.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest

from hub.server import transport
from hub.settings import Settings
from tests.server.harness import acp_client, running_hub, scripted_agent
from tests.server.test_hub import RawClient, contiguous, update_seqs

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RUNS = 20
STALL_S = 8.0
CHUNK = 4096
PACE_S = 0.01  # one CHUNK per PACE_S at most: about 400 KB/s


async def drain_slowly(client: RawClient) -> tuple[list[dict[str, Any]], int | None]:
    """Read everything until the server closes, at a slow link's pace; return the
    messages and the close code."""
    await client._pump(lambda: client.protocol.close_rcvd is not None, 120, size=CHUNK, pace=PACE_S)
    rcvd = client.protocol.close_rcvd
    client.sock.close()
    return client.messages, None if rcvd is None else rcvd.code


async def test_a_stalled_reader_always_finds_its_1013_when_it_reads_again() -> None:
    assert STALL_S < transport.CLOSE_TIMEOUT
    settings = Settings(outbox_bytes=256 * 1024)
    async with (
        running_hub([scripted_agent()], settings) as hub,
        acp_client(hub.url) as owner,
        contextlib.AsyncExitStack() as stack,
    ):
        sid = await owner.new_session()
        slow = [await stack.enter_async_context(RawClient(hub.url)) for _ in range(RUNS)]
        for client in slow:
            await client.attach(sid)
        results: list[tuple[int | None, list[int], bool]] = []

        async def drain(client: RawClient) -> None:
            frames, code = await drain_slowly(client)
            results.append((code, update_seqs(frames), client.reset))

        async with anyio.create_task_group() as tg:
            tg.start_soon(owner.prompt, sid, "stream 40000 1000")
            await anyio.sleep(STALL_S)  # the clients do not read: the stall itself
            async with anyio.create_task_group() as readers:
                for client in slow:
                    readers.start_soon(drain, client)
            tg.cancel_scope.cancel()
        assert [code for code, _, _ in results] == [1013] * RUNS
        assert not any(reset for _, _, reset in results)
        for _, seqs, _ in results:
            assert seqs
            assert contiguous(seqs)
