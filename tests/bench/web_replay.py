"""The browser against a long session: time to the first paint of the replayed state, and the
longest main-thread task, for a session of 100,000 updates (``docs/benchmarks.md``, "Web UI").

    PYTHONPATH=. .venv/bin/python -m tests.bench.web_replay [--loads 3]

A hub subprocess (``acp-hub demo`` with the scripted agent, signing with the test key) and
Debian's Chromium through Playwright, as in ``tests/web``. One page streams a turn of 90,000
chunks of one message and 10,000 short messages (100,000 agent updates) and leaves; then each
load opens the session in a fresh browser context and records, from the browser's own clocks:

- ``first_paint_ms``: navigation start to the first animation frame after the page holds the
  whole replayed state (the resume answered, ``data-replay="done"``), i.e. the first frame
  that shows it;
- ``longest_task_ms``: the longest main-thread task during the load (``longtask`` entries; the
  browser reports tasks over 50 ms only), and again while the reader reveals three earlier
  windows and scrolls the transcript to the top and back.

Then the dashboard with ``--sessions`` sessions (200 by default, opened over plain WebSocket
clients as two principals), a tenth of them streaming: ``dashboard_first_paint_ms`` (navigation
start to the frame after every card is drawn) and ``dashboard_longest_task_ms`` while they
stream.

The figures are printed as JSON; nothing is asserted (``tests/web/test_long_session.py`` is the
test that the page stays smooth).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright
from websockets.sync.client import connect

from tests.credentials import bearer, hub_env, owner_token, token
from tests.hubproc import BANNER
from tests.support import ROOT
from tests.web.harness import CHROMIUM_ARGS, SCRIPTED
from tests.web.test_long_session import CHUNKS, LONG_TASKS, MESSAGES

# The session of tests/web/test_long_session.py, its long tasks recorded the same way.
OBSERVE = (
    LONG_TASKS
    + """window.__painted = null;
new MutationObserver(() => {
  const app = document.getElementById('app');
  if (window.__painted === null && app && app.dataset.replay === 'done') {
    window.__painted = 0;
    requestAnimationFrame(() => { window.__painted = performance.now(); });
  }
}).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-replay'] });
"""
)


def start_hub(state: Path) -> tuple[subprocess.Popen[str], str]:
    scripted = shlex.join([sys.executable, str(SCRIPTED), "--protocol", "2"])
    command = [
        sys.executable, "-m", "hub.cli", "demo", "--port", "0",
        "--agent", f"scripted={scripted}", "--log-level", "warning",
    ]  # fmt: skip
    env = {**os.environ, "ACP_HUB_DEMO_FAST": "1", **hub_env(state)}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert process.stdout is not None
    for line in process.stdout:
        match = BANNER.match(line)
        if match:
            threading.Thread(target=process.stdout.read, daemon=True).start()
            return process, match.group(1)
    raise SystemExit(f"the hub did not start (exit {process.wait()})")


def context(browser: Any) -> Any:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(300_000)
    token = json.dumps(owner_token())
    ctx.add_init_script(script=f"sessionStorage.setItem('acp-hub.token', {token});")
    return ctx


def open_sessions(url: str, count: int, streaming: int) -> list[str]:
    """``count`` sessions on the scripted agent, half per principal (the per-principal cap is
    100); the first ``streaming`` get a long turn, not waited for."""
    ws_url = url.replace("http://", "ws://") + "/acp"
    sessions: list[str] = []
    for principal in ("bench-a", "bench-b"):
        headers = bearer(token("owner", sub=principal))
        with connect(ws_url, additional_headers=headers, max_size=None) as ws:
            calls = 0

            def call(method: str, params: dict[str, Any]) -> Any:
                nonlocal calls
                calls += 1
                ws.send(
                    json.dumps({"jsonrpc": "2.0", "id": calls, "method": method, "params": params})
                )
                while True:
                    message = json.loads(ws.recv())
                    if isinstance(message, dict) and message.get("id") == calls:
                        return message.get("result")

            call("initialize", {"protocolVersion": 2, "info": {"name": "bench", "version": "1"}})
            for _ in range(count // 2):
                result = call(
                    "session/new",
                    {
                        "cwd": str(ROOT),
                        "mcpServers": [],
                        "_meta": {"acp-hub": {"agent": "scripted"}},
                    },
                )
                sessions.append(result["sessionId"])
            for session in sessions[-(count // 2) :][: streaming // 2]:
                call(
                    "session/prompt",
                    {"sessionId": session, "prompt": [{"type": "text", "text": "slow 400 50"}]},
                )
    return sessions


DASHBOARD = """
window.__longTasks = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__longTasks.push(entry.duration);
}).observe({ type: 'longtask', buffered: true });
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_hub(Path(tmp))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
                )
                sender_ctx = context(browser)
                sender = sender_ctx.new_page()
                sender.goto(f"{url}/")
                sender.select_option("#new-agent", "scripted")
                sender.fill("#new-cwd", str(ROOT))
                sender.click("text=Start session")
                sender.wait_for_url("**/s/**")
                session = sender.url.split("/s/")[1].split("?")[0]
                sender.wait_for_selector("[data-connection=ready]")
                text = "\n".join([f"stream {CHUNKS} 8", *(["say x"] * MESSAGES)])
                sender.eval_on_selector("#prompt-input", "(el, v) => { el.value = v; }", text)
                sender.press("#prompt-input", "Enter")
                sender.locator(".msg-user").wait_for()
                sender_ctx.close()
                watch_ctx = context(browser)
                watch = watch_ctx.new_page()
                watch.goto(f"{url}/")
                watch.wait_for_selector(
                    f".card[data-session-id='{session}'] .state-badge:has-text('end turn')"
                )
                watch_ctx.close()

                loads = []
                for _ in range(args.loads):
                    ctx = context(browser)
                    page = ctx.new_page()
                    page.add_init_script(OBSERVE)
                    page.goto(f"{url}/s/{session}")
                    # (Polled with evaluate: the page's CSP forbids the eval of wait_for_function.)
                    while not page.evaluate("window.__painted > 0"):
                        page.wait_for_timeout(50)
                    painted = page.evaluate("window.__painted")
                    load_tasks = page.evaluate("window.__longTasks")
                    seq = page.locator(".entries > .entry").count()
                    page.evaluate("window.__longTasks = []")
                    for _ in range(3):
                        page.click("button.earlier")
                    page.evaluate(
                        "async () => { const t = document.querySelector('.timeline');"
                        " t.scrollTop = 0; await new Promise(r => requestAnimationFrame(r));"
                        " t.scrollTop = t.scrollHeight;"
                        " await new Promise(r => requestAnimationFrame(r)); }"
                    )
                    scroll_tasks = page.evaluate("window.__longTasks")
                    loads.append(
                        {
                            "first_paint_ms": round(painted),
                            "longest_task_ms": round(max(load_tasks, default=0)),
                            "long_tasks": len(load_tasks),
                            "drawn_entries": seq,
                            "reveal_scroll_longest_task_ms": round(max(scroll_tasks, default=0)),
                        }
                    )
                    ctx.close()

                open_sessions(url, args.sessions, args.sessions // 10)
                ctx = context(browser)
                page = ctx.new_page()
                page.add_init_script(DASHBOARD)
                page.goto(f"{url}/")
                # Every card drawn (the long session of the first part makes one more).
                while page.locator(".card").count() < args.sessions + 1:
                    page.wait_for_timeout(20)
                dashboard_paint = page.evaluate(
                    "new Promise(r => requestAnimationFrame(() => r(performance.now())))"
                )
                load_tasks = page.evaluate("window.__longTasks")
                page.evaluate("window.__longTasks = []")
                page.wait_for_timeout(10_000)  # ten seconds of streaming cards
                stream_tasks = page.evaluate("window.__longTasks")
                running = page.locator(".card[data-state=running]").count()
                ctx.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=10)
    summary = {
        "updates": CHUNKS + MESSAGES,
        "loads": loads,
        "first_paint_ms_median": statistics.median(x["first_paint_ms"] for x in loads),
        "longest_task_ms_max": max(x["longest_task_ms"] for x in loads),
        "dashboard_sessions": args.sessions + 1,
        "dashboard_first_paint_ms": round(dashboard_paint),
        "dashboard_load_longest_task_ms": round(max(load_tasks, default=0)),
        "dashboard_streaming_cards_at_end": running,
        "dashboard_longest_task_ms": round(max(stream_tasks, default=0)),
        "dashboard_long_tasks": len(stream_tasks),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
