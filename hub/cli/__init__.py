"""The ``acp-hub`` command line: ``serve``, ``demo``, ``agent-login``, ``token``, ``url``,
``export``, ``import`` and ``bridge``, one module per group of subcommands.

* ``hub.cli.serve``: ``serve`` and ``demo``, the hub itself, run by ``hub.cli.server``
  (uvicorn's server on sockets bound beforehand, the banner with the owner URL, the shutdown);
* ``hub.cli.agent_login``: ``agent-login``, an agent's terminal login in this terminal;
* ``hub.cli.credentials``: ``token`` (mint a token with the hub's key) and ``url`` (a running
  hub's owner URL again);
* ``hub.cli.archive``: ``export`` (a stored session) and ``import`` (an export, into a running
  hub);
* ``hub.cli.bridge``: ``bridge``, a stdio ACP agent for editors that relays to a hub;
* ``hub.cli.common``: the parser and the options several subcommands share.

A usage or configuration error is one line on standard error and exit status 2
(``docs/configuration.md`` lists the exit codes).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from hub import __version__
from hub.cli import agent_login, archive, bridge, credentials, serve
from hub.cli.common import Parser, fail
from hub.server import logs

__all__ = ["main"]

UNLOGGED: dict[str, Callable[[argparse.Namespace], int]] = {
    "token": credentials.mint,
    "url": credentials.print_owner_url,
    "export": archive.export,
    "import": archive.import_,
}
"""The subcommands that configure no logging (they print their answer and exit)."""

LOGGED: dict[str, Callable[[argparse.Namespace], int]] = {
    "bridge": bridge.run,
    "agent-login": agent_login.run,
    "serve": serve.run,
    "demo": serve.run,
}
"""The subcommands that log, as their ``--log-level`` and ``--log-format`` say."""


def _parser() -> argparse.ArgumentParser:
    parser = Parser(prog="acp-hub", description="Share ACP agent sessions.")
    parser.add_argument("--version", action="version", version=f"acp-hub {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve.add_parsers(sub)
    agent_login.add_parser(sub)
    credentials.add_parsers(sub)
    archive.add_parsers(sub)
    bridge.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acp-hub`` console script."""
    args = _parser().parse_args(argv)
    if args.command in UNLOGGED:
        return UNLOGGED[args.command](args)
    if args.log_format not in logs.FORMATS:  # from ACP_HUB_LOG_FORMAT: argparse did not check
        return fail(f"--log-format must be one of {', '.join(logs.FORMATS)}")
    try:
        logs.configure(str(args.log_level), args.log_format)
    except ValueError as exc:  # an unknown level name
        return fail(f"--log-level: {exc}")
    return LOGGED[args.command](args)
