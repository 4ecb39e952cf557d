"""Permission rules on the session page: the owner's "Always allow edit here" in a permission
dialog adds the session rule, the next edit is answered by it without a dialog, the Rules menu
lists it (who added it) and removes it; a viewer's page has no Rules menu."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from playwright.sync_api import expect

from tests.credentials import token
from tests.web.harness import WAIT_MS, Hub, send_prompt, start_session, transcript, wait_idle


# Pages opened as in the other browser tests: the set-up is the scenario's first steps.
def test_always_allow_this_kind_adds_a_rule_that_answers_the_next_request(
    hub: Hub, new_page: Callable[..., Any]
) -> None:
    owner = new_page()
    session = start_session(owner, hub.url, agent="scripted")
    send_prompt(owner, "permission-edit src/first.py")
    dialog = owner.locator(".permission-dialog")
    expect(dialog).to_be_visible(timeout=WAIT_MS)
    owner.click(".permission-dialog button.rules-always")
    expect(owner.locator(".rules-always")).to_contain_text("Rule added", timeout=WAIT_MS)
    owner.click(".permission-dialog .permission-options button:has-text('Allow')")
    wait_idle(owner)
    # The next edit is answered by the rule: no dialog, the agent hears "allow".
    send_prompt(owner, "permission-edit src/second.py")
    # The first turn said it already: wait for the second turn's report.
    owner.wait_for_function(
        "() => document.querySelector('.entries').innerText"
        ".split('permission: selected allow').length > 2",
        timeout=WAIT_MS,
    )
    wait_idle(owner)
    assert transcript(owner).count("permission: selected allow") == 2
    assert owner.locator(".permission-dialog").count() == 0
    # The transcript says which rule answered, and who added it.
    expect(owner.locator(".perm-result").last).to_contain_text("by rule r-", timeout=WAIT_MS)
    assert "(added by" in owner.locator(".perm-result").last.inner_text()
    # The Rules menu lists it, with who added it, and removes it.
    owner.click(".rules-menu > summary")
    item = owner.locator(".rules-item")
    expect(item).to_have_count(1, timeout=WAIT_MS)
    assert "allow kind edit" in item.inner_text()
    assert "added by" in item.inner_text()
    owner.click(".rules-item button.rules-remove")
    expect(owner.locator(".rules-item")).to_have_count(0, timeout=WAIT_MS)
    # A viewer sees no Rules menu.
    viewer = new_page(token=token("viewer", sub="vic", sessions=[session]))
    viewer.goto(f"{hub.url}/s/{session}")
    viewer.wait_for_selector("[data-connection=ready]")
    assert viewer.locator(".rules-menu").count() == 0
