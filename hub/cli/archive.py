"""``acp-hub export`` and ``acp-hub import``: a stored session out of a store, an export into a
running hub.

``acp-hub export SESSION --store URL [--format md|jsonl]`` writes a stored session's export
to standard output (nothing is changed in the store; a running hub may keep using it).
``acp-hub import FILE --url ws://HOST:PORT/acp`` sends a JSONL export to a running hub's
``_hub/import`` and prints the new (archived) session's id.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

import anyio

from hub import __version__
from hub.cli.common import Subcommands, add_command, add_token, fail
from hub.store import StoreError, open_store, parse_store_url


def add_parsers(sub: Subcommands) -> None:
    """``export`` and ``import``."""
    export_help = "print a stored session as Markdown or JSON lines"
    e = add_command(sub, "export", export_help)
    e.add_argument("session", help="the session's id (s-...)")
    e.add_argument(
        "--store",
        default=os.environ.get("ACP_HUB_STORE"),
        help="sqlite:///PATH or redis://HOST:PORT/DB (default: ACP_HUB_STORE)",
    )
    e.add_argument(
        "--format",
        default="md",
        choices=["md", "jsonl"],
        help="md (a transcript) or jsonl (the event log, for acp-hub import) (default: md)",
    )
    import_help = "import a JSONL export as an archived session"
    i = add_command(sub, "import", import_help)
    i.add_argument("file", help="the export (acp-hub export --format jsonl, or _hub/export)")
    i.add_argument("--url", required=True, help="the hub's endpoint, e.g. ws://127.0.0.1:8765/acp")
    add_token(i, "an owner token for every session (default: $ACP_HUB_TOKEN)")


def export(args: argparse.Namespace) -> int:
    """``acp-hub export``: write a stored session's export to stdout (nothing is changed in
    the store; a running hub may keep using it)."""
    from hub.store.export import ExportError, from_store

    if not args.store or parse_store_url(args.store).kind == "memory":
        return fail("export needs --store sqlite:///PATH or redis://...")

    async def read() -> bytes | str:
        store = open_store(args.store, node=f"export-{os.getpid()}")
        async with store.running():
            try:
                return await from_store(store, args.session, args.format)
            except (ExportError, StoreError, ValueError) as exc:  # not out of the task group
                return str(exc)

    try:
        data = anyio.run(read)
    except StoreError as exc:
        data = str(exc)
    if isinstance(data, str):
        return fail(data, 1)
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


def import_(args: argparse.Namespace) -> int:
    """``acp-hub import``: send an export to a running hub's ``_hub/import``; print the new
    session's id."""
    import orjson
    from websockets.exceptions import ConnectionClosed

    from hub.bridge.link import LinkFailure, Target, connect_hub

    try:
        with open(args.file, encoding="utf-8") as source:
            data = source.read()
    except (OSError, UnicodeDecodeError) as exc:
        return fail(f"{args.file}: {exc}")

    async def call() -> dict[str, Any]:
        ws = await connect_hub(Target(args.url, args.token or None))
        async with ws:
            requests = [
                (
                    "initialize",
                    {
                        "protocolVersion": 2,
                        "info": {"name": "acp-hub import", "version": __version__},
                        "capabilities": {},
                    },
                ),
                ("_hub/import", {"data": data}),
            ]
            answer: dict[str, Any] = {}
            for number, (method, params) in enumerate(requests, 1):
                message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
                await ws.send(orjson.dumps(message).decode())
                while True:
                    frame = orjson.loads(await ws.recv())
                    entries = frame if isinstance(frame, list) else [frame]
                    found = [e for e in entries if isinstance(e, dict) and e.get("id") == number]
                    if found:
                        answer = found[0]
                        break
                if "error" in answer:
                    return answer
            return answer

    try:
        answer = asyncio.run(call())
    except LinkFailure as exc:
        return fail(exc.error.message, 1)
    except (OSError, ValueError, ConnectionClosed) as exc:
        return fail(f"{args.url}: {exc}", 1)
    error = answer.get("error")
    if isinstance(error, dict):
        return fail(f"the hub refused the import: {error.get('message')}", 1)
    print(answer.get("result", {}).get("sessionId"))
    return 0
