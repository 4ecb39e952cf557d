"""The session page's controls against the real hub and the scripted agent: elicitation forms,
the prompt lease, the queue, the session's policies, close and delete, and the agent's state in
words. Several people are several browser contexts (their own sockets)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.harness import Hub, open_as, screenshot, send_prompt, start_session, wait_idle

NewPage = Callable[..., Any]

SCHEMA = {
    "type": "object",
    "title": "Release details",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 20},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 9},
        "ratio": {"type": "number", "title": "Ratio", "minimum": 0, "maximum": 1},
        "notify": {"type": "boolean", "title": "Notify the team", "default": True},
        "region": {
            "type": "string",
            "title": "Region",
            "oneOf": [{"const": "eu", "title": "Europe"}, {"const": "us", "title": "Americas"}],
        },
        "tier": {"type": "string", "title": "Tier", "enum": ["free", "pro"]},
        "targets": {
            "type": "array",
            "title": "Targets",
            "items": {
                "anyOf": [{"const": "web", "title": "Web"}, {"const": "cli", "title": "CLI"}]
            },
            "minItems": 1,
        },
        "note": {"type": "string", "title": "Note"},
    },
    "required": ["name", "email", "replicas", "region", "targets"],
}


def agent_said(page: Any, text: str) -> None:
    expect(page.locator(".msg-agent").last).to_contain_text(text)


@pytest.mark.screenshots
def test_elicitation_form_validates_then_sends_exactly_the_values(
    hub: Hub, new_page: NewPage
) -> None:
    page = new_page(viewport={"width": 1280, "height": 1600})
    start_session(page, hub.url, agent="scripted", query="?name=alice")
    send_prompt(page, f"elicit {json.dumps(SCHEMA)}")
    form = page.locator(".elicitation-dialog")
    form.wait_for()
    expect(form.locator(".elicitation-title")).to_have_text("Release details")
    expect(form.locator(".elicitation-message")).to_have_text("Which name should the greeting use?")
    # The form does not take the focus (the prompt box keeps it): the person moves to it.
    expect(page.locator("#prompt-input")).to_be_focused()

    page.get_by_label("Name").fill("Zed")
    page.get_by_label("Email").fill("not-an-address")
    page.get_by_label("Replicas").fill("12")
    page.get_by_label("Ratio").fill("0.5")
    page.get_by_label("Region").select_option("eu")
    page.get_by_label("Web").check()
    form.get_by_role("button", name="Send").click()
    # Refused in the page: two errors shown by their fields, focus on the first; nothing sent.
    expect(form.locator("[data-field=email] .field-error")).to_have_text("Enter an email address.")
    expect(form.locator("[data-field=replicas] .field-error")).to_have_text("At most 9.")
    expect(page.get_by_label("Email")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Email")).to_be_focused()
    expect(form.locator(".elicitation-status")).to_have_text("2 fields need attention.")
    screenshot(form, "elicitation-form.png")
    assert "elicit:" not in page.locator(".entries").inner_text()

    page.get_by_label("Email").fill("zed@example.com")
    page.get_by_label("Replicas").fill("3")
    form.get_by_role("button", name="Send").click()
    form.wait_for(state="detached")
    wait_idle(page)
    report = page.locator(".msg-agent .msg-body").last.inner_text().strip()
    assert report.startswith("elicit: accept ")
    # Exactly the values, typed as the schema says; the empty optional fields are left out.
    assert json.loads(report.removeprefix("elicit: accept ")) == {
        "name": "Zed",
        "email": "zed@example.com",
        "replicas": 3,
        "ratio": 0.5,
        "notify": True,
        "region": "eu",
        "targets": ["web"],
    }
    # Focus went back to where it was (the prompt box).
    expect(page.locator("#prompt-input")).to_be_focused()


def test_elicitation_decline_and_cancel(hub: Hub, new_page: NewPage) -> None:
    page = new_page()
    start_session(page, hub.url, agent="scripted")
    send_prompt(page, "elicit")
    page.locator(".elicitation-dialog").get_by_role("button", name="Decline").click()
    wait_idle(page)
    agent_said(page, "elicit: decline")
    send_prompt(page, "elicit")
    dialog = page.locator(".elicitation-dialog")
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    agent_said(page, "elicit: cancel")
    # Escape answers nothing: it leaves the form, for the prompt box.
    send_prompt(page, "elicit")
    page.get_by_label("Name").press("Escape")
    expect(page.locator("#prompt-input")).to_be_focused()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="detached")
    wait_idle(page)
    expect(page.locator(".msg-agent")).to_have_count(3)
    agent_said(page, "elicit: cancel")


@pytest.mark.screenshots
def test_lease_queue_withdraw_and_grant_between_two_drivers(hub: Hub, new_page: NewPage) -> None:
    alice = new_page(viewport={"width": 1280, "height": 1200})
    session = start_session(alice, hub.url, agent="scripted", query="?name=alice")
    bob = open_as(new_page(), hub.url, session, "?role=driver&name=bob")
    alice.wait_for_selector(".presence-client:has-text('bob')")

    # Alice takes the lease; both pages say who holds it.
    alice.get_by_role("button", name="Take the lease").click()
    expect(alice.locator(".lease-holder")).to_contain_text("Lease: alice (you), until ")
    expect(bob.locator(".lease-holder")).to_contain_text("Lease: alice")
    expect(bob.get_by_role("button", name="Take the lease")).to_be_disabled()
    # A driver has no owner controls.
    assert bob.locator("#policy-prompt, .session-controls, #lease-grant-to").count() == 0

    # Alice's turn waits on a permission; bob's prompt queues behind it; he withdraws it.
    send_prompt(alice, "permission")
    alice.locator(".permission-dialog").wait_for()
    send_prompt(bob, "say from bob")
    for page in (alice, bob):
        page.wait_for_selector(".queue-entry:has-text('say from bob')")
    bob.get_by_role("button", name="Withdraw queued prompt: say from bob").click()
    for page in (alice, bob):
        page.wait_for_selector(".panel-queue", state="hidden")
    alice.locator(".permission-dialog").get_by_role("button", name="Allow once").click()
    wait_idle(alice)

    # The owner makes the lease decide who prompts, then gives it to bob.
    alice.select_option("#policy-prompt", "lease")
    expect(bob.locator(".policy")).to_contain_text("Prompts: lease")
    alice.select_option("#lease-grant-to", label="bob (driver)")
    alice.get_by_role("button", name="Give").click()
    expect(bob.locator(".lease-holder")).to_contain_text("Lease: bob (you)")
    expect(alice.locator(".lease-holder")).to_contain_text("Lease: bob")
    screenshot(alice.locator(".panel-controls"), "lease-controls.png")
    # Now only bob prompts: alice is refused, with the reason under her prompt box.
    send_prompt(alice, "say from alice")
    expect(alice.locator(".composer-error")).to_contain_text("lease")
    send_prompt(bob, "say bob holds it")
    wait_idle(bob)
    agent_said(alice, "bob holds it")
    user = alice.locator(".msg-user").last
    expect(user.locator(".msg-who")).to_have_text("bob · driver")
    # Bob gives it back.
    bob.get_by_role("button", name="Release the lease").click()
    expect(alice.locator(".lease-holder")).to_have_text("Lease: nobody holds it")


def test_owner_withdraws_anyones_queued_prompt(hub: Hub, new_page: NewPage) -> None:
    alice = new_page()
    session = start_session(alice, hub.url, agent="scripted", query="?name=alice")
    bob = open_as(new_page(), hub.url, session, "?role=driver&name=bob")
    send_prompt(alice, "permission")
    alice.locator(".permission-dialog").wait_for()
    send_prompt(bob, "say queued by bob")
    entry = alice.locator(".queue-entry:has-text('queued by bob')")
    entry.get_by_role("button").click()
    bob.wait_for_selector(".panel-queue", state="hidden")
    alice.locator(".permission-dialog").get_by_role("button", name="Reject").click()
    wait_idle(alice)
    assert "queued by bob" not in alice.locator(".entries").inner_text()


def test_close_and_delete_with_confirmation_reach_other_pages(hub: Hub, new_page: NewPage) -> None:
    for verb, button in (("closed", "Close session"), ("deleted", "Delete session")):
        owner = new_page()
        session = start_session(owner, hub.url, agent="scripted", query="?name=alice")
        viewer = open_as(new_page(), hub.url, session, "?role=viewer&name=carol")
        # A viewer has no controls at all.
        expect(viewer.locator(".panel-controls")).to_be_hidden()
        owner.get_by_role("button", name=button).click()
        # Nothing happens before the confirmation; "Keep it" has the focus.
        expect(owner.get_by_role("button", name="Keep it").first).to_be_focused()
        owner.get_by_role("button", name="Keep it").first.click()
        expect(viewer.locator(".state-badge")).not_to_have_text("closed")
        owner.get_by_role("button", name=button).click()
        owner.get_by_role("button", name=f"{'Close' if verb == 'closed' else 'Delete'} it").click()
        for page in (owner, viewer):
            expect(page.locator(".state-badge")).to_have_text("closed")
        expect(viewer.locator(".panel-status .closed")).to_have_text(
            f"This session was {verb} by alice."
        )
        expect(owner.locator(".panel-status .closed")).to_have_text(
            f"This session was {verb} by you."
        )
        assert owner.locator("#prompt-input").is_hidden()
        # The page does not try to resume a session that is gone.
        expect(viewer.locator("[data-connection=closed]")).to_have_count(1)


def test_agent_exit_and_lost_session_explained_in_words(hub: Hub, new_page: NewPage) -> None:
    page = new_page()
    start_session(page, hub.url, agent="scripted")
    send_prompt(page, "crash")
    status = page.locator(".agent-status")
    expect(status).to_contain_text("exited with code 3")
    expect(status).to_contain_text("starts again with the next prompt")
    # The scripted agent keeps no state across processes: the new one cannot take the
    # session back, and the page says what that means.
    send_prompt(page, "say back again")
    expect(status).to_contain_text("restarted but could not take this session back")
    expect(status).to_contain_text("cannot be prompted any more")
    expect(page.locator(".composer-error")).not_to_be_empty()


def test_agent_restart_that_takes_the_session_back_explained_in_words(
    hub: Hub, new_page: NewPage
) -> None:
    page = new_page()
    start_session(page, hub.url, agent="resumable")
    send_prompt(page, "crash")
    status = page.locator(".agent-status")
    expect(status).to_contain_text("exited with code 3")
    send_prompt(page, "say back again")
    expect(status).to_contain_text("was restarted and took this session back")
    expect(status).to_contain_text("the conversation continues")
    wait_idle(page)
    agent_said(page, "back again")


def test_replay_shows_its_progress(hub: Hub, new_page: NewPage) -> None:
    writer = new_page()
    session = start_session(writer, hub.url, agent="scripted")
    # A long history from a long prompt: the text is put in the prompt box at once (typing
    # 13 KB through fill takes tens of seconds on a busy machine), then sent with Enter.
    writer.locator("#prompt-input").evaluate(
        "(box, text) => { box.value = text; box.dispatchEvent(new Event('input')); }",
        "\n".join(["say line"] * 1500),
    )
    writer.press("#prompt-input", "Enter")
    wait_idle(writer)
    reader = new_page()
    # Record every text the progress indicator shows while the page loads.
    reader.add_init_script(
        """
        window.__replay = [];
        new MutationObserver(() => {
          const node = document.querySelector('.replay-text');
          if (node && !node.closest('[hidden]') && node.textContent) {
            window.__replay.push(node.textContent);
          }
        }).observe(document, {
          subtree: true, childList: true, characterData: true, attributes: true,
        });
        """
    )
    open_as(reader, hub.url, session, "")
    expect(reader.locator("#app")).to_have_attribute("data-replay", "done")
    seen = reader.evaluate("window.__replay")
    assert any(text.startswith("Loading the session: ") for text in seen), seen
    assert reader.locator(".replay").is_hidden()
