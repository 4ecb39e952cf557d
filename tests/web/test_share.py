"""Share links in the browser: the owner URL ``acp-hub demo`` prints opens the hub as its
owner; the Share dialog creates a viewer link that opens the live session in another browser
(no prompt box: the hub says viewer); revoking the link ends that page with "access revoked".
A page opened with an owner link owns its session but shows no Share dialog: links do not
manage links.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from playwright.sync_api import expect
from websockets.sync.client import connect

from tests.access.test_qr import encodes
from tests.credentials import owner_token
from tests.web.harness import WAIT_MS, Hub, send_prompt, start_session, transcript


def test_owner_url_share_dialog_viewer_link_and_revocation(
    hub: Hub, new_page: Callable[..., Any]
) -> None:
    assert "#token=" in hub.owner_url
    owner = new_page(token=None)  # no credential but the printed URL
    owner.goto(hub.owner_url)
    owner.wait_for_selector(".identity[data-role=owner]")
    # The token left the address bar; the tab keeps it for the pages it opens next.
    assert "token" not in owner.url
    # The same tab keeps the token: the start form opens the new session's page.
    session = start_session(owner, hub.url)
    assert owner.locator(".identity-role").inner_text() == "owner"

    owner.click("button.share-open")
    owner.select_option(".share-role", "viewer")
    owner.fill(".share-label", "for Victor")
    owner.click("button.share-create")
    expect(owner.locator(".share-url")).to_have_value(re.compile("#token="), timeout=WAIT_MS)
    link = owner.locator(".share-url").input_value()
    assert link.startswith(f"{hub.url}/s/{session}#token=")
    # Beside it, the link's QR code for a phone, drawn (and loaded) as an image, with the warning.
    code = owner.locator("img.share-qr-code")
    expect(code).to_be_visible()
    owner.wait_for_function("document.querySelector('img.share-qr-code').naturalWidth > 0")
    src = code.get_attribute("src") or ""
    prefix = "data:image/svg+xml;charset=utf-8,"
    assert src.startswith(prefix)
    assert encodes(unquote(src.removeprefix(prefix)), link)
    warning = owner.locator(".share-qr-warning").inner_text()
    assert "Anyone who scans" in warning
    assert "viewer role" in warning
    owner.wait_for_selector(".share-item[data-state=active]")
    owner.click("button.share-close")

    viewer = new_page(token=None)
    viewer.goto(link)
    viewer.wait_for_selector("[data-connection=ready]")
    assert viewer.locator(".identity-role").inner_text() == "viewer"
    assert "token" not in viewer.url
    # No prompt box and no share button: the hub made this page a viewer's.
    assert viewer.locator("#prompt-input").is_hidden()
    assert viewer.locator("button.share-open").count() == 0
    # The view is live: the owner's prompt appears on the viewer's page.
    send_prompt(owner, "Hello from the owner")
    expect(viewer.locator(".entries")).to_contain_text("Hello from the owner", timeout=WAIT_MS)
    assert "Hello from the owner" in transcript(viewer)

    owner.click("button.share-open")
    owner.click(".share-item[data-state=active] button.share-revoke")
    viewer.wait_for_selector("[data-access=revoked]")
    assert "revoked" in viewer.locator(".access-title").inner_text().lower()
    owner.wait_for_selector(".share-item[data-state=revoked]")
    # Reopening the link is refused the same way.
    again = new_page(token=None)
    again.goto(link)
    again.wait_for_selector("[data-access=revoked]")


def test_a_page_without_a_credential_says_so(hub: Hub, new_page: Callable[..., Any]) -> None:
    page = new_page(token=None)
    page.goto(f"{hub.url}/")
    page.wait_for_selector("[data-access=missing]")
    expired = new_page(token=None)
    expired.goto(f"{hub.url}/#token=not-a-token")
    expired.wait_for_selector("[data-access=malformed]")


def _share_owner_link(hub: Hub, session: str) -> str:
    """An owner link to ``session``, minted over the wire (the dialog offers roles up to driver)."""
    url = hub.url.replace("http://", "ws://", 1) + f"/acp?token={owner_token()}"
    with connect(url) as ws:
        ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"protocolVersion": 2},
                }
            )
        )
        ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "_hub/share/create",
                    "params": {"sessionId": session, "role": "owner", "expiresIn": 600},
                }
            )
        )
        while True:
            answer = json.loads(ws.recv(timeout=WAIT_MS / 1000))
            if answer.get("id") == 2:
                return str(answer["result"]["url"])


def test_an_owner_link_page_owns_the_session_but_shares_no_links(
    hub: Hub, new_page: Callable[..., Any]
) -> None:
    owner = new_page()
    session = start_session(owner, hub.url)
    guest = new_page(token=None)
    guest.goto(_share_owner_link(hub, session))
    guest.wait_for_selector("[data-connection=ready]")
    assert guest.locator(".identity-role").inner_text() == "owner"
    # A link does not manage links: no Share dialog (the hub would refuse it too).
    assert guest.locator("#prompt-input").is_visible()
    assert guest.locator("button.share-open").count() == 0
    assert owner.locator("button.share-open").count() == 1
    # Nor does it start sessions: the sessions page shows it no start form.
    guest.goto(f"{hub.url}/")
    guest.wait_for_selector(".identity[data-role=owner]")
    assert guest.locator("#new-cwd").is_hidden()
    owner.goto(f"{hub.url}/")
    owner.wait_for_selector("#new-cwd")
