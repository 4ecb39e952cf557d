"""The hub's settings: one frozen value built from defaults, the config file and the CLI.

Every limit the hub enforces lives here with its default; ``docs/configuration.md`` lists
them. The config file's ``[hub]`` table uses the same names as the fields below.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from ipaddress import ip_network
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from hub.access.hosts import is_loopback

Role = Literal["viewer", "approver", "driver", "owner"]
PromptPolicy = Literal["queue", "reject", "lease"]
PermissionPolicy = Literal["first", "owner", "lease", "designated", "consensus"]
AuthMode = Literal["token", "none"]

ROLES: tuple[Role, ...] = ("viewer", "approver", "driver", "owner")
PROMPT_POLICIES: tuple[PromptPolicy, ...] = ("queue", "reject", "lease")
PERMISSION_POLICIES: tuple[PermissionPolicy, ...] = (
    "first",
    "owner",
    "lease",
    "designated",
    "consensus",
)
McpPolicy = Literal["none", "owner", "any"]
MCP_POLICIES: tuple[McpPolicy, ...] = ("none", "owner", "any")
AUTH_MODES: tuple[AuthMode, ...] = ("token", "none")

MIB = 1024 * 1024
MAX_PORT = 65535
METRICS_TOKEN_MIN = 16
"""The shortest ``metrics_token`` accepted: a guessable token protects nothing."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the hub can be told. Frozen: build a new one with :meth:`merged`."""

    host: str = "127.0.0.1"
    port: int = 8765
    default_role: Role = "owner"
    """The role of every connection when ``auth = "none"`` (loopback development only)."""

    # Access (docs/security.md).
    auth: AuthMode = "token"
    """``token``: every connection needs a valid credential. ``none``: nobody is asked for
    one; only allowed with a loopback bind."""
    state_dir: str = ""
    """Where the hub keeps its generated key, share links, audit log and owner URL; empty:
    ``$XDG_STATE_HOME/acp-hub`` or ``~/.local/state/acp-hub``."""
    secret_file: str = ""
    """A file holding the hub's signing key (at least 32 bytes); ``ACP_HUB_SECRET`` wins."""
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` names served (DNS rebinding); empty: the loopback names on a loopback bind.
    Required on any other bind."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins besides the hub's own that may open ``/acp`` (with a credential)."""
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or CIDRs (``10.0.0.0/8``) of the reverse proxies whose ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` the hub believes (the client's address in logs and for
    ``max_connections_per_address``, and its scheme). Empty, the default: none, loopback
    included; every request's address is its socket's."""
    issuers: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """External token issuers by name (``[hub.issuers.NAME]``, see docs/configuration.md)."""
    token_issuer: str = "acp-hub"
    """The ``iss`` of the hub's own tokens."""
    token_audience: str = "acp-hub"
    """The ``aud`` every token must carry (the hub's own and, unless an issuer says
    otherwise, external ones)."""
    token_leeway: float = 30.0
    """Clock skew tolerated on ``exp``/``nbf``/``iat``, in seconds."""
    owner_token_ttl: float = 7 * 86400.0
    """Lifetime of the owner URL's token that ``serve`` and ``demo`` print at start."""
    public_url: str = ""
    """The hub's address as users reach it (share links); empty: from the request."""
    audit_log: str = ""
    """The JSON-lines audit trail; empty: ``audit.jsonl`` in the state directory; ``off``: no
    audit trail at all (neither the file nor the store's copy)."""
    audit_retained: int = 100_000
    """Audit entries the store keeps for ``_hub/audit/list`` (the oldest go first; about as
    many on Redis); the JSON-lines file is never trimmed."""
    access_log: bool = False
    """uvicorn's per-request access log (tokens are redacted from it as from every line)."""

    # Fan-out and connections.
    outbox_bytes: int = 4 * MIB
    """A client whose queued, unsent bytes pass this bound is closed with 1013."""
    max_frame_bytes: int = 16 * MIB
    """Largest WebSocket frame a client may send (larger: close 1009)."""
    ping_interval: float = 20.0
    ping_timeout: float = 20.0
    replay_page_bytes: int = 256 * 1024
    """Replay is sent in frames (v2 batches) of at most about this many bytes."""

    # Where sessions are kept (docs/design/store.md).
    store: str = "memory"
    """``memory``, ``sqlite:///PATH`` or ``redis://HOST:PORT/DB``."""
    node_name: str = ""
    """This node's name among several on one Redis (as owner of its sessions). Empty: a new
    random name at every start. A node restarted with the same name takes its sessions back
    at once instead of after ``node_lease``; two running nodes must never share a name."""
    node_lease: float = 10.0
    """With several nodes on Redis: a node owns a session for this many seconds after it last
    renewed its ownership (every third of it); a node that dies is replaced after at most
    this long (and the next scan, ``node_lease / 3`` later)."""
    owner_wait: float = 30.0
    """With several nodes on Redis: how long a request for a session whose owner is gone
    (prompt, cancel, config, policy, lease, close) waits for the node taking it over; then it
    fails with ``-32051``."""
    node_url: str = ""
    """With several nodes on Redis: the address (``http://10.0.0.5:8765``) at which the other
    nodes reach this one to relay the Streamable HTTP requests of the connections it holds.
    Empty: the local address each connection's ``initialize`` arrived at."""
    snapshot_events: int = 1000
    """A durable store keeps a compacted snapshot of a session every this many events (and
    at a clean shutdown), each session at its own phase (``hub.sessions.session
    .snapshot_phase``); a restart folds the snapshot and the events after it."""

    # The session log.
    retained_events: int = 50_000
    retained_bytes: int = 64 * MIB
    """The log keeps a tail of at most this many events and bytes for cursor resumes."""

    # Agents.
    max_line_bytes: int = 32 * MIB
    """Longest line an agent may write on stdout."""
    agent_response_timeout: float = 60.0
    """How long an agent may take to answer a session request (``session/new``, resume,
    close, delete, config options) and to end a turn after ``session/cancel``; then the
    request fails with ``-32042`` and the hub ends the turn itself (``0``: wait for ever)."""
    stderr_lines: int = 500

    # Arbitration.
    prompt_policy: PromptPolicy = "queue"
    permission_policy: PermissionPolicy = "first"
    consensus_quorum: int = 2
    """Under the ``consensus`` permission policy, how many distinct principals must allow."""
    permission_rules: tuple[Mapping[str, Any], ...] = ()
    """Rules that answer matching permission requests in every session
    (``hub.sessions.rules``; docs/configuration.md)."""
    permission_timeout: float = 600.0
    """A permission request nobody answers within this many seconds resolves ``cancelled``."""
    answer_grace: float = 120.0
    """How long a permission request or an elicitation waits, once every client that may answer
    it has disconnected, for one to come back (``0``: it is cancelled at once)."""
    lease_timeout: float = 300.0
    """A prompt lease expires after this many seconds without activity from its holder."""
    max_queued_prompts: int = 32
    presence_viewers: int = 100
    """``_hub_presence`` lists viewers one by one while a session has at most this many;
    beyond it, viewers are only counted (clients of other roles are always listed)."""

    # What clients may hand an agent, and how much they may use (docs/limits.md).
    workspace_roots: tuple[str, ...] = ()
    """A session's ``cwd`` must resolve (after symlinks) under one of these directories. Empty:
    no ``cwd`` is allowed. ``acp-hub demo`` defaults to the directory it was started in;
    ``acp-hub serve`` refuses to start without it."""
    mcp_servers: McpPolicy = "owner"
    """Who may pass ``mcpServers`` to an agent: ``none``, ``owner`` or ``any``."""
    mcp_commands: tuple[str, ...] = ()
    """When not empty, the only commands a stdio MCP server entry may run: each entry a
    command, alone (any arguments) or with its argument patterns (shell words, globs; a last
    ``**``: any further arguments). Its ``env`` may then not set ``LD_*``, ``PATH``,
    ``NODE_OPTIONS``, ``PYTHON*`` and the like (``hub.sessions.workspace.DENIED_ENV``)."""
    mcp_allowed_env: tuple[str, ...] = ()
    """Variables (names or globs) an MCP server entry may set under ``mcp_commands`` although
    they are in the denied list."""
    extension_roles: Mapping[str, Any] = field(default_factory=dict)
    """Methods the hub does not handle itself are passed to the session's agent (ACP's
    extension surface, ``docs/protocol.md``); each needs ``driver`` unless this table names
    another role for it (``{ "_acme/read_only" = "viewer" }``). A method named here may also
    be sent without a ``sessionId``: it then goes to the default agent, for a credential
    that covers every session and that agent."""
    max_connections: int = 8192
    """Client connections the hub holds at once (WebSocket and Streamable HTTP); beyond it new
    ones are refused before the upgrade with HTTP 503."""
    max_connections_per_address: int = 0
    """Connections from one remote address (``0``: no cap, the default, because clients behind
    a proxy or a NAT share an address); beyond it: HTTP 429."""
    max_connections_per_principal: int = 2048
    """Connections of one principal (the credential's ``sub``); beyond it: HTTP 429."""
    initialize_timeout: float = 10.0
    """A connection that has not sent ``initialize`` this many seconds after it opened is
    closed with 1008."""
    request_rate: float = 100.0
    """Requests per second a connection may send on average (``0``: no limit) ..."""
    request_burst: int = 500
    """... and in a burst; a request beyond them is answered ``-32044`` with ``retryAfter``."""
    max_pending_requests: int = 64
    """Requests of one connection the hub may be working on at once (prompts, session/new,
    ...); one more is answered ``-32044``."""
    max_streams_per_connection: int = 32
    """Session streams one Streamable HTTP connection may hold besides its own stream; past it
    a GET for one more session is answered 429 and a session's frames travel on the
    connection's stream."""
    max_sessions: int = 1000
    """Live sessions in the hub; ``session/new`` beyond it: ``-32050``."""
    max_sessions_per_principal: int = 100
    """Live sessions created by one principal; beyond it: ``-32050``."""
    list_page_size: int = 100
    """Sessions in one page of ``session/list`` (the rest follow its ``nextCursor``)."""
    max_prompt_bytes: int = 1 * MIB
    """The largest prompt (its content blocks, encoded) a client may send: ``-32602``."""
    max_state_bytes: int = 64 * MIB
    """When a session's state has grown by this many bytes of appended content (messages,
    thoughts, terminal output), new prompts are refused with ``-32050``; the turn in progress
    still streams and nothing already received is dropped."""
    idle_session_timeout: float = 86_400.0
    """A session with no client attached and no turn running is closed after this many seconds
    (``0``: never)."""

    # Notifications (docs/configuration.md, "Webhooks").
    webhooks: tuple[Mapping[str, Any], ...] = field(default=(), repr=False)
    """``[[hub.webhooks]]``: where the hub posts its notices (``hub.server.webhooks`` checks
    each). Config file only; kept out of ``repr`` (URLs and secrets)."""

    # Web.
    embed_origins: tuple[str, ...] = ()
    """Origins allowed to embed ``/embed/{session}`` in a frame."""

    # Operations.
    metrics_token: str = field(default="", repr=False)
    """The bearer token ``GET /metrics`` requires (``Authorization: Bearer ...``); empty, the
    default: ``/metrics`` is refused to everyone. Kept out of ``repr`` (and so of logs)."""

    def merged(self, values: Mapping[str, Any]) -> Settings:
        """A copy with ``values`` applied; unknown keys raise ``ValueError`` naming them."""
        known = {f.name: f for f in fields(self)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown hub setting(s): {', '.join(unknown)}")
        clean: dict[str, Any] = {}
        for key, value in values.items():
            current = getattr(self, key)
            if isinstance(current, tuple) and isinstance(value, list):
                value = tuple(value)
            if isinstance(current, float) and isinstance(value, int):
                value = float(value)
            if not isinstance(value, type(current)) and not (
                key in ("issuers", "extension_roles") and isinstance(value, Mapping)
            ):
                raise ValueError(f"hub setting {key!r} must be {type(current).__name__}")
            clean[key] = value
        result = replace(self, **clean)
        result.validate()
        return result

    def validate(self) -> None:
        """Raise ``ValueError`` for settings that cannot work together."""
        if self.auth not in AUTH_MODES:
            raise ValueError(f"auth must be one of {AUTH_MODES}")
        if not 0 <= self.port <= MAX_PORT:
            raise ValueError(f"port must be between 0 and {MAX_PORT} (0: any free port)")
        if self.auth == "none" and not is_loopback(self.host):
            raise ValueError(
                f'auth = "none" is only allowed on a loopback address, not on {self.host!r}'
            )
        if not is_loopback(self.host) and not self.allowed_hosts:
            raise ValueError(
                f"allowed_hosts is required when binding to {self.host!r}: the host names "
                "clients use to reach the hub (DNS rebinding protection)"
            )
        for proxy in self.trusted_proxies:
            try:
                ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies: {proxy!r} is not an IP address or a CIDR network"
                ) from None
        if self.default_role not in ROLES:
            raise ValueError(f"default_role must be one of {ROLES}")
        if self.prompt_policy not in PROMPT_POLICIES:
            raise ValueError(f"prompt_policy must be one of {PROMPT_POLICIES}")
        if self.permission_policy not in PERMISSION_POLICIES:
            raise ValueError(f"permission_policy must be one of {PERMISSION_POLICIES}")
        if self.consensus_quorum < 1:
            raise ValueError("consensus_quorum must be at least 1")
        if self.presence_viewers < 0:
            raise ValueError("presence_viewers must not be negative")
        parse_store_url(self.store)
        if self.node_url and not _is_node_url(self.node_url):
            raise ValueError(f"node_url must be http(s)://HOST[:PORT], not {self.node_url!r}")
        token = self.metrics_token
        if token and (
            len(token) < METRICS_TOKEN_MIN
            or not token.isascii()
            or not token.isprintable()
            or " " in token
        ):
            raise ValueError(
                f"metrics_token must be at least {METRICS_TOKEN_MIN} printable ASCII characters "
                "without spaces"
            )
        for method, role in self.extension_roles.items():
            if not isinstance(method, str) or not method or method.startswith(("_hub", "$/")):
                raise ValueError(f"extension_roles: {method!r} is not an extension method")
            if role not in ROLES:
                raise ValueError(f"extension_roles: the role of {method!r} must be one of {ROLES}")
        if self.mcp_servers not in MCP_POLICIES:
            raise ValueError(f"mcp_servers must be one of {MCP_POLICIES}")
        for command in self.mcp_commands:
            mcp_command_words(command)
        for name in (
            "max_sessions",
            "max_sessions_per_principal",
            "idle_session_timeout",
            "agent_response_timeout",
            "answer_grace",
            "owner_wait",
            "max_connections",
            "max_connections_per_address",
            "max_connections_per_principal",
            "request_rate",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in (
            "list_page_size",
            "initialize_timeout",
            "request_burst",
            "max_pending_requests",
            "max_streams_per_connection",
            "max_prompt_bytes",
            "max_state_bytes",
            "outbox_bytes",
            "max_frame_bytes",
            "retained_events",
            "max_line_bytes",
            "snapshot_events",
            "node_lease",
            "audit_retained",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


def _is_node_url(text: str) -> bool:
    """Whether ``text`` is ``http(s)://HOST[:PORT]`` (a path of ``/`` at most)."""
    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not parts.path.strip("/")
        and not parts.query
    )


def mcp_command_words(entry: str) -> list[str]:
    """An ``mcp_commands`` entry's shell words (the command, then argument patterns: read by
    ``hub.sessions.workspace.parse_mcp_command``); ``ValueError`` naming it when it cannot be
    read or names no command."""
    try:
        words = shlex.split(entry)
    except ValueError as exc:
        raise ValueError(f"mcp_commands entry {entry!r}: {exc}") from None
    if not words:
        raise ValueError("mcp_commands entries must name a command")
    return words


def role_rank(role: str) -> int:
    """The position of ``role`` in ``viewer < approver < driver < owner`` (-1 if unknown)."""
    try:
        return ROLES.index(role)  # type: ignore[arg-type,unused-ignore]
    except ValueError:
        return -1


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed ``store`` setting. ``target`` is the SQLite file's path or the Redis URL."""

    kind: str
    target: str = ""
    options: tuple[tuple[str, str], ...] = ()

    def redacted(self) -> str:
        """The setting as it may be logged (no password)."""
        if self.kind != "redis":
            return self.kind if self.kind == "memory" else f"sqlite:///{self.target}"
        parts = urlsplit(self.target)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"


def parse_store_url(text: str) -> StoreUrl:
    """Parse the ``store`` setting; ``ValueError`` naming what is wrong.

    ``sqlite:///relative/path`` and ``sqlite:////absolute/path`` (a relative path is relative
    to the working directory); option ``?synchronous=normal|full``. ``redis://`` and
    ``rediss://`` (TLS) URLs as redis-py takes them (``redis://:PASSWORD@HOST:PORT/DB``).
    """
    text = text.strip()
    if text == "memory":
        return StoreUrl("memory")
    if text.startswith("sqlite://"):
        rest = text[len("sqlite://") :]
        if not rest.startswith("/") or len(rest) < 2:
            raise ValueError("store: a sqlite store is sqlite:///PATH (three slashes)")
        path, _, query = rest[1:].partition("?")
        options = tuple((k, v[-1]) for k, v in parse_qs(query).items())
        unknown = [k for k, _ in options if k != "synchronous"]
        if unknown:
            raise ValueError(f"store: unknown sqlite option(s): {', '.join(unknown)}")
        return StoreUrl("sqlite", path, options)
    if text.startswith(("redis://", "rediss://")):
        parts = urlsplit(text)
        try:
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = urlsplit("redis://")
        if not parts.hostname:
            raise ValueError("store: a redis store is redis://HOST:PORT/DB")
        return StoreUrl("redis", text)
    raise ValueError("store must be 'memory', 'sqlite:///PATH' or 'redis://HOST:PORT/DB'")
