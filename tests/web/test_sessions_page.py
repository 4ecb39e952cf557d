"""The sessions page: every session with its agent, state, clients and pending permissions;
the start form for owners only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.web.harness import Hub, send_prompt, start_session

NewPage = Callable[..., Any]


def test_sessions_page_lists_sessions_and_links_to_them(hub: Hub, new_page: NewPage) -> None:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=frank")
    send_prompt(driver, "wait for my permission")
    driver.locator(".permission-dialog").wait_for()

    listing = new_page()
    listing.goto(f"{hub.url}/")
    row = listing.locator(f"tr[data-session-id='{session}']")
    row.wait_for()
    # Polled every few seconds: wait for the pending permission to show.
    listing.wait_for_selector(f"tr[data-session-id='{session}'] td.pending-some")
    cells = row.locator("td").all_inner_texts()
    assert cells[1] == "demo"
    assert "requires action" in cells[2]
    assert cells[3] == "1"
    assert cells[4] == "1"
    # The agent choice comes from the initialize result.
    options = listing.locator("#new-agent option").all_inner_texts()
    assert options[:2] == ["demo", "scripted"]
    row.locator("a").click()
    listing.wait_for_url(f"**/s/{session}")
    listing.wait_for_selector("[data-connection=ready]")


def test_viewers_get_no_start_form(hub: Hub, new_page: NewPage) -> None:
    page = new_page()
    page.goto(f"{hub.url}/?role=viewer")
    page.wait_for_selector(".conn-ready")
    assert page.locator("#new-cwd").count() == 0
