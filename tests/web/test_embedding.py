"""The widget on host pages: allowed origins get a live, self-sizing session; other origins
are refused by the embed view's CSP (frame-ancestors). The host pages serve docs/embedding.md's
own snippets (``tests/web/harness.py``), with a token minted for the one session as the doc
tells a backend to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.credentials import token

# The shared harness's names, imported by every test module that uses them.
from tests.web.harness import (
    Embedding,
    Hub,
    screenshot,
    send_prompt,
    start_session,
    wait_idle,
)

NewPage = Callable[..., Any]
FRAME_HEIGHT = (
    "() => document.querySelector('acp-session').shadowRoot.querySelector('iframe')"
    ".getBoundingClientRect().height"
)


def _finished_session(hub: Hub, new_page: NewPage) -> str:
    driver = new_page()
    session = start_session(driver, hub.url, query="?name=erin")
    send_prompt(driver, "explain the widget")
    driver.click(".permission-dialog button:has-text('Allow once')")
    wait_idle(driver)
    return session


@pytest.mark.screenshots
def test_widget_on_an_allowed_origin_shows_the_session_and_sizes_itself(
    hub: Hub, embedding: Embedding, new_page: NewPage
) -> None:
    session = _finished_session(hub, new_page)
    host = new_page(viewport={"width": 900, "height": 800})
    # A listener on the document hears the element's resize events: they bubble (and leave
    # a shadow root, composed).
    host.add_init_script(
        "document.addEventListener('acp-session:resize', (event) => {"
        " window.resized = event.detail.height; });"
    )
    viewer = token("viewer", sub="widget-reader", sessions=[session], ttl=600)
    host.goto(embedding.allowed.page(hub.url, session, token=viewer))
    frame = host.frame_locator("acp-session iframe")
    frame.locator("[data-connection=ready]").wait_for()
    frame.locator(".msg-agent").last.wait_for()
    assert "explain the widget" in frame.locator(".entries").inner_text()
    # role="viewer" on the element: read-only.
    assert frame.locator("#prompt-input").is_hidden()
    # The embed view reported its height; the iframe grew past its initial 240 px, up to
    # the element's max-height (640 in the doc's snippet).
    host.wait_for_function(f"({FRAME_HEIGHT})() > 240")
    assert host.evaluate(FRAME_HEIGHT) <= 640
    host.wait_for_function(f"window.resized === ({FRAME_HEIGHT})()")
    screenshot(host, "widget.png")


def test_widget_on_another_origin_is_refused(
    hub: Hub, embedding: Embedding, new_page: NewPage
) -> None:
    session = _finished_session(hub, new_page)
    host = new_page()
    with host.expect_console_message(lambda message: "frame-ancestors" in message.text) as info:
        host.goto(embedding.refused.page(hub.url, session))
    assert "has been blocked" in info.value.text
    # No frame of the page holds the session view.
    for frame in host.frames:
        assert frame.evaluate("document.querySelector('.session-app') === null")


def test_the_documented_plain_iframe_shows_the_session_and_posts_its_height(
    hub: Hub, embedding: Embedding, new_page: NewPage
) -> None:
    session = _finished_session(hub, new_page)
    host = new_page(viewport={"width": 900, "height": 800})
    host.add_init_script(
        "window.addEventListener('message', (event) => {"
        " if (event.data && event.data.type === 'acp-hub:height')"
        " window.height = event.data.height;"
        " });"
    )
    viewer = token("viewer", sub="iframe-reader", sessions=[session], ttl=600)
    host.goto(embedding.allowed.page(hub.url, session, token=viewer, path="/iframe"))
    frame = host.frame_locator("iframe")
    frame.locator("[data-connection=ready]").wait_for()
    frame.locator(".msg-agent").last.wait_for()
    assert "explain the widget" in frame.locator(".entries").inner_text()
    # role=viewer in the frame's URL: read-only.
    assert frame.locator("#prompt-input").is_hidden()
    host.wait_for_function("window.height > 0")
