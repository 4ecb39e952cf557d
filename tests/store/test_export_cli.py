"""``acp-hub export`` against a store: a real agent's session, kept in SQLite by a hub that has
stopped, printed as JSON lines that fold to the state the hub's clients saw, and as the same
Markdown transcript the wire gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hub.protocol.state import SessionState
from hub.settings import Settings
from hub.store.export import read_jsonl
from tests.server.harness import acp_client, running_hub, scripted_agent
from tests.server.test_export import export
from tests.server.test_webhooks import permission_turn

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
ACP_HUB = Path(sys.executable).parent / "acp-hub"


def run_export(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [str(ACP_HUB), "export", *args], env=env, capture_output=True, timeout=60, check=False
    )


def without_export_time(markdown: str) -> str:
    return "\n".join(line for line in markdown.splitlines() if not line.startswith("- Exported:"))


async def test_the_cli_exports_a_stored_session_read_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'hub.db'}"
    async with (
        running_hub([scripted_agent()], Settings(store=store)) as hub,
        acp_client(hub.url) as client,
    ):
        sid = await client.new_session()
        await permission_turn(client, sid)
        await client.prompt(sid, "tool terminal")
        await client.wait_for(lambda: client.idle_count(sid) >= 2)
        live = client.fold(sid).snapshot()
        wire_md, _ = await export(client, sid, "md")
    jsonl = run_export("--store", store, sid, "--format", "jsonl")
    assert jsonl.returncode == 0, jsonl.stderr.decode()
    head, events = read_jsonl(jsonl.stdout.splitlines())
    assert head["session"]["id"] == sid
    assert head["session"]["agent"] == "scripted"
    assert head["complete"] is True
    exported = SessionState().apply_all(u for _, u in events).snapshot()
    # The client's own leaving may be in the log by the time the store is read (presence is
    # coalesced): compare everything but who is attached.
    for state in (exported, live):
        state["hub"].pop("_hub_presence", None)
    assert exported == live
    md = run_export("--store", store, sid, "--format", "md")
    assert md.returncode == 0, md.stderr.decode()
    assert without_export_time(md.stdout.decode()) == without_export_time(wire_md)
    # Unknown sessions and stores without sessions: one line, exit 1 or 2, no traceback.
    missing = run_export("--store", store, "s-nothing")
    assert missing.returncode == 1
    assert b"no session" in missing.stderr
    assert b"Traceback" not in missing.stderr
    memory = run_export("--store", "memory", sid)
    assert memory.returncode == 2
