"""The session page's Download menu: a viewer downloads the session's transcript (Markdown) and
its event log (JSON lines) that the hub exports in pages, as files named after the session."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from hub.protocol.state import SessionState
from tests.credentials import token
from tests.web.harness import WAIT_MS, Hub, send_prompt, start_session, wait_idle


def test_a_viewer_downloads_the_transcript_and_the_event_log(
    hub: Hub, new_page: Callable[..., Any]
) -> None:
    owner = new_page()
    session = start_session(owner, hub.url, agent="scripted")
    send_prompt(owner, "say Hello for the download")
    wait_idle(owner)
    viewer = new_page(token=token("viewer", sub="vic", name="Vic", sessions=[session]))
    viewer.goto(f"{hub.url}/s/{session}")
    viewer.wait_for_selector("[data-connection=ready]")
    viewer.click(".download-menu > summary")
    with viewer.expect_download(timeout=WAIT_MS) as md_download:
        viewer.click(".download-item[data-format=md]")
    assert md_download.value.suggested_filename == f"{session}.md"
    md = Path(md_download.value.path()).read_text()
    assert f"- Session: `{session}`" in md
    assert "Hello for the download" in md
    viewer.click(".download-menu > summary")
    with viewer.expect_download(timeout=WAIT_MS) as log_download:
        viewer.click(".download-item[data-format=jsonl]")
    assert log_download.value.suggested_filename == f"{session}.jsonl"
    lines = Path(log_download.value.path()).read_bytes().splitlines()
    head = orjson.loads(lines[0])
    assert head["session"]["id"] == session
    state = SessionState().apply_all(orjson.loads(line)["update"] for line in lines[1:])
    assert state.stop_reason == "end_turn"
