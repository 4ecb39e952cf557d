"""What a person trying the hub for the first time meets in the browser: the demo agent's
plan and diff read cleanly after several turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support import ROOT
from tests.web.harness import Hub, send_prompt, start_session, wait_idle

NewPage = Callable[..., Any]


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
