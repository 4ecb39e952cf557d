"""Export over the wire (``_hub/export``): a real agent's session as JSONL, which folds back to
the session's state, and as Markdown, checked against a golden transcript of the demo agent;
pages of bounded size joined by their cursors; who may export."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from hub.agents.spec import AgentSpec
from hub.protocol.state import SessionState
from hub.settings import Settings
from hub.store.export import read_jsonl
from tests.credentials import token
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import resume

pytestmark = pytest.mark.anyio
GOLDEN = Path(__file__).resolve().parent / "golden" / "demo-session.md"
PROMPT = "How do I sort a list of names?"


def demo_agent() -> AgentSpec:
    return AgentSpec(
        name="demo",
        command=sys.executable,
        args=("-m", "hub.demo.agent", "--protocol", "2"),
        env={"ACP_HUB_DEMO_FAST": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )


async def export(client: AcpClient, sid: str, fmt: str) -> tuple[str, int]:
    """The whole export, joined from its pages, and how many pages it took."""
    data, pages, cursor = "", 0, None
    while True:
        params: dict[str, Any] = {"sessionId": sid, "format": fmt}
        if cursor is not None:
            params["cursor"] = cursor
        page = await client.call("_hub/export", params)
        assert page["format"] == fmt
        data += page["data"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            return data, pages


async def demo_turn(client: AcpClient, cwd: Path) -> str:
    sid = await client.new_session(cwd=str(cwd))
    prompt = await client.start(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": PROMPT}]}
    )
    await client.wait_for(lambda: bool(client.requests))
    request = client.requests[-1]
    await client.answer(
        request["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    )
    await client.result(prompt)
    await client.wait_for(lambda: client.idle_count(sid) >= 1)
    return sid


def normalized(text: str, sid: str, cwd: Path) -> str:
    text = text.replace(sid, "s-SESSION").replace(str(cwd), "/work/project")
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)", "TIME", text)
    return re.sub(r"acp-hub \d[\w.+-]*\)", "acp-hub VERSION)", text)


async def test_the_demo_session_exports_as_the_golden_markdown_and_as_jsonl_that_folds_back(
    tmp_path: Path,
) -> None:
    settings = Settings(replay_page_bytes=4096)
    async with (
        running_hub([demo_agent()], settings) as hub,
        acp_client(hub.url, name="alice") as alice,
    ):
        sid = await demo_turn(alice, tmp_path)
        text, pages = await export(alice, sid, "jsonl")
        assert pages > 1  # pages of about replay_page_bytes
        md, _ = await export(alice, sid, "md")
        assert hub.app.registry is not None
        live = hub.app.registry.get(sid).state.snapshot()
    head, events = read_jsonl(text.splitlines())
    assert head["session"]["id"] == sid
    assert head["session"]["agent"] == "demo"
    assert head["complete"] is True
    assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
    assert SessionState().apply_all(u for _, u in events).snapshot() == live
    # The prompt and the permission decision carry the hub's times, in order.
    times = re.findall(r" at (\d{4}-\d\d-\d\dT[\d:.]+Z)$", md, re.MULTILINE)
    assert len(times) == 2
    assert times == sorted(times)
    md = normalized(md, sid, tmp_path)
    if os.environ.get("ACP_HUB_UPDATE_GOLDEN"):
        GOLDEN.write_text(md)
    assert md == GOLDEN.read_text()


async def test_a_viewer_may_export_a_session_outside_its_scope_is_not_found() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        other = await owner.new_session()
        await owner.prompt(sid, "say hello")
        viewer_token = token("viewer", sub="vic", sessions=[sid])
        async with acp_client(hub.url_with(viewer_token)) as viewer:
            await resume(viewer, sid)
            text, _ = await export(viewer, sid, "jsonl")
            assert "hello" in text
            with pytest.raises(RpcFailure) as info:
                await viewer.call("_hub/export", {"sessionId": other, "format": "jsonl"})
            assert info.value.code == -32002
            for bad in (
                {"format": "pdf"},
                {"format": "jsonl", "cursor": "x"},
                {"format": "md", "cursor": "m:1:2"},
            ):
                with pytest.raises(RpcFailure) as info:
                    await viewer.call("_hub/export", {"sessionId": sid, **bad})
                assert info.value.code == -32602
    assert orjson.loads(text.splitlines()[0])["acpHubExport"] == 1


async def export_pages(client: AcpClient, sid: str, fmt: str) -> list[str]:
    """Every page's ``data`` of one export, in order."""
    pages: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"sessionId": sid, "format": fmt}
        if cursor is not None:
            params["cursor"] = cursor
        page = await client.call("_hub/export", params)
        pages.append(page["data"])
        cursor = page["nextCursor"]
        if cursor is None:
            return pages


async def test_a_large_session_exports_in_bounded_pages_that_join_to_the_whole_log(
    tmp_path: Path,
) -> None:
    bound = 8192
    chunks = 12_000
    settings = Settings(replay_page_bytes=bound)
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session(cwd=str(tmp_path))
        await owner.prompt(sid, f"stream {chunks} 16")
        await owner.wait_for(lambda: owner.idle_count(sid) >= 1)
        assert hub.app.registry is not None
        session = hub.app.registry.get(sid)
        last_seq = session.log.last_seq
        assert last_seq > chunks
        pages = await export_pages(owner, sid, "jsonl")
        live = session.state.snapshot()
        md_pages = await export_pages(owner, sid, "md")
    # Every page stays under the bound, and there are as many as the bound makes necessary.
    for page in (*pages, *md_pages):
        assert len(page.encode()) <= bound
    text = "".join(pages)
    assert len(pages) >= len(text.encode()) // bound
    assert len(md_pages) > 1
    # Together the pages are the whole log: every seq once, in order, folding to the state.
    head, events = read_jsonl(text.splitlines())
    assert head["complete"] is True
    assert head["session"]["lastSeq"] == last_seq
    assert [seq for seq, _ in events] == list(range(1, last_seq + 1))
    assert SessionState().apply_all(u for _, u in events).snapshot() == live
    streamed = "".join(f"{i:06d}" + "." * 9 + "\n" for i in range(chunks))
    assert streamed.strip() in "".join(md_pages)
