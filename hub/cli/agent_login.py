"""``acp-hub agent-login NAME [--config FILE] [--agent NAME=COMMAND ...] [--method ID]``: the
agent's terminal login (``hub.agents.terminal_login``) in this terminal, with the agent's
configured command, environment and working directory; it exits with the login's status.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

import anyio

from hub.agents.errors import AgentError
from hub.agents.spec import ConfigError, load_config, parse_agent_arg
from hub.cli.common import Subcommands, add_agents, add_command, add_config, fail
from hub.server import logs


def add_parser(sub: Subcommands) -> None:
    login_help = "run an agent's terminal login on this host"
    a = add_command(sub, "agent-login", login_help)
    a.add_argument("name", help="the agent, as defined in the config file or by --agent")
    add_config(a)
    add_agents(
        a, "define an agent, as serve --agent does (repeatable; default: only the config file's)"
    )
    a.add_argument("--method", default=None, help="the terminal method's id (if several)")
    a.add_argument(
        "--log-level",
        default=os.environ.get("ACP_HUB_LOG", "warning"),
        metavar="LEVEL",
        help="debug, info, warning or error (default: ACP_HUB_LOG, else warning)",
    )
    a.add_argument(
        "--log-format",
        default="text",
        choices=logs.FORMATS,
        help="text (the default) or json",
    )


def run(args: argparse.Namespace) -> int:
    """Run the terminal login of one agent in the foreground; its exit status."""
    from hub.agents.login import describe_methods
    from hub.agents.terminal_login import terminal_command, terminal_methods

    try:
        agents = dict(load_config(args.config).agents) if args.config else {}
        agents.update((spec.name, spec) for spec in map(parse_agent_arg, args.agent))
    except ConfigError as exc:
        return fail(exc)
    spec = agents.get(args.name)
    if spec is None:
        known = ", ".join(agents) or "none"
        return fail(f"unknown agent {args.name!r} (defined: {known})")
    try:
        methods = anyio.run(terminal_methods, spec)
    except AgentError as exc:
        return fail(exc.error.message, 1)
    terminal = [m for m in methods if m.get("type") == "terminal"]
    if args.method is not None:
        terminal = [m for m in terminal if m.get("methodId") == args.method]
    if len(terminal) != 1:
        what = "no" if not terminal else "more than one"
        return fail(
            f"agent {spec.name!r} offers {what} terminal login"
            + (f" {args.method!r}" if args.method else "")
            + f" (its methods: {describe_methods(methods)})"
        )
    argv, env, cwd = terminal_command(spec, terminal[0])
    print(
        f"acp-hub: agent {spec.name}: {terminal[0]['methodId']}: {shlex.join(argv)}",
        file=sys.stderr,
        flush=True,
    )
    try:
        return subprocess.run(argv, env=env, cwd=cwd, check=False).returncode
    except OSError as exc:
        return fail(f"cannot run {argv[0]!r}: {exc}", 1)
