"""``acp-hub token`` and ``acp-hub url``: credentials, without a hub or from a running one.

``acp-hub token --role viewer --session ID --expires 2h`` mints a token with the hub's key
without a running hub and prints it (with ``--url BASE``: a link to the session). ``acp-hub url
[--port PORT]`` prints a running hub's owner URL again (``hub.cli.server`` wrote it).
"""

from __future__ import annotations

import argparse
import os

from hub.access import owner_url
from hub.access.gate import Gate
from hub.access.keys import state_dir
from hub.access.tokens import parse_duration
from hub.agents.spec import ConfigError, load_config
from hub.cli.common import Subcommands, add_command, add_config, fail, port
from hub.settings import ROLES, Settings


def add_parsers(sub: Subcommands) -> None:
    """``token`` and ``url``."""
    token_help = "mint a token with the hub's key (no hub needs to run)"
    t = add_command(sub, "token", token_help)
    add_config(t)
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
    u = add_command(sub, "url", url_help)
    add_config(u, "the hub's TOML config file, for its state_dir (default: ACP_HUB_CONFIG)")
    u.add_argument(
        "--port",
        type=port,
        default=None,
        help="the port the hub listens on (default: the only hub running)",
    )


def configured(config: str | None) -> Settings:
    """The settings of the config file ``config`` (``None``: the defaults); ``ConfigError`` or
    ``ValueError`` says what is wrong with it."""
    settings = Settings()
    if config:
        settings = settings.merged(dict(load_config(config).hub))
    return settings


def mint(args: argparse.Namespace) -> int:
    """``acp-hub token``: print a token (or a link) signed with the hub's key."""
    try:
        settings = configured(args.config)
    except (ConfigError, ValueError) as exc:
        return fail(exc)
    try:
        ttl = parse_duration(args.expires)
        gate = Gate.from_settings(settings.merged({"auth": "token", "audit_log": "off"}))
    except ValueError as exc:
        return fail(exc)
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
    try:
        settings = configured(args.config)
    except (ConfigError, ValueError) as exc:
        return fail(exc)
    state = state_dir(settings)
    found = owner_url.find(state)
    if args.port is not None:
        path = found.get(args.port)
        if path is None:
            return fail(
                f"no hub on port {args.port} left an owner URL in {state} "
                "(is it running, with this state directory?)",
                1,
            )
    elif len(found) == 1:
        (path,) = found.values()
    elif not found:
        return fail(
            f"no running hub left an owner URL in {state} (is one running, with this "
            'state directory? with auth = "none" there is none)',
            1,
        )
    else:
        ports = ", ".join(map(str, found))
        return fail(f"hubs run on ports {ports}: pass --port")
    try:
        print(path.read_text().strip())
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror or exc}", 1)
    return 0
