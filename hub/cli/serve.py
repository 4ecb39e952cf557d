"""``acp-hub serve`` and ``acp-hub demo``: the hub, with its settings and agents from the config
file, the environment and the command line.

``acp-hub serve [--host 127.0.0.1] [--port 8765] [--config FILE] [--store URL]
[--agent NAME=COMMAND ...]`` runs the hub with the agents of the config file and the command
line, keeping sessions where ``--store`` says (``ACP_HUB_STORE``, the config file's ``store``,
else in memory). ``acp-hub demo`` runs it with the built-in demo agent, which needs no network
and no API key. ``hub.cli.server`` runs the web server and prints the banner. A port outside
0-65535 or in use, like every other configuration error, is one line on standard error and
exit status 2 (``docs/configuration.md`` lists the exit codes).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import anyio
import uvicorn

from hub.agents.spec import AgentSpec, ConfigError, load_config, parse_agent_arg
from hub.cli.common import Subcommands, add_agents, add_command, add_config, add_logging, fail, port
from hub.cli.server import BindError, Server, listen, tune_gc
from hub.server.app import create_app
from hub.server.proxies import uvicorn_proxy_options
from hub.server.wsprotocol import FairWebSocketProtocol
from hub.sessions.workspace import resolve_roots
from hub.settings import Settings
from hub.store import StoreError, open_store, parse_store_url

WORKSPACE_ROOTS_ENV = "ACP_HUB_WORKSPACE_ROOTS"
"""The workspace roots from the environment, separated by ``os.pathsep`` (``:``): they
replace the config file's ``workspace_roots``; ``--workspace`` replaces both."""


def add_parsers(sub: Subcommands) -> None:
    """``serve`` and ``demo``."""
    for name, help_text in (
        ("serve", "run the hub with the configured agents"),
        ("demo", "run the hub with the built-in demo agent"),
    ):
        p = add_command(sub, name, help_text)
        p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
        p.add_argument(
            "--port", type=port, default=None, help="port, 0-65535 (default 8765; 0: any free one)"
        )
        add_config(p)
        add_agents(p, "define an agent (repeatable); the first one is the default")
        p.add_argument(
            "--workspace",
            action="append",
            default=[],
            metavar="DIR",
            help="a directory sessions may work in (repeatable; replaces "
            "ACP_HUB_WORKSPACE_ROOTS, ':'-separated, and workspace_roots of the config file; "
            "demo: the current directory by default)",
        )
        p.add_argument(
            "--store",
            default=None,
            help="memory (default), sqlite:///PATH or redis://HOST:PORT/DB "
            "(default: ACP_HUB_STORE, else the config file's)",
        )
        add_logging(p)
        p.add_argument(
            "--allowed-host",
            action="append",
            default=[],
            metavar="NAME",
            help="a Host name clients use to reach the hub (repeatable; required off loopback; "
            "default: ACP_HUB_ALLOWED_HOSTS, comma-separated, else the config file's)",
        )
        p.add_argument(
            "--trusted-proxy",
            action="append",
            default=[],
            metavar="ADDR",
            help="a reverse proxy's address or CIDR whose X-Forwarded-For/-Proto are believed "
            "(repeatable; default: ACP_HUB_TRUSTED_PROXIES, comma-separated, else the config "
            "file's; none by default)",
        )
        p.add_argument(
            "--auth",
            default=None,
            choices=["token", "none"],
            help='"none" turns credentials off (loopback addresses only)',
        )
        if name == "demo":
            p.add_argument(
                "--protocol",
                default="auto",
                choices=["auto", "1", "2"],
                help="the ACP version the demo agent speaks: auto (offers 2, accepts 1, the "
                "default), 1 or 2",
            )


def build(args: argparse.Namespace) -> tuple[Settings, dict[str, AgentSpec], str | None]:
    """Settings and agents from the config file and the command line."""
    settings = Settings()
    agents: dict[str, AgentSpec] = {}
    default: str | None = None
    if args.config:
        config = load_config(args.config)
        agents.update(config.agents)
        default = config.default_agent
        try:
            settings = settings.merged(dict(config.hub))
        except ValueError as exc:
            raise ConfigError(f"{args.config}: [hub]: {exc}") from None
    if args.command == "demo":
        demo = AgentSpec(
            name="demo",
            command=sys.executable,
            args=("-m", "hub.demo.agent", "--protocol", args.protocol),
        )
        agents = {"demo": demo, **agents}
        default = "demo"
    for text in args.agent:
        spec = parse_agent_arg(text)
        agents[spec.name] = spec
        if default is None:
            default = spec.name
    overrides: dict[str, Any] = {}
    if args.host is not None:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    roots_env = [d for d in os.environ.get(WORKSPACE_ROOTS_ENV, "").split(os.pathsep) if d]
    if args.workspace:
        overrides["workspace_roots"] = tuple(os.path.abspath(d) for d in args.workspace)
    elif roots_env:
        overrides["workspace_roots"] = tuple(roots_env)
    elif args.command == "demo" and not settings.workspace_roots:
        overrides["workspace_roots"] = (os.getcwd(),)
    if getattr(args, "auth", None) is not None:
        overrides["auth"] = args.auth
    allowed = list(getattr(args, "allowed_host", None) or [])
    if not allowed:
        allowed = [h.strip() for h in os.environ.get("ACP_HUB_ALLOWED_HOSTS", "").split(",")]
    if any(allowed):
        overrides["allowed_hosts"] = [h for h in allowed if h]
    proxies = list(getattr(args, "trusted_proxy", None) or [])
    if not proxies:
        proxies = [p.strip() for p in os.environ.get("ACP_HUB_TRUSTED_PROXIES", "").split(",")]
    if any(proxies):
        overrides["trusted_proxies"] = [p for p in proxies if p]
    store = args.store or os.environ.get("ACP_HUB_STORE")
    if store:
        overrides["store"] = store
    # A secret: from the environment (or the config file), never from the command line,
    # where every user of the machine can read it in the process list.
    metrics_token = os.environ.get("ACP_HUB_METRICS_TOKEN")
    if metrics_token:
        overrides["metrics_token"] = metrics_token
    if overrides:
        settings = settings.merged(overrides)
    return settings, agents, default


def check_store(setting: str) -> str | None:
    """Why the store cannot be used (unreachable, unwritable), or ``None``: checked before
    the server starts, so that a bad store is one clear line and exit status 2."""
    if parse_store_url(setting).kind == "memory":
        return None

    async def probe() -> None:
        async with open_store(setting).running():
            pass

    try:
        anyio.run(probe)
    except StoreError as exc:
        return str(exc)
    return None


def run(args: argparse.Namespace) -> int:
    """``acp-hub serve`` and ``acp-hub demo``: serve until SIGINT or SIGTERM; 2 for a
    configuration error (one line on standard error)."""
    try:
        settings, agents, default = build(args)
    except (ConfigError, ValueError) as exc:
        return fail(exc)
    if not agents:
        return fail("no agents: use --agent NAME=COMMAND or --config FILE")
    problem = check_store(settings.store)
    if problem is not None:
        return fail(problem)
    if not settings.workspace_roots:
        # Agents run commands in their session's cwd: serve never lets clients pick any path.
        return fail(
            "no workspace roots: set [hub] workspace_roots in the config file, "
            "ACP_HUB_WORKSPACE_ROOTS or use --workspace DIR (the directories sessions may "
            "work in)"
        )
    try:
        resolve_roots(settings.workspace_roots)
    except ValueError as exc:
        return fail(exc)
    try:
        app, hub = create_app(settings, agents, default)
    except ValueError as exc:  # the hub's key, an issuer, the share-link file
        return fail(exc)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        ws=FairWebSocketProtocol,
        ws_max_size=settings.max_frame_bytes,
        ws_ping_interval=settings.ping_interval,
        ws_ping_timeout=settings.ping_timeout,
        ws_per_message_deflate=False,
        **uvicorn_proxy_options(settings),
        log_level=str(args.log_level).lower(),
        # uvicorn's records go to the hub's handler (format, client context, redaction)
        # instead of handlers of its own; its access log only when asked for (its request
        # lines carry tokens, which the redaction removes).
        log_config=None,
        access_log=settings.access_log,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    banner = "; the demo agent is ready to prompt" if args.command == "demo" else ""
    try:
        sockets = listen(settings.host, settings.port)
    except BindError as exc:
        return fail(exc)
    server = Server(config, hub, banner)
    tune_gc()
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    return 0
