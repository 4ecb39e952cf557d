"""Accessibility: axe-core finds no serious or critical violation on any page, in light and
dark, and a whole turn with a permission request can be driven with the keyboard alone.

axe-core (pinned in ``tests/peers/package.json``) is evaluated into the page under test by
Playwright at test time, past the page's Content-Security-Policy (which the pages keep: they
never load a third-party script themselves).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.peers.paths import axe_script
from tests.support import ROOT
from tests.web.harness import Hub, open_as, send_prompt, start_session, wait_idle

NewPage = Callable[..., Any]

SCHEMES = ["light", "dark"]


def axe_problems(page: Any) -> list[str]:
    """The serious and critical violations axe-core finds in ``page``, one line each."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(axe_script().read_text())
    results = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    problems = []
    for violation in results:
        if violation["impact"] not in ("serious", "critical"):
            continue
        for node in violation["nodes"]:
            problems.append(
                f"{violation['id']} ({violation['impact']}): {json.dumps(node['target'])} "
                f"{node.get('failureSummary', '')[:300]}"
            )
    return problems


@pytest.mark.parametrize("scheme", SCHEMES)
def test_session_page_has_no_serious_violation(hub: Hub, new_page: NewPage, scheme: str) -> None:
    page = new_page(color_scheme=scheme, viewport={"width": 1280, "height": 900})
    start_session(page, hub.url, query="?name=alice")
    send_prompt(page, "tidy up the greeting helper")
    page.locator(".permission-dialog").wait_for()
    # With the permission dialog open (and the transcript, plan, diff, terminal so far).
    assert axe_problems(page) == []
    page.locator(".permission-dialog button").first.click()
    wait_idle(page)
    assert axe_problems(page) == []


@pytest.mark.parametrize("scheme", SCHEMES)
def test_elicitation_form_and_controls_have_no_serious_violation(
    hub: Hub, new_page: NewPage, scheme: str
) -> None:
    page = new_page(color_scheme=scheme)
    session = start_session(page, hub.url, agent="scripted", query="?name=alice")
    open_as(new_page(), hub.url, session, "?role=driver&name=bob")
    page.wait_for_selector("#lease-grant-to")
    send_prompt(page, "elicit")
    page.locator(".elicitation-dialog").wait_for()
    page.locator(".elicitation-dialog").get_by_role("button", name="Send").click()
    expect(page.locator(".field-error").first).not_to_be_empty()
    page.get_by_role("button", name="Close session").click()
    assert axe_problems(page) == []


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sessions_page_has_no_serious_violation(hub: Hub, new_page: NewPage, scheme: str) -> None:
    page = new_page(color_scheme=scheme)
    start_session(page, hub.url, agent="scripted")
    page.goto(f"{hub.url}/")
    page.wait_for_selector("[data-session-id]")
    assert axe_problems(page) == []


@pytest.mark.parametrize("scheme", SCHEMES)
def test_viewer_and_embed_have_no_serious_violation(
    hub: Hub, new_page: NewPage, scheme: str
) -> None:
    owner = new_page()
    session = start_session(owner, hub.url, agent="scripted")
    send_prompt(owner, "say hello **there**\ntool diff /tmp/x.py\nplan")
    wait_idle(owner)
    viewer = open_as(new_page(color_scheme=scheme), hub.url, session, "?role=viewer")
    wait_idle(viewer)
    assert axe_problems(viewer) == []
    embed = new_page(color_scheme=scheme)
    embed.goto(f"{hub.url}/embed/{session}")
    embed.wait_for_selector("[data-connection=ready]")
    assert axe_problems(embed) == []


def test_the_check_sees_a_violation(hub: Hub, new_page: NewPage) -> None:
    """Not vacuous: an unlabelled input and a button with no text are reported."""
    page = new_page()
    page.goto(f"{hub.url}/")
    page.wait_for_selector("[data-connection=ready], .conn-ready")
    page.evaluate(
        "() => { const box = document.querySelector('main');"
        " box.append(document.createElement('input'), document.createElement('button')); }"
    )
    problems = axe_problems(page)
    assert any(p.startswith("label (critical)") for p in problems), problems
    assert any(p.startswith("button-name (critical)") for p in problems), problems


# Every visible, enabled control of the page gets a mark; Tab is pressed until the focus comes
# back to where it started, and every mark must have had the focus once.
MARK_CONTROLS = """() => {
  const controls = [...document.querySelectorAll(
    'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])')]
    .filter((node) => !node.disabled && node.getClientRects().length > 0
      && getComputedStyle(node).visibility !== 'hidden'
      // The contents of a closed disclosure (the Download and Rules menus) are reached by
      // opening it from its summary, which is itself a control.
      && !(node.closest('details:not([open])') && !node.closest('summary')));
  controls.forEach((node, index) => { node.dataset.control = String(index); });
  return controls.map((node) => `${node.tagName} ${node.textContent.trim().slice(0, 30)}`);
}"""
FOCUSED = "() => document.activeElement?.dataset?.control ?? null"


def tab_through(page: Any) -> list[str]:
    """Press Tab until the focus cycles; the controls that had it, in order."""
    seen: list[str] = []
    for _ in range(400):
        page.keyboard.press("Tab")
        mark = page.evaluate(FOCUSED)
        if mark is not None:
            if seen and mark == seen[0]:
                break
            seen.append(mark)
    return seen


def test_every_control_is_reachable_with_tab(hub: Hub, new_page: NewPage) -> None:
    owner = new_page(viewport={"width": 1280, "height": 900})
    session = start_session(owner, hub.url, agent="scripted", query="?name=alice")
    open_as(new_page(), hub.url, session, "?role=driver&name=bob")
    owner.wait_for_selector("#lease-grant-to")
    send_prompt(owner, "say **hello**\ntool diff /tmp/x.py\nplan")
    wait_idle(owner)
    controls = owner.evaluate(MARK_CONTROLS)
    reached = set(tab_through(owner))
    missed = [name for index, name in enumerate(controls) if str(index) not in reached]
    assert missed == []
    assert len(controls) > 10


def test_keyboard_only_turn_with_a_permission(hub: Hub, new_page: NewPage) -> None:
    """From the sessions page to a finished turn with a permission, with the keyboard alone."""
    page = new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{hub.url}/?name=kim")
    page.wait_for_selector("#new-agent")

    def tab_to(selector: str) -> None:
        for _ in range(60):
            page.keyboard.press("Tab")
            if page.evaluate(f"() => document.activeElement?.matches({json.dumps(selector)})"):
                return
        raise AssertionError(f"Tab never reached {selector}")

    tab_to("#new-agent")
    page.keyboard.type("s")  # the first agent whose name starts with s
    expect(page.locator("#new-agent")).to_have_value("scripted")
    tab_to("#new-cwd")
    page.keyboard.press("Control+a")
    page.keyboard.type(str(ROOT))  # inside the hub's workspace roots
    page.keyboard.press("Enter")
    page.wait_for_url("**/s/**")
    page.wait_for_selector("[data-connection=ready]")

    tab_to("#prompt-input")
    page.keyboard.type("permission")
    page.keyboard.press("Enter")
    # The dialog is announced but does not take the focus: the person moves to it.
    dialog = page.locator(".permission-dialog")
    dialog.wait_for()
    expect(page.locator("#prompt-input")).to_be_focused()
    expect(page.locator(".announcer")).to_contain_text("Permission requested")
    tab_to(".permission-dialog button.option-allow")
    page.keyboard.press("Enter")
    dialog.wait_for(state="detached")
    # ... and gives it back to the prompt box.
    expect(page.locator("#prompt-input")).to_be_focused()
    wait_idle(page)
    expect(page.locator(".msg-agent").last).to_contain_text("permission: selected allow")
    expect(page.locator(".tool").last).to_contain_text("completed")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_phone_session_page_and_its_details_have_no_serious_violation(
    hub: Hub, new_page: NewPage, scheme: str
) -> None:
    # The desktop check's steps, on a phone's viewport.
    page = new_page(color_scheme=scheme, viewport={"width": 375, "height": 812})
    start_session(page, hub.url, query="?name=alice")
    send_prompt(page, "tidy up the greeting helper")
    page.locator(".permission-dialog").wait_for()
    assert axe_problems(page) == []
    page.locator(".permission-dialog button").first.click()
    wait_idle(page)
    page.get_by_role("button", name="Details").click()
    expect(page.locator(".panel-controls")).to_be_visible()
    assert axe_problems(page) == []
