"""Helpers of the browser tests: the hub handle, host pages for the widget, a TCP proxy
that can cut connections, and page actions shared by the tests."""

from __future__ import annotations

import os
import re
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support import ROOT

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "docs" / "screenshots"
"""Where ``make screenshots`` writes the documentation's screenshots."""
SCREENSHOTS_ENV = "ACP_HUB_SCREENSHOTS"
"""The directory the marked tests save their screenshots in; unset, they save none."""
SCRIPTED = ROOT / "tests" / "agents" / "scripted_agent.py"
HOSTILE = ROOT / "tests" / "agents" / "hostile_agent.py"
WAIT_MS = 20_000
"""Playwright's default wait, in milliseconds."""


@dataclass
class Hub:
    url: str
    owner_url: str = ""
    """The owner URL the hub printed (``#token=…``)."""


EMBEDDING_DOC = ROOT / "docs" / "embedding.md"
DOC_HUB = "https://hub.example.com"
"""The hub's URL in docs/embedding.md's snippets, which the host pages replace by the test hub's."""
DOC_SESSION = "s-5f2a0c1d9e8b7a64"


def embedding_snippet(marker: str) -> str:
    """The ``html`` block of docs/embedding.md that contains ``marker`` (``<acp-session`` for
    the widget, ``<iframe`` for the plain frame): the host pages serve the documented snippet
    itself, so that the docs show what works."""
    text = EMBEDDING_DOC.read_text()
    found: list[str] = re.findall(r"```html\n(.*?)```", text, re.DOTALL)
    (block,) = [b for b in found if marker in b]
    return block


HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Host application</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; margin: 24px; max-width: 760px">
<h1>Our product page</h1>
<p>The agent session below is live, served by acp-hub.</p>
<p><label>Notes on this page <input id="host-notes"></label></p>
{snippet}
</body></html>
"""


def host_page(snippet: str, hub: str, session: str, role: str, token: str) -> str:
    """The host page around docs/embedding.md's ``snippet``, its placeholders filled in: the
    hub, the session, the role; the token where one is given, else the widget's ``token``
    attribute left out (the embed view then uses the credential its origin already holds)."""
    snippet = snippet.replace(DOC_HUB, hub).replace(DOC_SESSION, session)
    snippet = re.sub(r'role="viewer"', f'role="{role}"', snippet)
    snippet = snippet.replace("role=viewer", f"role={role}")
    if token:
        snippet = snippet.replace("TOKEN-MINTED-BY-YOUR-BACKEND", token)
        snippet = snippet.replace("token=TOKEN", f"token={token}")
    else:
        snippet = re.sub(r'\n\s*token="[^"]*"', "", snippet)
        snippet = snippet.replace("token=TOKEN&", "")
    return HOST_PAGE.format(snippet=snippet)


class HostPages:
    """An HTTP server on its own loopback port (its own origin) whose page embeds a session
    with docs/embedding.md's widget snippet: ``/?hub=URL&session=ID`` (``&role=ROLE``: the
    element's role, ``viewer`` unless given; ``&token=T``: the element's token), or with its
    plain-iframe snippet at ``/iframe?...``; above it an input of the host page's own
    (``#host-notes``)."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                hub = query.get("hub", [""])[0]
                session = query.get("session", [""])[0]
                role = query.get("role", ["viewer"])[0]
                token = query.get("token", [""])[0]
                if (
                    not re.fullmatch(r"http://127\.0\.0\.1:\d+", hub)
                    or not re.fullmatch(r"[A-Za-z0-9_.-]+", session)
                    or role not in ("viewer", "approver", "driver", "owner")
                    or not re.fullmatch(r"[A-Za-z0-9_.-]*", token)
                ):
                    self.send_error(400)
                    return
                marker = "<iframe" if urlsplit(self.path).path == "/iframe" else "<acp-session"
                snippet = embedding_snippet(marker)
                body = host_page(snippet, hub, session, role, token).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def page(
        self, hub: str, session: str, role: str = "viewer", token: str = "", path: str = "/"
    ) -> str:
        page = f"{self.origin}{path}?hub={hub}&session={session}&role={role}"
        return f"{page}&token={token}" if token else page

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Embedding:
    allowed: HostPages
    refused: HostPages


class TcpProxy:
    """A loopback TCP proxy in front of the hub whose ``sever()`` cuts every open connection
    abruptly (the browser sees the WebSocket close with 1006), as a network drop would."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.sockets += [client, upstream]
                self.accepted += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def sever(self) -> None:
        """Cut every connection open now."""
        with self.lock:
            doomed, self.sockets = self.sockets, []
        for sock in doomed:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self.listener.close()
        self.sever()


def start_session(page: Any, hub_url: str, agent: str = "demo", query: str = "") -> str:
    """Start a session from the sessions page's form; the page ends on the session page."""
    page.goto(f"{hub_url}/{query}")
    page.select_option("#new-agent", agent)
    page.fill("#new-cwd", str(ROOT))
    page.click("text=Start session")
    page.wait_for_url("**/s/**")
    page.wait_for_selector("[data-connection=ready]")
    return str(page.url.split("/s/")[1].split("?")[0])


def open_as(page: Any, hub_url: str, session: str, query: str) -> Any:
    """Open ``session``'s page in ``page`` with ``query`` (``?role=viewer&name=bob``, say) and
    wait until it is connected."""
    page.goto(f"{hub_url}/s/{session}{query}")
    page.wait_for_selector("[data-connection=ready]")
    return page


def send_prompt(page: Any, text: str) -> None:
    """Type a prompt and send it with Enter."""
    page.fill("#prompt-input", text)
    page.press("#prompt-input", "Enter")


def wait_idle(page: Any, timeout: float = WAIT_MS) -> None:
    """Wait until the session's foreground state is idle with a stop reason."""
    page.wait_for_selector(".state-badge.state-idle", timeout=timeout)


def transcript(page: Any) -> str:
    """The visible text of the conversation (messages, tool calls, terminals)."""
    return str(page.locator(".entries").inner_text())


def screenshot(target: Any, name: str) -> Path | None:
    """Save the documentation screenshot ``name`` of ``target`` (a page or a locator), with the
    sessions' directories hidden, into the directory ``ACP_HUB_SCREENSHOTS`` names:
    ``make screenshots`` sets it to ``docs/screenshots``. A plain test run writes nothing (tests
    never write the checkout's files). The path written, or ``None``."""
    directory = os.environ.get(SCREENSHOTS_ENV)
    if not directory:
        return None
    path = Path(directory) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    hide_paths(getattr(target, "page", target))
    target.screenshot(path=str(path))
    return path


def hide_paths(page: Any) -> None:
    """Before a screenshot: hide the directories sessions run in and write the checkout's path
    as ``~/project`` (it tells a reader of the documentation nothing). Through the CSSOM and
    the DOM, which the pages' CSP allows."""
    for frame in page.frames:  # embedded sessions too
        frame.evaluate(
            "() => { for (const node of document.querySelectorAll("
            "'.card-cwd, .terminal-cwd, .permission-cwd')) node.style.visibility = 'hidden'; }"
        )
        # The checkout's path in the agent's text (a diff's file name, say) reads as a project's.
        frame.evaluate(
            """(root) => {
              const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
              for (let text = walker.nextNode(); text; text = walker.nextNode()) {
                const value = text.nodeValue;
                if (value.includes(root)) text.nodeValue = value.replaceAll(root, '~/project');
              }
              for (const input of document.querySelectorAll('input')) {
                const value = input.value;
                if (value.includes(root)) input.value = value.replaceAll(root, '~/project');
              }
            }""",
            str(ROOT),
        )
