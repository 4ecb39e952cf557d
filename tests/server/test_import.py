"""``_hub/import``: a real agent's session, exported as JSONL, comes back as a read-only archive
that is listed, replays to the same folded state, is shared with a viewer link, and is never
promptable; only owners of the whole hub may import."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hub.agents.spec import AgentSpec
from hub.protocol.state import SessionState
from hub.store.export import read_jsonl
from tests.credentials import owner_token, token
from tests.peers.paths import ts_agent_js
from tests.server.harness import RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import resume
from tests.server.test_export import export
from tests.server.test_rules import run_turn
from tests.server.test_webhooks import permission_turn
from tests.support import require_binary

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
ACP_HUB = Path(sys.executable).parent / "acp-hub"
SESSION_LOST = -32043
FORBIDDEN = -32040


def conversation(state: SessionState) -> dict[str, Any]:
    """Everything of a folded state but the hub's own records of who is around."""
    return {k: v for k, v in state.snapshot().items() if k != "hub"}


async def test_an_export_imports_as_a_read_only_archive_that_replays_the_same() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await permission_turn(owner, sid)
        await owner.prompt(sid, "tool terminal")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 2)
        text, _ = await export(owner, sid, "jsonl")
        _, events = read_jsonl(text.splitlines())
        exported = SessionState().apply_all(u for _, u in events)

        archive = (await owner.call("_hub/import", {"data": text}))["sessionId"]
        assert archive != sid
        listed = await owner.call("session/list", {})
        assert archive in {s["sessionId"] for s in listed["sessions"]}
        # Shared with a viewer link, it replays to the state the export folds to.
        link = await owner.call(
            "_hub/share/create", {"sessionId": archive, "role": "viewer", "expiresIn": 600}
        )
        async with acp_client(hub.url_with(link["token"])) as viewer:
            await viewer.call(
                "session/resume",
                {"sessionId": archive, "cwd": "/tmp", "replayFrom": {"type": "start"}},
            )
            assert conversation(viewer.fold(archive)) == conversation(exported)
        # Never promptable, even by its owner.
        await resume(owner, archive)
        with pytest.raises(RpcFailure) as info:
            await owner.prompt(archive, "say again")
        assert info.value.code == SESSION_LOST  # read, not prompted
        assert info.value.error["data"]["agent"] == "archive:scripted"
        # Its export is the archive's own (a new id) with the same events first.
        again, _ = await export(owner, archive, "jsonl")
        head, events_again = read_jsonl(again.splitlines())
        assert head["session"]["id"] == archive
        assert head["session"]["agent"] == "archive:scripted"
        assert [u for _, u in events_again[: len(events)]] == [u for _, u in events]


async def test_a_third_party_agents_session_round_trips_through_export_and_import(
    tmp_path: Path,
) -> None:
    # The TypeScript SDK's example agent (v1): its tool calls, its permission request answered
    # by a person, its messages; exported, imported, and replayed, the archive folds the same.
    node = require_binary("node")
    agent = AgentSpec(name="ts", command=node, args=(str(ts_agent_js()),))
    async with running_hub([agent]) as hub, acp_client(hub.url, name="alice") as alice:
        sid = await alice.new_session(cwd=str(tmp_path))
        assert await run_turn(alice, sid, "change the configuration", ["allow"]) == [
            "Modifying critical configuration file"
        ]
        assert hub.app.registry is not None
        live = hub.app.registry.get(sid).state
        assert live.snapshot()["permissions"]  # the decision is part of what round-trips
        text, _ = await export(alice, sid, "jsonl")
        head, events = read_jsonl(text.splitlines())
        assert head["session"]["agent"] == "ts"
        assert conversation(SessionState().apply_all(u for _, u in events)) == conversation(live)

        archive = (await alice.call("_hub/import", {"data": text}))["sessionId"]
        async with acp_client(hub.url) as late:
            await late.call(
                "session/resume",
                {"sessionId": archive, "cwd": "/tmp", "replayFrom": {"type": "start"}},
            )
            replayed = late.fold(archive)
        assert conversation(replayed) == conversation(live)
        assert replayed.tool_call_ids
        assert replayed.message_ids


async def test_only_owners_of_the_whole_hub_import_and_bad_exports_are_refused() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, "say hi")
        text, _ = await export(owner, sid, "jsonl")
        scoped = token("owner", sub="scoped", sessions=[sid])
        async with acp_client(hub.url_with(scoped)) as other:
            with pytest.raises(RpcFailure) as info:
                await other.call("_hub/import", {"data": text})
            assert info.value.code == FORBIDDEN
        viewer = token("viewer", sub="vic")
        async with acp_client(hub.url_with(viewer)) as other:
            with pytest.raises(RpcFailure) as info:
                await other.call("_hub/import", {"data": text})
            assert info.value.code == FORBIDDEN
        for bad in ("", "not json\n", '{"x": 1}\n', text + '{"seq": 99}\n'):
            with pytest.raises(RpcFailure) as info:
                await owner.call("_hub/import", {"data": bad})
            assert info.value.code == -32602


async def test_acp_hub_import_sends_a_file_to_a_running_hub(tmp_path: Path) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        await owner.prompt(sid, "say archived words")
        text, _ = await export(owner, sid, "jsonl")
        (tmp_path / "s.jsonl").write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
        env["PYTHONPATH"] = str(ROOT)
        command = [str(ACP_HUB), "import", str(tmp_path / "s.jsonl"), "--url", hub.bare_url]
        done = await anyio.run_process([*command, "--token", owner_token()], env=env, check=False)
        assert done.returncode == 0, done.stderr.decode()
        archive = done.stdout.decode().strip()
        listed = await owner.call("session/list", {})
        assert archive in {s["sessionId"] for s in listed["sessions"]}
        # Refused by the hub (a viewer), or not reaching one: one line, exit 1.
        viewer = token("viewer", sub="vic")
        refused = await anyio.run_process([*command, "--token", viewer], env=env, check=False)
        assert refused.returncode == 1
        assert b"Traceback" not in refused.stderr
        assert refused.stderr.decode().count("\n") == 1
