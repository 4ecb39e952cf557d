"""What a person trying the hub for the first time meets in the browser: the demo agent's
plan and diff read cleanly after several turns; a new tab of the owner's is the owner too (it
takes the token another tab of the hub's origin holds, which no other origin and no embedded
frame gets), and a page without a credential on a loopback hub says where the owner URL is."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.support import ROOT
from tests.web.harness import Embedding, Hub, send_prompt, start_session, wait_idle

NewPage = Callable[..., Any]
ASK = """() => new Promise((resolve) => {
    const channel = new BroadcastChannel('acp-hub.token');
    channel.onmessage = (event) => resolve(event.data);
    channel.postMessage({ type: 'ask' });
    setTimeout(() => resolve(null), 1000);
})"""
"""A page's own script asking the tabs of its origin for a token (the UI's request); what it
hears within a second (an answer comes within milliseconds)."""


def _turn(page: Any, text: str) -> None:
    send_prompt(page, text)
    page.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(page)


def test_the_demo_plan_is_the_last_turns_and_a_diff_names_its_file_once(
    hub: Hub, new_page: NewPage
) -> None:
    page = new_page(viewport={"width": 1280, "height": 860})
    start_session(page, hub.url, query="?name=alice")
    _turn(page, "tidy up the greeting helper")
    _turn(page, "sort the guest list")
    # The second turn's plan replaced the first one's: five steps, the second turn's.
    entries = page.locator(".plan-entry")
    assert entries.count() == 5
    assert "sort the guest list" in entries.first.inner_text()
    assert "greeting" not in page.locator(".panel-plan").inner_text()
    # Each edit names its file once (the diff's header), not in the location list and in the
    # patch's own headers again.
    path = str(ROOT / "src" / "sort_the_guest.py")
    edit = page.locator(".entry-tool", has=page.locator(".diff")).last
    text = edit.inner_text()
    assert text.count(path) == 1, text
    assert edit.locator(".diff-path").inner_text() == path
    assert edit.locator(".dl-add").count() == 3
    assert edit.locator(".dl-del").count() == 2


def test_a_new_tab_takes_the_token_of_an_open_tab_of_the_same_origin_only(
    hub: Hub, embedding: Embedding, new_page: NewPage
) -> None:
    owner = new_page(token=None)  # a browser that only ever opened the owner URL
    owner.goto(hub.owner_url)
    session = start_session(owner, hub.url)
    assert "#token=" not in owner.url
    # A second tab of the same browser, opened on the session's address without a token.
    tab = owner.context.new_page()
    tab.goto(f"{hub.url}/s/{session}")
    tab.wait_for_selector("[data-connection=ready]")
    assert tab.locator(".identity").get_attribute("data-role") == "owner"
    # The dashboard in a third tab too; it names the two tabs' person once, by the owner
    # URL's name (the login name of whoever started the hub), not by the web client's.
    board = owner.context.new_page()
    board.goto(f"{hub.url}/")
    board.locator(".identity[data-role=owner]").wait_for()
    assert board.locator(".identity-name").inner_text() == getpass.getuser()
    watchers = board.locator(f"[data-session-id='{session}'] .card-watchers")
    expect(watchers).to_have_text(f"2 watching: {getpass.getuser()} (2)")
    presence = tab.locator(".presence-name")
    expect(presence).to_have_count(2)
    assert "acp-hub web" not in tab.locator(".panel-people").inner_text()
    # The client program only as a detail.
    assert tab.locator(".presence-client").first.get_attribute("title") == "using acp-hub web"
    # A page of another origin embedding the session, in the same browser: its frame (the
    # hub's origin, but inside another site's page) gets no token and is refused.
    host = owner.context.new_page()
    host.goto(embedding.allowed.page(hub.url, session))
    frame = host.frame_locator("acp-session iframe")
    frame.locator(".access-refused").wait_for()
    # The other origin's own script asking on the same channel name hears nothing: the
    # channel is the origin's (a bounded wait: an answer would come within milliseconds).
    assert host.evaluate(ASK) is None
    # The same script in a document of the hub's origin is answered (the control).
    same = owner.context.new_page()
    same.goto(f"{hub.url}/static/app.css")
    assert same.evaluate(ASK)["type"] == "token"
    # Another browser, with no tab holding a token: refused, with the way back for the person
    # running this (loopback) hub.
    stranger = new_page(token=None)
    stranger.goto(f"{hub.url}/s/{session}")
    refused = stranger.locator(".access-refused")
    refused.wait_for()
    hint = refused.locator(".access-hint").inner_text()
    assert "owner URL" in hint
    assert "acp-hub url" in hint
    assert "owner-url" in hint
    assert "Ask the person who shared" not in hint
