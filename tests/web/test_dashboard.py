"""The team dashboard `/`: live cards of every session through one WebSocket, answers to
permission requests from a card, the new-session form, opt-in browser notifications."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support import ROOT

# The shared harness's names, imported by every test module that uses them.
from tests.web.harness import (
    Hub,
    open_as,
    screenshot,
    send_prompt,
    start_session,
    wait_idle,
)

NewPage = Callable[..., Any]


def open_dashboard(page: Any, hub: Hub, query: str = "") -> Any:
    page.goto(f"{hub.url}/{query}")
    page.wait_for_selector("[data-connection=ready]")
    return page


def card(page: Any, session: str) -> Any:
    return page.locator(f".card[data-session-id='{session}']")


@pytest.mark.screenshots
def test_three_sessions_on_two_agents_live_and_an_approver_answers_from_a_card(
    hub: Hub, new_page: NewPage
) -> None:
    dashboard = new_page(viewport={"width": 1280, "height": 900})
    sockets: list[str] = []
    dashboard.on("websocket", lambda socket: sockets.append(socket.url))
    open_dashboard(dashboard, hub, "?role=approver&name=ann")

    alpha_page, beta_page, gamma_page = new_page(), new_page(), new_page()
    alpha = start_session(alpha_page, hub.url, agent="scripted", query="?name=alice")
    beta = start_session(beta_page, hub.url, agent="scripted", query="?name=bob")
    gamma = start_session(gamma_page, hub.url, agent="demo", query="?name=carol")
    for session, name in ((alpha, "alice"), (beta, "bob"), (gamma, "carol")):
        expect(card(dashboard, session).locator(".card-watchers")).to_have_text(
            f"1 watching: {name}"
        )
    expect(card(dashboard, gamma).locator(".card-agent")).to_have_text("demo")

    # All three stream at once; every card follows its own session.
    send_prompt(alpha_page, "say first line\nsay alpha is done")
    send_prompt(beta_page, "say beta is done")
    send_prompt(gamma_page, "tidy up the greeting helper")
    expect(card(dashboard, alpha).locator(".card-answer")).to_contain_text("alpha is done")
    expect(card(dashboard, beta).locator(".card-answer")).to_contain_text("beta is done")
    expect(card(dashboard, alpha).locator(".state-badge")).to_have_text("idle · end turn")

    # The demo waits for a person: its card stands out, comes first, and the title counts it.
    waiting = card(dashboard, gamma)
    expect(waiting).to_have_class(re.compile(r"\bcard-waiting\b"))
    expect(waiting.locator(".state-badge")).to_have_text("waiting for permission")
    expect(dashboard.locator(".card").first).to_have_attribute("data-session-id", gamma)
    expect(dashboard).to_have_title("(1 waiting) Sessions · acp-hub")
    expect(waiting.locator(".card-turn")).to_contain_text("turn: ")
    screenshot(dashboard, "dashboard.png")

    # The approver answers from the card; the agent continues and finishes the turn.
    waiting.get_by_role("button", name=re.compile("^Allow once")).click()
    expect(card(dashboard, gamma).locator(".state-badge")).to_have_text("idle · end turn")
    expect(dashboard).to_have_title("Sessions · acp-hub")
    wait_idle(gamma_page)
    expect(gamma_page.locator(".panel-permissions .perm-resolved")).to_contain_text(
        "Allow once by ann (approver)"
    )
    expect(gamma_page.locator(".permission-dialog")).to_have_count(0)
    expect(card(dashboard, gamma).locator(".card-answer")).not_to_be_empty()
    # The dashboard attached only for the answer: it is gone from the session again.
    expect(card(dashboard, gamma).locator(".card-watchers")).to_have_text("1 watching: carol")
    # One connection for everything.
    assert len(sockets) == 1, sockets

    # A closed session disappears.
    beta_page.get_by_role("button", name="Close session").click()
    beta_page.get_by_role("button", name="Close it").click()
    expect(card(dashboard, beta)).to_have_count(0)


def test_viewers_see_cards_but_neither_answers_nor_the_start_form(
    hub: Hub, new_page: NewPage
) -> None:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=frank")
    send_prompt(driver, "wait for my permission")
    driver.locator(".permission-dialog").wait_for()
    viewer = open_dashboard(new_page(), hub, "?role=viewer")
    pending = card(viewer, session).locator(".card-permission")
    expect(pending).to_contain_text("An approver can answer it.")
    assert pending.get_by_role("button").count() == 0
    assert viewer.locator("#new-cwd").count() == 0
    assert viewer.get_by_role("button", name=re.compile("Notif")).count() == 0
    link = f".card[data-session-id='{session}'] a.card-title"
    viewer.evaluate("(link) => { window.__link = document.querySelector(link); }", link)
    driver.locator(".permission-dialog button").first.click()
    wait_idle(driver)
    expect(card(viewer, session)).to_have_attribute("data-state", "idle")
    # The card was drawn again (waiting, running, idle) around the same link: a click whose
    # press and release straddle a redraw still follows it.
    assert viewer.evaluate("(link) => document.querySelector(link) === window.__link", link)
    # The card links to the session.
    card(viewer, session).get_by_role("link").click()
    viewer.wait_for_url(f"**/s/{session}?role=viewer")
    viewer.wait_for_selector("[data-connection=ready]")


def test_a_cards_permission_buttons_stay_through_its_redraws(hub: Hub, new_page: NewPage) -> None:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=frank")
    send_prompt(driver, "wait for my permission")
    driver.locator(".permission-dialog").wait_for()
    dashboard = open_dashboard(new_page(), hub, "?role=approver&name=ann")
    waiting = card(dashboard, session)
    allow = waiting.get_by_role("button", name=re.compile("^Allow once"))
    allow.wait_for()
    button = f".card[data-session-id='{session}'] .card-permission button"
    dashboard.evaluate("(b) => { window.__button = document.querySelector(b); }", button)
    # Someone else opens the session: the card is drawn again (its watchers), around the
    # same buttons, so that a click whose press and release straddle the redraw still counts.
    open_as(new_page(), hub.url, session, "?role=viewer&name=gus")
    expect(waiting.locator(".card-watchers")).to_contain_text("2 watching")
    assert dashboard.evaluate("(b) => document.querySelector(b) === window.__button", button)
    # Pressed before a redraw, released after it: the answer still goes.
    allow.hover()
    dashboard.mouse.down()
    open_as(new_page(), hub.url, session, "?role=viewer&name=hal")
    expect(waiting.locator(".card-watchers")).to_contain_text("3 watching")
    dashboard.mouse.up()
    expect(waiting.locator(".state-badge")).not_to_have_text("waiting for permission")
    wait_idle(driver)
    expect(driver.locator(".panel-permissions .perm-resolved")).to_contain_text(
        "Allow once by ann (approver)"
    )


def test_the_start_form_offers_the_workspace_roots(hub: Hub, new_page: NewPage) -> None:
    page = open_dashboard(new_page(), hub, "?name=olga")
    assert page.locator("#new-agent option").all_inner_texts()[:2] == ["demo", "scripted"]
    expect(page.locator("#new-cwd")).to_have_value(str(ROOT))
    expect(page.locator("#new-cwd-roots option")).to_have_attribute("value", str(ROOT))
    page.fill("#new-cwd", "/etc")
    page.click("text=Start session")
    expect(page.locator(".new-session .composer-error")).not_to_be_empty()


# Records what the page asks of the browser's notification API (the API itself is real).
SPY = """
window.__asked = 0;
window.__shown = [];
const Real = window.Notification;
const ask = Real.requestPermission.bind(Real);
Real.requestPermission = (...args) => { window.__asked += 1; return ask(...args); };
window.Notification = new Proxy(Real, {
  construct(target, args) { window.__shown.push(args[0]); return new target(...args); },
});
"""


def test_notifications_are_asked_for_on_a_click_only(hub: Hub, new_page: NewPage) -> None:
    dashboard = new_page()
    dashboard.add_init_script(SPY)
    open_dashboard(dashboard, hub, "?name=nina")
    button = dashboard.locator("button.notify")
    expect(button).to_have_text("Notify me of waiting permissions")
    assert dashboard.evaluate("window.__asked") == 0
    button.click()
    # Headless Chromium answers the request itself (it has no one to ask).
    expect(button).to_be_disabled()
    assert dashboard.evaluate("window.__asked") == 1
    dashboard.context.grant_permissions(["notifications"], origin=hub.url)

    driver = new_page()
    session = start_session(driver, hub.url, query="?name=frank")
    send_prompt(driver, "wait for my permission")
    expect(card(dashboard, session)).to_have_class(re.compile(r"\bcard-waiting\b"))
    assert dashboard.evaluate("window.__shown") == ["demo waits for permission"]
    driver.locator(".permission-dialog button").first.click()
    wait_idle(driver)


def test_a_dashboard_opened_on_many_sessions_follows_every_page(
    hub: Hub, new_page: NewPage
) -> None:
    # The hub answers two cards a page (tests/web/conftest.py): five sessions are three pages
    # at least (the hub of these tests keeps the sessions of the tests before).
    starter = new_page()
    sessions = [start_session(starter, hub.url, agent="scripted") for _ in range(5)]
    dashboard = open_dashboard(new_page(), hub)
    for session in sessions:
        expect(card(dashboard, session)).to_have_count(1)
    # A reload subscribes again, page by page: the same cards, none lost or doubled.
    dashboard.reload()
    dashboard.wait_for_selector("[data-connection=ready]")
    for session in sessions:
        expect(card(dashboard, session)).to_have_count(1)
