"""A session closed by its owner is gone for every client that was attached to it."""

from __future__ import annotations

import pytest

from hub.protocol.errors import RESOURCE_NOT_FOUND
from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("method", ["session/close", "session/delete"])
async def test_a_closed_session_is_not_found_for_the_other_attached_clients(method: str) -> None:
    async with (
        running_hub([scripted_agent()]) as hub,
        acp_client(hub.url, 2) as owner,
        acp_client(hub.url, 2) as other,
    ):
        sid = await owner.new_session()
        await other.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        await owner.call(method, {"sessionId": sid})
        await other.wait_for(
            lambda: any(n["method"] == "_hub/session_closed" for n in other.notifications)
        )
        with pytest.raises(RpcFailure) as failure:
            await other.prompt(sid, "say hello")
        assert failure.value.code == RESOURCE_NOT_FOUND
        with pytest.raises(RpcFailure) as failure:
            await other.call("session/detach", {"sessionId": sid})
        assert failure.value.code == RESOURCE_NOT_FOUND
