"""A v1 client's prompt answer carries a stop reason of the closed v1 enum."""

from __future__ import annotations

import pytest

from tests.server.harness import acp_client, running_hub, scripted_agent

pytestmark = pytest.mark.anyio


async def test_a_v2_only_stop_reason_reaches_a_v1_sender_as_end_turn() -> None:
    async with (
        running_hub([scripted_agent(protocol=2)]) as hub,
        acp_client(hub.url, 2) as owner,
        acp_client(hub.url, 1) as sender,
    ):
        sid = await owner.new_session()
        await sender.call("session/resume", {"sessionId": sid, "cwd": "/tmp"})
        assert await sender.prompt(sid, "stop _paused") == {"stopReason": "end_turn"}
        # The v2 client saw the agent's own stop reason.
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        idle = [
            p["update"]
            for p in owner.session_updates(sid)
            if p["update"].get("sessionUpdate") == "state_update"
            and p["update"].get("state") == "idle"
        ]
        assert idle[-1]["stopReason"] == "_paused"
        assert await sender.prompt(sid, "stop max_tokens") == {"stopReason": "max_tokens"}
