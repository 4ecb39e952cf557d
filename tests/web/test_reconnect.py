"""A dropped connection reconnects by itself and resumes from its cursor: nothing is
duplicated, nothing is missing."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

# The shared harness's names, imported by every test module that uses them.
from tests.web.harness import (
    Hub,
    TcpProxy,
    open_as,
    send_prompt,
    start_session,
    transcript,
    wait_idle,
)

NewPage = Callable[..., Any]

AWAY_S = 20.0
"""How long the closed tab stays closed before a new one opens (issue 25)."""


@pytest.fixture
def proxy(hub: Hub) -> Iterator[TcpProxy]:
    port = urlsplit(hub.url).port
    assert port is not None
    made = TcpProxy(port)
    yield made
    made.close()


def test_dropped_connection_resumes_after_cursor(
    hub: Hub, proxy: TcpProxy, new_page: NewPage
) -> None:
    page = new_page()
    sent: list[str] = []
    page.on(
        "websocket",
        lambda ws: ws.on("framesent", lambda payload: sent.append(str(payload))),
    )
    # The page goes through the proxy; a second driver stays connected directly so the
    # permission request survives the drop and can be answered.
    session = start_session(page, proxy.url, query="?name=dana")
    helper = new_page()
    helper.goto(f"{hub.url}/s/{session}?name=helper")
    helper.wait_for_selector("[data-connection=ready]")

    page.fill("#prompt-input", "survive a network drop")
    page.press("#prompt-input", "Enter")
    page.wait_for_selector(".msg-thought, .msg-agent, .entry-tool")
    proxy.sever()
    page.wait_for_selector("[data-connection=waiting]")
    page.wait_for_selector("[data-connection=ready]")

    helper.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(helper)
    wait_idle(page)

    # The resumes: first the whole replay, then from the cursor.
    resumes = [
        message["params"]["replayFrom"]
        for message in map(json.loads, sent)
        if isinstance(message, dict) and message.get("method") == "session/resume"
    ]
    assert resumes[0] == {"type": "start"}
    assert len(resumes) >= 2
    assert resumes[1]["type"] == "_hub_after"
    assert isinstance(resumes[1]["seq"], int)

    keys = page.eval_on_selector_all(".entries [data-key]", "els => els.map(e => e.dataset.key)")
    assert len(keys) == len(set(keys)), keys
    fresh = new_page()
    fresh.goto(f"{hub.url}/s/{session}")
    wait_idle(fresh)
    assert transcript(page) == transcript(fresh)
    assert transcript(page) == transcript(helper)
    assert "Allow once by helper" in page.locator(".panel-permissions").inner_text()


# Pages opened as in the other browser tests: the set-up is the scenario's first steps.
def test_a_reload_keeps_the_permission_request_and_the_answer_applies(
    hub: Hub, new_page: NewPage
) -> None:
    # The only client that may answer reloads its page while the demo agent waits for
    # permission: the request waits for it (answer_grace) and is shown again after the reload.
    page = new_page()
    session = start_session(page, hub.url, query="?name=rita")
    send_prompt(page, "tidy up the greeting helper")
    dialog = page.locator(".permission-dialog")
    dialog.wait_for()
    before = dialog.inner_text()
    page.reload()
    page.wait_for_selector("[data-connection=ready]")
    dialog.wait_for()
    assert dialog.inner_text() == before
    page.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(page)
    assert "I applied the edit" in page.locator(".msg-agent").last.inner_text()
    assert "cancelled" not in page.locator(".panel-permissions").inner_text().lower()
    assert session in page.url


# Pages opened as in the other browser tests: the set-up is the scenario's first steps.
@pytest.mark.slow
def test_a_closed_tab_and_a_new_one_keep_the_permission_request(
    hub: Hub, new_page: NewPage
) -> None:
    # The only tab closes while the demo agent waits for permission, and stays closed for 20 s
    # (within the default answer_grace) before a new tab opens on the session.
    page = new_page()
    session = start_session(page, hub.url, query="?name=tom")
    send_prompt(page, "tidy up the greeting helper")
    page.locator(".permission-dialog").wait_for()
    page.close()
    closed = time.monotonic()
    # The dashboard keeps the card waiting for permission while nobody is connected.
    board = new_page()
    board.goto(f"{hub.url}/")
    card = board.locator(f".card[data-session-id='{session}']")
    badge, watchers = card.locator(".state-badge"), card.locator(".card-watchers")
    expect(badge).to_have_text("waiting for permission")
    expect(watchers).to_have_text("0 watching")
    # Nobody comes back for 20 s: the card says so all along (the dashboard follows the
    # session live), and the request still waits at the end.
    while time.monotonic() - closed < AWAY_S:
        assert badge.inner_text() == "waiting for permission"
        assert watchers.inner_text() == "0 watching"
        board.wait_for_timeout(500)
    assert badge.inner_text() == "waiting for permission"
    assert watchers.inner_text() == "0 watching"
    assert time.monotonic() - closed >= AWAY_S
    board.close()
    again = open_as(new_page(), hub.url, session, "?name=tom")
    again.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(again)
    assert "I applied the edit" in again.locator(".msg-agent").last.inner_text()
