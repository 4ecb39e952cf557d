"""What the subcommands share: a parser that reports a usage error in one line, the options
several of them take, and the one line an error is."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn, TypeAlias

from hub.server import logs
from hub.settings import MAX_PORT

CONFIG_HELP = "the TOML config file (default: ACP_HUB_CONFIG)"
LOG_LEVEL_HELP = "debug, info, warning or error (default: ACP_HUB_LOG, else info)"


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``acp-hub serve: argument --port: ...``) and
    exit status 2 instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


Subcommands: TypeAlias = "argparse._SubParsersAction[Parser]"
"""What ``add_subparsers`` gives: each subcommand group adds its parsers to it."""


def sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def add_command(sub: Subcommands, name: str, help_text: str) -> argparse.ArgumentParser:
    """The subcommand ``name``; its help line is also its description, as a sentence."""
    return sub.add_parser(name, help=help_text, description=sentence(help_text))


def port(text: str) -> int:
    """``--port``: a TCP port number (0: any free port)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= number <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_PORT}, not {number}")
    return number


def add_config(parser: argparse.ArgumentParser, help_text: str = CONFIG_HELP) -> None:
    parser.add_argument(
        "--config", default=os.environ.get("ACP_HUB_CONFIG"), metavar="FILE", help=help_text
    )


def add_agents(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--agent NAME=COMMAND``, repeatable."""
    parser.add_argument(
        "--agent", action="append", default=[], metavar="NAME=COMMAND", help=help_text
    )


def add_token(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``--token``, defaulting to ``ACP_HUB_TOKEN`` (a credential is better kept off the
    command line, which every user of the machine can read)."""
    parser.add_argument("--token", default=os.environ.get("ACP_HUB_TOKEN"), help=help_text)


def add_logging(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-format``, defaulting to ``ACP_HUB_LOG`` and
    ``ACP_HUB_LOG_FORMAT``."""
    parser.add_argument(
        "--log-level",
        default=os.environ.get("ACP_HUB_LOG", "info"),
        metavar="LEVEL",
        help=LOG_LEVEL_HELP,
    )
    parser.add_argument(
        "--log-format",
        default=os.environ.get("ACP_HUB_LOG_FORMAT", "text"),
        choices=logs.FORMATS,
        help="text (readable, the default) or json (one object per line)",
    )


def fail(message: object, status: int = 2) -> int:
    """Print ``acp-hub: MESSAGE`` on standard error; ``status``, for the command to return."""
    print(f"acp-hub: {message}", file=sys.stderr)
    return status
