"""Agent text is rendered inert: HTML, scripts and unsafe links show as text, never run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.web.harness import Hub, send_prompt, start_session, wait_idle

NewPage = Callable[..., Any]

HOSTILE = (
    "<img src=x onerror=alert(1)> <script>alert(2)</script> "
    "[click me](javascript:alert(3)) <a href=javascript:alert(4)>link</a> "
    "[ok](https://example.com/docs) <iframe src=javascript:alert(5)></iframe>"
)


def test_agent_html_script_and_javascript_links_render_as_text(hub: Hub, new_page: NewPage) -> None:
    page = new_page()
    start_session(page, hub.url, agent="scripted")
    send_prompt(page, f"say {HOSTILE}")
    wait_idle(page)

    agent = page.locator(".msg-agent").last
    text = agent.inner_text()
    # The markup is visible as the characters the agent sent.
    assert "<img src=x onerror=alert(1)>" in text
    assert "<script>alert(2)</script>" in text
    assert "[click me](javascript:alert(3))" in text
    # ... and none of it became an element anywhere in the transcript.
    entries = page.locator(".entries")
    for selector in ("img", "script", "iframe", "a[href^='javascript']", "[onerror]"):
        assert entries.locator(selector).count() == 0, selector
    # The only link is the safe one, opening without opener or referrer.
    links = agent.locator("a")
    assert links.count() == 1
    assert links.first.get_attribute("href") == "https://example.com/docs"
    assert links.first.get_attribute("rel") == "noopener noreferrer"
    assert links.first.get_attribute("target") == "_blank"
    # The user's own message (the same text) is just as inert.
    assert page.locator(".msg-user img, .msg-user script").count() == 0
    # No dialog opened: the new_page fixture fails the test on any alert().
