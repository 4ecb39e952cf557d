"""The ``acp-hub`` command line: ``serve``, ``demo``, ``token``, ``url``, ``agent-login`` and
``bridge``.

``acp-hub serve [--host 127.0.0.1] [--port 8765] [--config FILE] [--store URL]
[--agent NAME=COMMAND ...]`` runs the hub with the agents of the config file and the command
line, keeping sessions where ``--store`` says (``ACP_HUB_STORE``, the config file's ``store``,
else in memory). ``acp-hub demo`` runs it with the built-in demo agent, which needs no network
and no API key. Once the server listens, both print ``acp-hub: listening on http://HOST:PORT``
(with the real port when ``--port 0``) on standard output. SIGINT and SIGTERM shut down
cleanly: clients are closed with 1001, agents are stopped (stdin closed, SIGTERM, SIGKILL of
their process groups), the store writes what it holds.

Unless ``auth = "none"``, they then print ``acp-hub: owner URL: URL``, a link carrying an owner
token in its fragment, also written to this hub's ``owner-url-PORT`` (0600) in the state
directory (``hub.access.owner_url``; removed at a clean shutdown), then where that file is and
how to stop: one banner. ``acp-hub url [--port PORT]`` prints a running hub's owner URL again.
A port outside 0-65535 or in use, like every other configuration error, is one line on
standard error and exit status 2 (``docs/configuration.md`` lists the exit codes).

``acp-hub token --role viewer --session ID --expires 2h`` mints a token with the hub's key
without a running hub and prints it (with ``--url BASE``: a link to the session).
``acp-hub agent-login NAME [--config FILE] [--agent NAME=COMMAND ...] [--method ID]`` runs the
agent's terminal login (``hub.agents.terminal_login``) in this terminal with the agent's
configured command, environment and working directory, and exits with its status.

``acp-hub bridge ws://HOST:PORT/acp [--token T] [--session ID] [--agent NAME]`` is a stdio ACP
agent for editors that relays to a hub (``hub.bridge``, ``docs/bridge.md``); the token may also
come from ``ACP_HUB_TOKEN``. Its standard output carries only ACP; logs go to standard error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import gc
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import anyio
import uvicorn

from hub import __version__
from hub.access import owner_url
from hub.access.gate import Gate
from hub.access.keys import state_dir
from hub.access.tokens import parse_duration
from hub.agents.errors import AgentError
from hub.agents.spec import AgentSpec, ConfigError, load_config, parse_agent_arg
from hub.server import logs
from hub.server.app import HubApp, create_app
from hub.server.close_codes import GOING_AWAY
from hub.server.proxies import uvicorn_proxy_options
from hub.server.wsprotocol import FairWebSocketProtocol
from hub.sessions.workspace import resolve_roots
from hub.settings import MAX_PORT, ROLES, Settings
from hub.store import StoreError, open_store, parse_store_url

log = logging.getLogger("hub")

WORKSPACE_ROOTS_ENV = "ACP_HUB_WORKSPACE_ROOTS"
"""The workspace roots from the environment, separated by ``os.pathsep`` (``:``): they
replace the config file's ``workspace_roots``; ``--workspace`` replaces both."""


GC_THRESHOLDS = (700, 10, 100)
"""The garbage collector's thresholds for a serving hub: Python's defaults but the third,
100 instead of 10 (see ``tune_gc``)."""


def tune_gc() -> None:
    """Shape the garbage collector for a server that holds thousands of connections.

    A full collection walks every tracked object and pauses every client meanwhile: about a
    quarter of a second with a thousand connections on the benchmark machine
    (``docs/design/fanout.md``). Two things make them rarer and shorter:

    - what start-up made (modules, classes, functions, the settings: tens of thousands of
      objects that live as long as the process) is moved out of the collector's generations
      (``gc.freeze``), so that a full collection walks only what serving made;
    - a full collection waits for 100 collections of the middle generation instead of 10
      (``GC_THRESHOLDS``). Python also waits until the objects that survived into the oldest
      generation grew by a quarter; with the default, a burst of connections met that
      condition several times over, and each time paused the hub in the middle of streaming.
      Young garbage is still collected as often as before; cycles that lived long (a closed
      connection's) are freed at the next full collection, which under load still comes
      every few seconds.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class _Server(uvicorn.Server):
    """uvicorn's server, announcing its address and closing clients with 1001 on shutdown."""

    def __init__(self, config: uvicorn.Config, hub: HubApp, banner: str) -> None:
        super().__init__(config)
        self.hub = hub
        self.banner = banner
        self.owner_url: str | None = None
        self.owner_url_file: Path | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit:
            return
        host, port = self.config.host, self.config.port
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                break
        shown = f"[{host}]" if ":" in str(host) else str(host)
        base = f"http://{shown}:{port}"
        lines = [f"listening on {base}"]
        gate = self.hub.gate
        if gate.enabled:
            page = f"{_public_base(self.hub.settings, base)}/#token={gate.mint_owner_token()}"
            self.owner_url = page
            try:
                self.owner_url_file = gate.write_owner_url(page, int(port))
            except OSError as exc:
                log.warning("! cannot write the owner URL file: %s", exc.strerror or exc)
            lines.append(f"owner URL: {page}")
            lines.append(f"  open it in a browser to use the hub as its owner{self.banner}")
            if self.owner_url_file is not None:
                again = f"acp-hub url --port {port}"
                lines.append(
                    f"  it is also in {self.owner_url_file} (readable by you only); "
                    f"`{again}` prints it again"
                )
        else:
            lines.append(f"  open {base}/ in a browser{self.banner}")
        lines.append("  stop with Ctrl+C (SIGINT) or SIGTERM")
        print("\n".join(f"acp-hub: {line}" for line in lines), flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.hub.close_connections(GOING_AWAY, "the hub is shutting down")
        await super().shutdown(sockets)
        if self.owner_url_file is not None and self.owner_url is not None:
            owner_url.remove(self.owner_url_file, self.owner_url)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM ask for the graceful shutdown, and that is all they do.

        uvicorn's own version raises the captured signal again once the server is down, which
        ends a clean shutdown with a KeyboardInterrupt traceback or death by SIGTERM instead
        of exit status 0.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class BindError(Exception):
    """The hub cannot listen where it was told; the message is the one line to print."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Bound sockets for ``host``:``port``, one per address the name resolves to, as asyncio's
    ``create_server`` binds them (``SO_REUSEADDR``, IPv6 sockets IPv6 only); uvicorn listens on
    them. ``BindError`` says why not: a port in use names the port and the option to change."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise BindError(
                        f"port {port} is in use: pass --port (another port, or 0 for any free one)"
                    ) from None
                raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _public_base(settings: Settings, base: str) -> str:
    """Where users reach the hub: ``public_url``, else the bound address, else (a wildcard
    bind) the first plain name of ``allowed_hosts``."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    if settings.host in ("0.0.0.0", "::", ""):
        names = [h for h in settings.allowed_hosts if "*" not in h]
        if names:
            port = base.rsplit(":", 1)[1]
            return f"http://{names[0]}:{port}"
    return base


def _port(text: str) -> int:
    """``--port``: a TCP port number (0: any free port)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_PORT}, not {port}")
    return port


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


LOG_LEVEL_HELP = "debug, info, warning or error (default: ACP_HUB_LOG, else info)"


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (``acp-hub serve: argument --port: ...``) and
    exit status 2 instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="acp-hub", description="Share ACP agent sessions.")
    parser.add_argument("--version", action="version", version=f"acp-hub {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (
        ("serve", "run the hub with the configured agents"),
        ("demo", "run the hub with the built-in demo agent"),
    ):
        p = sub.add_parser(name, help=help_text, description=_sentence(help_text))
        p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
        p.add_argument(
            "--port", type=_port, default=None, help="port, 0-65535 (default 8765; 0: any free one)"
        )
        p.add_argument(
            "--config",
            default=os.environ.get("ACP_HUB_CONFIG"),
            metavar="FILE",
            help="the TOML config file (default: ACP_HUB_CONFIG)",
        )
        p.add_argument(
            "--agent",
            action="append",
            default=[],
            metavar="NAME=COMMAND",
            help="define an agent (repeatable); the first one is the default",
        )
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
        p.add_argument(
            "--log-level",
            default=os.environ.get("ACP_HUB_LOG", "info"),
            metavar="LEVEL",
            help=LOG_LEVEL_HELP,
        )
        p.add_argument(
            "--log-format",
            default=os.environ.get("ACP_HUB_LOG_FORMAT", "text"),
            choices=logs.FORMATS,
            help="text (readable, the default) or json (one object per line)",
        )
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
    login_help = "run an agent's terminal login on this host"
    a = sub.add_parser("agent-login", help=login_help, description=_sentence(login_help))
    a.add_argument("name", help="the agent, as defined in the config file or by --agent")
    a.add_argument(
        "--config",
        default=os.environ.get("ACP_HUB_CONFIG"),
        metavar="FILE",
        help="the TOML config file (default: ACP_HUB_CONFIG)",
    )
    a.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="define an agent, as serve --agent does (repeatable; default: only the config file's)",
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
    token_help = "mint a token with the hub's key (no hub needs to run)"
    t = sub.add_parser("token", help=token_help, description=_sentence(token_help))
    t.add_argument(
        "--config",
        default=os.environ.get("ACP_HUB_CONFIG"),
        metavar="FILE",
        help="the TOML config file (default: ACP_HUB_CONFIG)",
    )
    t.add_argument(
        "--role",
        default="viewer",
        choices=list(ROLES),
        help="viewer, approver, driver or owner: the most the token may do (default viewer; "
        "session/new needs owner)",
    )
    t.add_argument(
        "--session",
        action="append",
        default=[],
        metavar="ID",
        help="a session the token may reach (repeatable; default: every session)",
    )
    t.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME",
        help='an agent it may start sessions on (repeatable; "*": any; default: none)',
    )
    t.add_argument("--origin", action="append", default=[], help="an embedding origin")
    t.add_argument("--expires", default="1h", help="lifetime: 90s, 30m, 2h, 7d (default 1h)")
    t.add_argument("--sub", default=None, help="the principal (default: a new random one)")
    t.add_argument(
        "--name",
        default=None,
        help="the name others see in presence and the transcript (default: --sub, else "
        '"ROLE token")',
    )
    t.add_argument("--url", default=None, help="print a link on this hub base URL instead")
    url_help = "print the owner URL of a hub running here again"
    u = sub.add_parser("url", help=url_help, description=_sentence(url_help))
    u.add_argument(
        "--config",
        default=os.environ.get("ACP_HUB_CONFIG"),
        metavar="FILE",
        help="the hub's TOML config file, for its state_dir (default: ACP_HUB_CONFIG)",
    )
    u.add_argument(
        "--port",
        type=_port,
        default=None,
        help="the port the hub listens on (default: the only hub running)",
    )
    export_help = "print a stored session as Markdown or JSON lines"
    e = sub.add_parser("export", help=export_help, description=_sentence(export_help))
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
    i = sub.add_parser("import", help=import_help, description=_sentence(import_help))
    i.add_argument("file", help="the export (acp-hub export --format jsonl, or _hub/export)")
    i.add_argument("--url", required=True, help="the hub's endpoint, e.g. ws://127.0.0.1:8765/acp")
    i.add_argument(
        "--token",
        default=os.environ.get("ACP_HUB_TOKEN"),
        help="an owner token for every session (default: $ACP_HUB_TOKEN)",
    )
    bridge_help = "a stdio ACP agent for editors, relaying to a hub"
    b = sub.add_parser("bridge", help=bridge_help, description=_sentence(bridge_help))
    b.add_argument("url", help="the hub's WebSocket endpoint, e.g. ws://127.0.0.1:8765/acp")
    b.add_argument(
        "--token",
        default=os.environ.get("ACP_HUB_TOKEN"),
        help="sent as Authorization: Bearer (default: $ACP_HUB_TOKEN)",
    )
    b.add_argument("--session", default=None, help="attach the editor's first session/new here")
    b.add_argument("--agent", default=None, help="the hub agent new sessions run on")
    b.add_argument(
        "--reconnect-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to keep trying a lost hub before failing requests (default 60)",
    )
    b.add_argument(
        "--log-level",
        default=os.environ.get("ACP_HUB_LOG", "info"),
        metavar="LEVEL",
        help=LOG_LEVEL_HELP,
    )
    b.add_argument(
        "--log-format",
        default=os.environ.get("ACP_HUB_LOG_FORMAT", "text"),
        choices=logs.FORMATS,
        help="text (readable, the default) or json (one object per line)",
    )
    return parser


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


def _check_store(setting: str) -> str | None:
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


def mint(args: argparse.Namespace) -> int:
    """``acp-hub token``: print a token (or a link) signed with the hub's key."""
    settings = Settings()
    if args.config:
        try:
            settings = settings.merged(dict(load_config(args.config).hub))
        except (ConfigError, ValueError) as exc:
            print(f"acp-hub: {exc}", file=sys.stderr)
            return 2
    try:
        ttl = parse_duration(args.expires)
        gate = Gate.from_settings(settings.merged({"auth": "token", "audit_log": "off"}))
    except ValueError as exc:
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
    assert gate.authority is not None
    agents = None if "*" in args.agent else args.agent
    sub = args.sub or f"token:{os.urandom(4).hex()}"
    token = gate.authority.mint(
        sub=sub,
        # What others see of its holder: --name, else --sub, else what it is.
        name=args.name or args.sub or f"{args.role} token",
        role=args.role,
        ttl=ttl,
        sessions=args.session or None,
        agents=agents,
        origins=args.origin,
    )
    if args.url:
        base = str(args.url).rstrip("/")
        path = f"/s/{args.session[0]}" if len(args.session) == 1 else "/"
        print(f"{base}{path}#token={token}")
    else:
        print(token)
    return 0


def print_owner_url(args: argparse.Namespace) -> int:
    """``acp-hub url``: print the owner URL a running hub wrote in its state directory."""
    settings = Settings()
    if args.config:
        try:
            settings = settings.merged(dict(load_config(args.config).hub))
        except (ConfigError, ValueError) as exc:
            print(f"acp-hub: {exc}", file=sys.stderr)
            return 2
    state = state_dir(settings)
    found = owner_url.find(state)
    if args.port is not None:
        path = found.get(args.port)
        if path is None:
            print(
                f"acp-hub: no hub on port {args.port} left an owner URL in {state} "
                "(is it running, with this state directory?)",
                file=sys.stderr,
            )
            return 1
    elif len(found) == 1:
        (path,) = found.values()
    elif not found:
        print(
            f"acp-hub: no running hub left an owner URL in {state} (is one running, with this "
            'state directory? with auth = "none" there is none)',
            file=sys.stderr,
        )
        return 1
    else:
        ports = ", ".join(map(str, found))
        print(f"acp-hub: hubs run on ports {ports}: pass --port", file=sys.stderr)
        return 2
    try:
        print(path.read_text().strip())
    except OSError as exc:
        print(f"acp-hub: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _export(args: argparse.Namespace) -> int:
    """``acp-hub export``: write a stored session's export to stdout (nothing is changed in
    the store; a running hub may keep using it)."""
    from hub.store.export import ExportError, from_store

    if not args.store or parse_store_url(args.store).kind == "memory":
        print("acp-hub: export needs --store sqlite:///PATH or redis://...", file=sys.stderr)
        return 2

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
        print(f"acp-hub: {data}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``acp-hub`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "token":
        return mint(args)
    if args.command == "url":
        return print_owner_url(args)
    if args.command == "export":
        return _export(args)
    if args.command == "import":
        return _import(args)
    if args.log_format not in logs.FORMATS:  # from ACP_HUB_LOG_FORMAT: argparse did not check
        print(f"acp-hub: --log-format must be one of {', '.join(logs.FORMATS)}", file=sys.stderr)
        return 2
    try:
        logs.configure(str(args.log_level), args.log_format)
    except ValueError as exc:  # an unknown level name
        print(f"acp-hub: --log-level: {exc}", file=sys.stderr)
        return 2
    if args.command == "bridge":
        return _bridge(args)
    if args.command == "agent-login":
        return _agent_login(args)
    try:
        settings, agents, default = build(args)
    except (ConfigError, ValueError) as exc:
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
    if not agents:
        print("acp-hub: no agents: use --agent NAME=COMMAND or --config FILE", file=sys.stderr)
        return 2
    problem = _check_store(settings.store)
    if problem is not None:
        print(f"acp-hub: {problem}", file=sys.stderr)
        return 2
    if not settings.workspace_roots:
        # Agents run commands in their session's cwd: serve never lets clients pick any path.
        print(
            "acp-hub: no workspace roots: set [hub] workspace_roots in the config file, "
            "ACP_HUB_WORKSPACE_ROOTS or use --workspace DIR (the directories sessions may "
            "work in)",
            file=sys.stderr,
        )
        return 2
    try:
        resolve_roots(settings.workspace_roots)
    except ValueError as exc:
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
    try:
        app, hub = create_app(settings, agents, default)
    except ValueError as exc:  # the hub's key, an issuer, the share-link file
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
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
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
    server = _Server(config, hub, banner)
    tune_gc()
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    return 0


def _agent_login(args: argparse.Namespace) -> int:
    """Run the terminal login of one agent in the foreground; its exit status."""
    from hub.agents.login import describe_methods
    from hub.agents.terminal_login import terminal_command, terminal_methods

    try:
        agents = dict(load_config(args.config).agents) if args.config else {}
        agents.update((spec.name, spec) for spec in map(parse_agent_arg, args.agent))
    except ConfigError as exc:
        print(f"acp-hub: {exc}", file=sys.stderr)
        return 2
    spec = agents.get(args.name)
    if spec is None:
        known = ", ".join(agents) or "none"
        print(f"acp-hub: unknown agent {args.name!r} (defined: {known})", file=sys.stderr)
        return 2
    try:
        methods = anyio.run(terminal_methods, spec)
    except AgentError as exc:
        print(f"acp-hub: {exc.error.message}", file=sys.stderr)
        return 1
    terminal = [m for m in methods if m.get("type") == "terminal"]
    if args.method is not None:
        terminal = [m for m in terminal if m.get("methodId") == args.method]
    if len(terminal) != 1:
        what = "no" if not terminal else "more than one"
        print(
            f"acp-hub: agent {spec.name!r} offers {what} terminal login"
            + (f" {args.method!r}" if args.method else "")
            + f" (its methods: {describe_methods(methods)})",
            file=sys.stderr,
        )
        return 2
    argv, env, cwd = terminal_command(spec, terminal[0])
    print(
        f"acp-hub: agent {spec.name}: {terminal[0]['methodId']}: {shlex.join(argv)}",
        file=sys.stderr,
        flush=True,
    )
    try:
        return subprocess.run(argv, env=env, cwd=cwd, check=False).returncode
    except OSError as exc:
        print(f"acp-hub: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        return 1


def _import(args: argparse.Namespace) -> int:
    """``acp-hub import``: send an export to a running hub's ``_hub/import``; print the new
    session's id."""
    import orjson
    from websockets.exceptions import ConnectionClosed

    from hub.bridge.link import LinkFailure, Target, connect_hub

    try:
        with open(args.file, encoding="utf-8") as source:
            data = source.read()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"acp-hub: {args.file}: {exc}", file=sys.stderr)
        return 2

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
        print(f"acp-hub: {exc.error.message}", file=sys.stderr)
        return 1
    except (OSError, ValueError, ConnectionClosed) as exc:
        print(f"acp-hub: {args.url}: {exc}", file=sys.stderr)
        return 1
    error = answer.get("error")
    if isinstance(error, dict):
        print(f"acp-hub: the hub refused the import: {error.get('message')}", file=sys.stderr)
        return 1
    print(answer.get("result", {}).get("sessionId"))
    return 0


def _bridge(args: argparse.Namespace) -> int:
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


if __name__ == "__main__":
    raise SystemExit(main())
