"""The pure parts beside the core: the reconnect's backoff, reading ``session/list`` for a
turn's end, and the core staying free of I/O and of import cycles."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from hub.bridge.backoff import BACKOFF_FIRST, BACKOFF_MAX, Backoff, gone
from hub.bridge.prompts import Listing, read_listing, turn_over_known
from hub.bridge.tracking import PromptWait, Tracked
from hub.protocol.errors import RpcError
from tests.protocol.test_purity import FORBIDDEN, imported_roots
from tests.test_layers import imports_of, is_module, module_name

BRIDGE = Path(__file__).resolve().parents[2] / "hub" / "bridge"
IO_MODULES = {"hub.bridge.editor", "hub.bridge.link", "hub.bridge.relay"}
"""The bridge's I/O; everything else in ``hub.bridge`` is its sans-I/O core."""


def test_backoff_doubles_up_to_its_cap_and_gives_up_at_the_window() -> None:
    backoff = Backoff(100.0, window=10.0)
    delays = []
    now = 100.0
    while (delay := backoff.retry_after(now, fatal=False)) is not None:
        delays.append(delay)
        now += delay
    assert delays[:3] == [BACKOFF_FIRST, 2 * BACKOFF_FIRST, 4 * BACKOFF_FIRST]
    assert max(delays) == BACKOFF_MAX
    assert now <= 110.0 < now + backoff.delay  # the last attempt started within the window


def test_a_fatal_failure_gives_up_at_once() -> None:
    assert Backoff(0.0).retry_after(0.0, fatal=True) is None


def test_giving_up_keeps_the_failures_code_and_says_the_hub_is_gone() -> None:
    error = gone(RpcError(-32000, "the hub refused the token", {"url": "ws://x/acp"}))
    assert (error.code, error.message, error.data) == (
        -32000,
        "the hub is gone: the hub refused the token",
        {"url": "ws://x/acp"},
    )


def listing(*entries: Any, next_cursor: str | None = None) -> dict[str, Any]:
    return {"sessions": list(entries), "nextCursor": next_cursor}


def test_a_listing_gives_the_idle_sessions_stop_reason() -> None:
    idle = {"sessionId": "s", "_meta": {"acp-hub": {"state": "idle", "stopReason": "refusal"}}}
    assert read_listing(listing(idle), "s", {}) == Listing("refusal")
    bare = {"sessionId": "s", "_meta": {"acp-hub": {"state": "idle"}}}
    assert read_listing(listing(bare), "s", {}) == Listing("end_turn")
    running = {"sessionId": "s", "_meta": {"acp-hub": {"state": "running"}}}
    assert read_listing(listing(running, next_cursor="p2"), "s", {}) == Listing()


@pytest.mark.parametrize(
    ("page", "params", "expected"),
    [
        (listing({"sessionId": "other"}, next_cursor="p2"), {}, Listing(next={"cursor": "p2"})),
        (listing({"sessionId": "other"}, next_cursor="p2"), {"cursor": "p2"}, Listing()),
        (listing({"sessionId": "other"}), {}, Listing()),
        (["not", "a", "page"], {}, Listing()),
    ],
)
def test_a_listing_without_the_session_pages_on_until_the_pages_end(
    page: object, params: dict[str, object], expected: Listing
) -> None:
    assert read_listing(page, "s", params) == expected


def test_a_later_prompt_tells_that_the_turn_ended_without_asking() -> None:
    track = Tracked("s", "/", turn_message="m-2")
    assert turn_over_known(track, PromptWait("s", message_id="m-1")) == "end_turn"
    assert turn_over_known(track, PromptWait("s", message_id="m-2")) is None


def core_modules() -> dict[str, Path]:
    found = {module_name(path): path for path in sorted(BRIDGE.glob("*.py"))}
    return {name: path for name, path in found.items() if name not in IO_MODULES}


def bridge_imports(module: str, path: Path) -> set[str]:
    """The ``hub.bridge`` modules ``path`` imports (under ``TYPE_CHECKING`` and in functions
    too)."""
    out = set()
    for name in imports_of(path, module):
        while not is_module(name) and "." in name:
            name = name.rsplit(".", 1)[0]
        if name.startswith("hub.bridge.") and name != module:
            out.add(name)
    return out


def test_the_core_uses_no_io_library_and_none_of_the_bridges_io() -> None:
    modules = core_modules()
    assert {"hub.bridge.core", "hub.bridge.prompts", "hub.bridge.cursors"} <= set(modules)
    io = {name: sorted(imported_roots(path) & FORBIDDEN) for name, path in modules.items()}
    assert {name: found for name, found in io.items() if found} == {}
    reach = {name: bridge_imports(name, path) & IO_MODULES for name, path in modules.items()}
    assert {name: found for name, found in reach.items() if found} == {}


def test_the_bridges_modules_import_one_another_without_a_cycle() -> None:
    graph = {
        module_name(path): bridge_imports(module_name(path), path)
        for path in sorted(BRIDGE.glob("*.py"))
    }
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join([*path, module])
        if module in done:
            return
        for imported in sorted(graph.get(module, set())):
            visit(imported, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())
    assert "hub.bridge.core" in graph["hub.bridge.relay"]


def test_every_exported_name_exists_and_no_bridge_module_is_past_600_lines() -> None:
    for path in sorted(BRIDGE.glob("*.py")):
        module = importlib.import_module(module_name(path))
        missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
        assert missing == [], path.name
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 600, path.name
