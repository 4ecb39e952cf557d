"""Fixtures of the browser tests: a real hub subprocess, Debian's Chromium, host pages.

The hub runs as ``acp-hub demo --port 0`` (the built-in demo agent in fast mode) with the
project's scripted agent as a second agent and one embedding origin allowed; Chromium is
driven by Playwright's sync API.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.credentials import hub_env, owner_token
from tests.hubproc import BANNER
from tests.support import ROOT, require_binary
from tests.web.harness import (
    CHROMIUM_ARGS,
    HOSTILE,
    SCRIPTED,
    WAIT_MS,
    Embedding,
    HostPages,
    Hub,
)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    return require_binary("chromium")


@pytest.fixture(scope="session")
def embedding() -> Iterator[Embedding]:
    allowed, refused = HostPages(), HostPages()
    try:
        yield Embedding(allowed, refused)
    finally:
        allowed.close()
        refused.close()


@pytest.fixture(scope="session")
def hub(embedding: Embedding, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """``acp-hub demo --port 0`` with the scripted agent (twice: ``scripted``, and ``resumable``,
    which keeps its sessions on disk so that a new process takes them back), the hostile agent
    (``hostile``, ``tests/agents/hostile_agent.py``), one allowed embedding origin,
    ``presence_viewers = 1`` and ``list_page_size = 2``."""
    config = tmp_path_factory.mktemp("hub") / "acp-hub.toml"
    # One listed viewer at most, so that a test can see an audience counted, not listed; two
    # sessions a page, so that the pages those lists and the dashboard follow are many.
    config.write_text(
        f'[hub]\nembed_origins = ["{embedding.allowed.origin}"]\npresence_viewers = 1\n'
        "list_page_size = 2\n"
    )
    scripted = shlex.join([sys.executable, str(SCRIPTED), "--protocol", "2"])
    agent_state = config.parent / "agent-state"
    agent_state.mkdir()
    resumable = shlex.join(
        [sys.executable, str(SCRIPTED), "--protocol", "2", "--state-dir", str(agent_state)]
    )
    command = [
        sys.executable,
        "-m",
        "hub.cli",
        "demo",
        "--port",
        "0",
        "--config",
        str(config),
        "--agent",
        f"scripted={scripted}",
        "--agent",
        f"resumable={resumable}",
        "--agent",
        f"hostile={shlex.join([sys.executable, str(HOSTILE), '--protocol', '2'])}",
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "ACP_HUB_DEMO_FAST": "1", **hub_env(config.parent / "state")}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert process.stdout is not None
    url = owner_url = None
    # The first line announces the address, a later one the owner URL (with its token), as
    # `make demo` prints them; at EOF (the hub died) the loop ends.
    for line in process.stdout:
        match = BANNER.match(line)
        if match:
            url = match.group(1)
        owner = re.match(r"acp-hub: owner URL: (http://\S+)", line)
        if owner:
            owner_url = owner.group(1)
            break
    stdout = process.stdout
    # Keep draining stdout so the hub never blocks on a full pipe.
    drain = threading.Thread(target=stdout.read, daemon=True)
    drain.start()
    try:
        if url is None:
            pytest.fail(f"the hub did not start (exit {process.wait()})")
        yield Hub(url, owner_url or "")
    finally:
        # Stopped as test_bench_quick.py's process: a subprocess.Popen each, not anyio.
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        drain.join(timeout=10)
        stdout.close()


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    """Chromium, for the tests of one module. Playwright's sync API keeps an event loop running
    in this thread while it lives, which no asyncio test of the same process could run beside:
    it ends with the module (under ``pytest-xdist`` each browser module runs on one worker, see
    ``GROUPED_BY_FILE`` in ``tests/conftest.py``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def new_page(browser: Any) -> Iterator[Callable[..., Any]]:
    """Open pages, each in its own browser context (own storage and sockets). A page error or
    any JavaScript dialog (alert, confirm) fails the test.

    Each context starts with the test owner token in its tabs' ``sessionStorage`` (where a
    page keeps the token of the link that opened it), unless ``token=`` says otherwise
    (``token=None``: no credential at all)."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(*, token: str | None = owner_token(), **options: Any) -> Any:
        context = browser.new_context(**options)
        context.set_default_timeout(WAIT_MS)
        if token is not None:
            context.add_init_script(
                script=f"""try {{
                    if (!sessionStorage.getItem('acp-hub.token'))
                        sessionStorage.setItem('acp-hub.token', {json.dumps(token)});
                }} catch (e) {{}}"""
            )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"page error: {error}"))

        def on_dialog(dialog: Any) -> None:
            errors.append(f"dialog opened: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        return page

    yield make
    for context in contexts:
        context.close()
    assert not errors, errors


@pytest.fixture(scope="module")
def module_page(browser: Any, hub: Hub) -> Iterator[Any]:
    """A page on the hub's origin with none of the UI running (a style sheet is its document),
    for tests that import the UI's modules with ``await import('/static/...')`` and call them
    under the hub's own Content-Security-Policy. Shared by the tests of a module."""
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{hub.url}/static/app.css")
    try:
        yield page
    finally:
        context.close()
    assert not errors, errors
