"""The session page against the real hub and demo agent: two clients, roles, permission
dialog, rendering of the demo turn, reload, and screenshots for ``docs/screenshots``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.harness import (
    Hub,
    open_as,
    screenshot,
    send_prompt,
    start_session,
    transcript,
    wait_idle,
)

NewPage = Callable[..., Any]


def test_presence_counts_viewers_past_the_listing_limit(hub: Hub, new_page: NewPage) -> None:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=alice")
    first = open_as(new_page(), hub.url, session, "?role=viewer&name=bob")
    driver.wait_for_selector(".presence-client:has-text('bob')")
    assert driver.locator(".presence-audience").count() == 0
    # The hub lists one viewer at most (`presence_viewers = 1`): with a second one, both
    # are counted instead, on every page, live and after a reload (replay).
    second = open_as(new_page(), hub.url, session, "?role=viewer&name=carol")
    for page in (driver, first, second):
        expect(page.locator(".presence-audience")).to_have_text("2 viewers")
        expect(page.locator(".panel-people .panel-title")).to_have_text("People (3)")
        expect(page.locator(".presence-client")).to_have_count(1)
        expect(page.locator(".presence-client")).to_contain_text("alice")
    second.close()
    expect(driver.locator(".presence-client:has-text('bob')")).to_be_visible()
    expect(driver.locator(".presence-audience")).to_have_count(0)
    driver.reload()
    driver.wait_for_selector("[data-connection=ready]")
    expect(driver.locator(".presence-client:has-text('bob')")).to_be_visible()
    expect(driver.locator(".panel-people .panel-title")).to_have_text("People (2)")


def test_driver_and_viewer_share_prompt_queue_and_permission(hub: Hub, new_page: NewPage) -> None:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=alice")
    viewer = open_as(new_page(), hub.url, session, "?role=viewer&name=bob")

    # Roles come from the initialize result: the viewer has no prompt box.
    assert viewer.get_attribute("#app", "data-role") == "viewer"
    assert viewer.locator("#prompt-input").is_hidden()
    assert driver.locator("#prompt-input").is_visible()
    # Presence lists both, with their roles.
    for page in (driver, viewer):
        page.wait_for_selector(".presence-client:has-text('bob')")
        assert "alice" in page.locator(".panel-people").inner_text()

    send_prompt(driver, "hello there")
    for page in (driver, viewer):
        message = page.locator(".msg-user").first
        message.wait_for()
        # The sender's name and the role they prompted with.
        assert message.locator(".msg-who").inner_text() == "alice · owner"
        assert "hello there" in message.inner_text()

    # The demo asks for permission: only the driver gets the dialog; the viewer sees the
    # pending record.
    dialog = driver.locator(".permission-dialog")
    dialog.wait_for()
    assert "Apply the edit" in dialog.inner_text()
    viewer.wait_for_selector(".panel-permissions .perm-pending")
    assert viewer.locator(".permission-dialog").count() == 0

    # While the turn waits, a second prompt queues; its sender may withdraw it.
    send_prompt(driver, "a queued follow-up")
    for page in (driver, viewer):
        page.wait_for_selector(".queue-entry:has-text('a queued follow-up')")
    assert viewer.locator(".queue-entry button").count() == 0
    driver.click(".queue-entry button:has-text('Withdraw')")
    for page in (driver, viewer):
        page.wait_for_selector(".panel-queue", state="hidden")

    # Answer with the keyboard.
    driver.focus(".permission-dialog button:has-text('Allow once')")
    driver.keyboard.press("Enter")
    dialog.wait_for(state="detached")
    for page in (driver, viewer):
        resolved = ".panel-permissions .perm-resolved:has-text('Allow once by alice (owner)')"
        page.wait_for_selector(resolved)
        wait_idle(page)
    assert transcript(driver) == transcript(viewer)
    assert "queued follow-up" not in transcript(driver)

    # Config options: the driver changes the mode, the viewer sees it but cannot.
    driver.select_option("#config-mode", "ask")
    # (Locator assertions, not wait_for_function: the page's CSP forbids eval, as it should.)
    expect(viewer.locator("#config-mode")).to_have_value("ask")
    assert viewer.locator("#config-mode").is_disabled()


@pytest.mark.screenshots
def test_demo_turn_renders_markdown_thoughts_diff_terminal_plan(
    hub: Hub, new_page: NewPage
) -> None:
    page = new_page(viewport={"width": 1280, "height": 860})
    session = start_session(page, hub.url, query="?name=alice")
    send_prompt(page, "tidy up the greeting helper")
    page.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(page)

    # Thoughts are collapsed.
    thought = page.locator("details.thought").first
    assert thought.get_attribute("open") is None
    # Markdown: headings, lists, a fenced block with its language, a table, a safe link.
    agent = page.locator(".msg-agent").last
    assert agent.locator("h3, h4").count() >= 1
    assert agent.locator("ol li, ul li").count() >= 2
    assert agent.locator(".md-code-lang").first.inner_text() == "python"
    assert agent.locator("table th").count() >= 2
    link = agent.locator("a").first
    assert (link.get_attribute("href") or "").startswith("https://")
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert link.get_attribute("target") == "_blank"
    # The diff: file header from `changes`, coloured added and removed lines.
    diff = page.locator(".diff").first
    assert "modify" in diff.locator(".diff-op").first.inner_text().lower()
    added = diff.locator(".dl-add").first
    removed = diff.locator(".dl-del").first
    assert added.inner_text().lstrip().startswith("+") or "+" in added.inner_text()
    assert removed.count() == 1
    background = "el => getComputedStyle(el).backgroundColor"
    assert added.evaluate(background) != removed.evaluate(background)
    # The terminal: ANSI colours as spans with classes, no escape byte left, exit status.
    terminal = page.locator(".terminal").first
    output = terminal.locator(".terminal-output")
    assert output.locator("span.ansi-fg-2").count() >= 1
    assert "\x1b" not in output.inner_text()
    assert "[0m" not in output.inner_text()
    assert terminal.locator(".terminal-exit").inner_text() == "exit 0"
    # The plan with entry statuses, the usage meter, the stop reason.
    assert page.locator(".plan-entry .plan-status").first.inner_text() == "completed"
    assert page.locator(".panel-usage meter").count() == 1
    assert "end turn" in page.locator(".state-badge").inner_text()

    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "session-desktop.png")
    phone = new_page(viewport={"width": 360, "height": 760}, device_scale_factor=2)
    phone.goto(f"{hub.url}/s/{session}")
    wait_idle(phone)
    # Nothing may force a horizontal scroll at 360 px.
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, width
    dark = new_page(viewport={"width": 1280, "height": 860}, color_scheme="dark")
    dark.goto(f"{hub.url}/s/{session}")
    wait_idle(dark)
    dark.locator(".terminal").first.scroll_into_view_if_needed()
    screenshot(dark, "session-dark.png")


# Pages opened as in the other browser tests: the set-up is the scenario's first steps.
def test_reload_rebuilds_the_same_content(hub: Hub, new_page: NewPage) -> None:
    page = new_page()
    session = start_session(page, hub.url, query="?name=carol")
    send_prompt(page, "first question")
    page.click(".permission-dialog button:has-text('Reject')")
    wait_idle(page)
    live = transcript(page)
    permissions = page.locator(".panel-permissions").inner_text()
    assert "Reject by carol" in permissions

    page.reload()
    page.wait_for_selector("[data-connection=ready]")
    wait_idle(page)
    assert transcript(page) == live
    assert page.locator(".panel-permissions").inner_text() == permissions
    # A late joiner sees the same.
    other = new_page()
    other.goto(f"{hub.url}/s/{session}")
    wait_idle(other)
    assert transcript(other) == live
