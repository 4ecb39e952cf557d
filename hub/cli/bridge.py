"""``acp-hub bridge ws://HOST:PORT/acp [--token T] [--session ID] [--agent NAME]``: a stdio ACP
agent for editors that relays to a hub (``hub.bridge``, ``docs/bridge.md``); the token may also
come from ``ACP_HUB_TOKEN``. Its standard output carries only ACP; logs go to standard error.
"""

from __future__ import annotations

import argparse
import asyncio

from hub.cli.common import Subcommands, add_command, add_logging, add_token


def add_parser(sub: Subcommands) -> None:
    bridge_help = "a stdio ACP agent for editors, relaying to a hub"
    b = add_command(sub, "bridge", bridge_help)
    b.add_argument("url", help="the hub's WebSocket endpoint, e.g. ws://127.0.0.1:8765/acp")
    add_token(b, "sent as Authorization: Bearer (default: $ACP_HUB_TOKEN)")
    b.add_argument("--session", default=None, help="attach the editor's first session/new here")
    b.add_argument("--agent", default=None, help="the hub agent new sessions run on")
    b.add_argument(
        "--reconnect-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to keep trying a lost hub before failing requests (default 60)",
    )
    add_logging(b)


def run(args: argparse.Namespace) -> int:
    from hub.bridge.link import Target
    from hub.bridge.relay import run_stdio

    target = Target(args.url, args.token or None)
    try:
        asyncio.run(
            run_stdio(
                target,
                agent=args.agent,
                session=args.session,
                reconnect_window=args.reconnect_timeout,
            )
        )
    except KeyboardInterrupt:
        pass
    return 0
