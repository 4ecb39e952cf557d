"""The layout at 375 x 812 (a phone) and 1280 x 800 (a laptop), measured in the page.

The session page shows the transcript first (also when it opens and when a turn ends), its
controls behind one button on the phone, its header on one line, and a waiting permission whole
with its options in the lower half of the screen; the Share dialog shows a link field only once
a link exists; the dashboard's cards show the answer as plain text, the waiting request instead
of the previous answer, and their status pills in one place; the start form's labels line up.
At every step no text overflows its box and no word breaks in a button or a pill.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

# The shared harness's names, imported by every test module that uses them.
from tests.web.harness import (
    SCREENSHOTS_ENV,
    WAIT_MS,
    Hub,
    screenshot,
    send_prompt,
    start_session,
    wait_idle,
)
from tests.web.layout import VIEWPORTS, fully_visible, layout_problems, place

NewPage = Callable[..., Any]
SIZES = list(VIEWPORTS)


def one_line_header(page: Any) -> None:
    """The header is one line: its pieces side by side, as high as one button."""
    header = page.locator(".app-header")
    assert place(header)["height"] < 60, place(header)
    title = place(page.locator(".session-title"))
    badge = place(page.locator(".app-header .state-badge"))
    assert abs((title["top"] + title["bottom"]) / 2 - (badge["top"] + badge["bottom"]) / 2) < 12


def end_of_transcript_shown(page: Any) -> None:
    """The transcript's last entry is on screen, and so is the header (nothing scrolled the
    page itself)."""
    expect(page.locator(".entries > .entry:visible").last).to_be_in_viewport()
    assert place(page.locator(".app-header"))["top"] == 0


@pytest.mark.screenshots
@pytest.mark.parametrize("size", SIZES)
def test_session_page_transcript_first_and_a_waiting_permission_whole(
    hub: Hub, new_page: NewPage, size: str
) -> None:
    viewport = VIEWPORTS[size]
    phone = size == "phone"
    page = new_page(viewport=viewport)
    session = start_session(page, hub.url, query="?name=alice")
    one_line_header(page)
    assert layout_problems(page) == []

    # A permission waits: its kicker, heading and every option on screen, uncovered, the
    # options in the lower half (within reach of a thumb).
    send_prompt(page, "tidy up the greeting helper")
    dialog = page.locator(".permission-dialog")
    dialog.wait_for()
    options = dialog.locator(".permission-options button")
    # The request never takes the focus (docs/security.md, what the UI guarantees).
    expect(options.first).not_to_be_focused()
    for part in (dialog.locator(".permission-kicker"), dialog.locator(".permission-title")):
        assert fully_visible(part), place(part)
    assert options.count() >= 2
    for index in range(options.count()):
        option = options.nth(index)
        assert fully_visible(option), place(option)
        assert place(option)["top"] > viewport["height"] / 2, place(option)
    one_line_header(page)
    assert layout_problems(page) == []
    if phone:
        screenshot(page, "session-phone-permission.png")

    # The turn ends: the end of the transcript is on screen, not the controls.
    dialog.get_by_role("button", name="Allow once").click()
    wait_idle(page)
    end_of_transcript_shown(page)
    controls = page.locator(".panel-controls")
    if phone:
        expect(controls).to_be_hidden()
    # The header and the prompt box leave most of the screen to the transcript.
    used = place(page.locator(".app-header"))["height"] + place(page.locator(".dock"))["height"]
    assert used < 0.2 * viewport["height"], used
    assert layout_problems(page) == []

    # Opened again (a reload, a link), the page shows the end of the transcript too.
    page.goto(f"{hub.url}/s/{session}")
    wait_idle(page)
    end_of_transcript_shown(page)
    one_line_header(page)
    if not phone:
        expect(controls).to_be_visible()
        return
    expect(controls).to_be_hidden()
    screenshot(page, "session-phone.png")

    # On the phone the controls, who the page is and Share are behind one button.
    details = page.get_by_role("button", name="Details")
    expect(details).to_have_attribute("aria-expanded", "false")
    details.click()
    expect(controls).to_be_visible()
    sheet = page.locator("#session-details")
    expect(sheet.locator(".identity")).to_be_visible()
    expect(sheet.get_by_role("button", name="Share")).to_be_visible()
    close = page.get_by_role("button", name="Close session")
    close.scroll_into_view_if_needed()
    assert fully_visible(close), place(close)
    assert layout_problems(page) == []
    sheet.evaluate("node => { node.scrollTop = 0; }")
    screenshot(page, "session-phone-details.png")
    # Escape (or the same button, now "Transcript") goes back to the transcript.
    page.keyboard.press("Escape")
    expect(controls).to_be_hidden()
    expect(details).to_be_focused()
    expect(details).to_have_attribute("aria-expanded", "false")
    end_of_transcript_shown(page)


@pytest.mark.parametrize("size", SIZES)
def test_share_dialog_shows_the_link_once_made_and_whole_buttons(
    hub: Hub, new_page: NewPage, size: str
) -> None:
    page = new_page(viewport=VIEWPORTS[size])
    start_session(page, hub.url, agent="scripted", query="?name=alice")
    if size == "phone":
        page.get_by_role("button", name="Details").click()
    page.get_by_role("button", name="Share").click()
    dialog = page.locator(".share-dialog")
    expect(dialog.locator(".empty")).to_have_text("No links yet.")
    # No link yet: no link field, no Copy button.
    expect(dialog.locator(".share-url")).to_be_hidden()
    expect(dialog.get_by_role("button", name="Copy")).to_be_hidden()
    dialog.locator(".share-label").fill("for the release review team")
    dialog.get_by_role("button", name="Create link").click()
    expect(dialog.locator(".share-url")).to_have_value(re.compile("#token="), timeout=WAIT_MS)
    expect(dialog.get_by_role("button", name="Copy")).to_be_visible()
    revoke = dialog.locator(".share-item[data-state=active] button.share-revoke")
    expect(revoke).to_have_text("Revoke")
    assert layout_problems(page) == []
    assert fully_visible(revoke), place(revoke)


def card(page: Any, session: str) -> Any:
    return page.locator(f".card[data-session-id='{session}']")


@pytest.mark.screenshots
@pytest.mark.parametrize("size", SIZES)
def test_dashboard_cards_and_start_form(hub: Hub, new_page: NewPage, size: str) -> None:
    # One demo session answered (a markdown answer), then asked again: it waits.
    demo = new_page()
    waiting = start_session(demo, hub.url, query="?name=dora")
    send_prompt(demo, "tidy up the greeting helper")
    demo.locator(".permission-dialog").get_by_role("button", name="Allow once").click()
    wait_idle(demo)
    # One answered demo session, one with a title long enough to wrap.
    other = new_page()
    answered = start_session(other, hub.url, query="?name=omar")
    send_prompt(other, "tidy up the greeting helper")
    other.locator(".permission-dialog").get_by_role("button", name="Allow once").click()
    wait_idle(other)
    titled_page = new_page()
    titled = start_session(titled_page, hub.url, agent="scripted", query="?name=tess")
    send_prompt(titled_page, "title A session whose title is long enough to wrap on every card")
    wait_idle(titled_page)
    send_prompt(demo, "tidy up the greeting helper again")
    demo.locator(".permission-dialog").wait_for()

    page = new_page(viewport=VIEWPORTS[size])
    page.goto(f"{hub.url}/?name=ann")
    page.wait_for_selector("[data-connection=ready]")
    expect(card(page, titled).locator(".card-title")).to_have_text(re.compile("long enough"))

    # The answer as plain text, its lines kept.
    answer = card(page, answered).locator(".card-answer")
    expect(answer).to_contain_text("agentclientprotocol.com")
    text = answer.inner_text()
    assert "edit · applied" in text, text
    for markup in ("|", "](", "[", "`", "**"):
        assert markup not in text, (markup, text)
    assert len(text.strip().splitlines()) >= 3, text

    # While a request waits, the card shows it, not the previous turn's answer.
    pending = card(page, waiting)
    expect(pending.locator(".card-body")).to_have_attribute("data-shows", "request")
    request = pending.locator(".card-permission")
    expect(request.locator(".permission-kicker")).to_have_text("The agent asks for permission")
    expect(request.locator(".request-subject")).to_contain_text("What it will do")
    expect(pending.locator(".card-answer")).to_have_count(0)
    expect(pending.get_by_role("button", name=re.compile("^Allow once"))).to_be_visible()

    # Every status pill in the same place of its card: the top right corner.
    offsets = page.evaluate(
        """() => [...document.querySelectorAll('.card')].map((c) => {
          const box = c.getBoundingClientRect();
          const pill = c.querySelector('.card-head > .state-badge').getBoundingClientRect();
          return [Math.round(pill.top - box.top), Math.round(box.right - pill.right)];
        })"""
    )
    assert len(offsets) >= 3
    assert len({tuple(offset) for offset in offsets}) == 1, offsets

    # The start form: the labels line up, and so do the fields.
    agent_label, cwd_label = (
        place(page.locator("label[for=new-agent]")),
        place(page.locator("label[for=new-cwd]")),
    )
    agent, cwd = place(page.locator("#new-agent")), place(page.locator("#new-cwd"))
    if size == "desktop":
        assert agent_label["top"] == cwd_label["top"], (agent_label, cwd_label)
        assert (agent["top"], agent["height"]) == (cwd["top"], cwd["height"]), (agent, cwd)
        button = place(page.get_by_role("button", name="Start session"))
        assert button["bottom"] == agent["bottom"], (button, agent)
    else:
        assert agent_label["left"] == cwd_label["left"] == agent["left"] == cwd["left"]
    assert layout_problems(page) == []
    if size == "phone":
        page.locator("#sessions-heading").evaluate("node => node.scrollIntoView()")
        screenshot(page, "dashboard-phone.png")
    demo.locator(".permission-dialog button").first.click()
    wait_idle(demo)


def test_screenshots_are_written_only_when_asked(
    module_page: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test run writes no screenshot (docs/screenshots is the checkout's); `make screenshots`
    names a directory, and they go there."""
    monkeypatch.delenv(SCREENSHOTS_ENV, raising=False)
    assert screenshot(module_page, "probe.png") is None
    monkeypatch.setenv(SCREENSHOTS_ENV, str(tmp_path / "shots"))
    written = screenshot(module_page, "probe.png")
    assert written == tmp_path / "shots" / "probe.png"
    assert written is not None
    assert written.read_bytes().startswith(b"\x89PNG")
