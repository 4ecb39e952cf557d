"""The conformance matrix: one table of methods through every client the project pins.

Each client runs the same scenario against one real hub serving the project's scripted agent
(v2): ``initialize``, ``session/new``, ``session/list``, a prompt whose turn asks a permission
and an elicitation, the config option, the v1 mode, ``session/cancel``, ``$/cancel_request``,
an extension method, then a second connection of the same client takes the session with
``session/load``, ``session/resume`` and ``session/attach``, and the first closes and deletes.
Every step is a cell: ``pass``, ``n/a`` (the method is not in that protocol version), or a
failure with what went wrong. Cells known to fail are listed in ``XFAILS`` with the side that
is wrong and why; a listed cell that passes is an error too (the list must stay true).

``docs/protocol.md`` carries the table between ``<!-- matrix:start -->`` and
``<!-- matrix:end -->``; ``tests/interop/test_matrix.py`` checks it is what the run gives, and
``python -m tests.interop.matrix --write`` (``make matrix``) rewrites it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "protocol.md"
START, END = "<!-- matrix:start -->", "<!-- matrix:end -->"

METHODS: tuple[str, ...] = (
    "initialize",
    "session/new",
    "session/list",
    "session/prompt",
    "session/request_permission",
    "elicitation/create",
    "session/set_config_option",
    "session/set_mode",
    "session/cancel",
    "$/cancel_request",
    "_acme/echo (extension)",
    "session/load",
    "session/resume",
    "session/attach",
    "session/close",
    "session/delete",
)

PY_SDK = "agent-client-protocol 0.12.1"
TS_SDK = "@agentclientprotocol/sdk 2.4.0"

CLIENTS: tuple[str, ...] = (
    "raw v1 (WebSocket)",
    "raw v2 (WebSocket)",
    f"{PY_SDK} WebSocket",
    f"{PY_SDK} Streamable HTTP",
    f"{PY_SDK} stdio via acp-hub bridge",
    f"{TS_SDK} WebSocket v1",
    f"{TS_SDK} WebSocket v2",
    f"{TS_SDK} Streamable HTTP v1",
    f"{TS_SDK} Streamable HTTP v2",
)

_PY_NO_API = f"client: {PY_SDK} has no API for it"
_PY_NO_CANCEL = (
    f"client: {PY_SDK} cancels an awaited request locally and sends no `$/cancel_request`"
)

XFAILS: Mapping[tuple[str, str], str] = {
    **{
        (f"{PY_SDK} {transport}", method): reason
        for transport in ("WebSocket", "Streamable HTTP", "stdio via acp-hub bridge")
        for method, reason in (
            ("$/cancel_request", _PY_NO_CANCEL),
            ("session/attach", _PY_NO_API + " (a proposal the SDK does not implement)"),
            ("session/delete", _PY_NO_API),
        )
    },
}
"""Cells that do not pass, with the side that is wrong and why."""

PASS, NA = "pass", "n/a"


def outcome_text(client: str, method: str, result: str) -> str:
    """What the table says for one cell."""
    if result == PASS:
        return "✓"
    if result == NA:
        return "n/a"
    reason = XFAILS.get((client, method))
    return f"✗ {reason}" if reason is not None else f"✗ {result}"


def render(results: Mapping[str, Mapping[str, str]]) -> str:
    """The Markdown table (clients as columns would be too wide: one row per client and
    method would be too long; methods are rows, clients are columns, reasons are notes)."""
    notes: dict[str, int] = {}
    header = "| method | " + " | ".join(CLIENTS) + " |"
    rule = "|---|" + "---|" * len(CLIENTS)
    rows = [header, rule]
    for method in METHODS:
        cells = []
        for client in CLIENTS:
            result = results[client].get(method, "missing")
            if result in (PASS, NA):
                cells.append(outcome_text(client, method, result))
                continue
            reason = XFAILS.get((client, method), result)
            number = notes.setdefault(reason, len(notes) + 1)
            cells.append(f"✗ ({number})")
        rows.append(f"| `{method}` | " + " | ".join(cells) + " |")
    lines = [*rows, ""]
    for reason, number in notes.items():
        lines.append(f"{number}. {reason}")
    return "\n".join(lines).rstrip() + "\n"


def documented() -> str:
    """The table as ``docs/protocol.md`` has it now."""
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(START) + len(START), text.index(END)
    return text[start:end].strip("\n") + "\n"


def write(table: str) -> None:
    """Put ``table`` in ``docs/protocol.md`` between the markers."""
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(START) + len(START), text.index(END)
    DOC.write_text(text[:start] + "\n" + table + text[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """Run the matrix (``tests/interop/test_matrix.py``) and print or write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/protocol.md")
    args = parser.parse_args(argv)
    import anyio

    from tests.interop.scenario import run_matrix

    table = render(anyio.run(run_matrix))
    if args.write:
        write(table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
