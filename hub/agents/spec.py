"""Agent definitions: ``AgentSpec``, ``--agent NAME=COMMAND`` and the TOML config file.

An agent is defined by name with the program to run, its arguments, extra environment
variables, a working directory and the protocol version to speak (``auto``, ``1`` or ``2``).
Definitions come from the command line (``parse_agent_arg``) or from a TOML file
(``load_config``), whose format is documented in ``docs/agents.md``::

    default_agent = "claude"

    [hub]                      # passed through untouched to the server layer
    port = 8765

    [agents.claude]
    command = "claude-agent-acp"
    args = ["--verbose"]
    env = { CLAUDE_CONFIG_DIR = "/srv/claude" }
    cwd = "/srv/work"          # relative paths are relative to the config file
    protocol = "auto"          # "auto" (offer 2, accept 1), 1 or 2
    auth_method = "api-key"    # log in with this of the agent's authMethods after each start
    auth_meta = { team = "x" } # passed as the login request's _meta
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeAlias

from hub.protocol.version import Choice, parse_choice

__all__ = [
    "AgentSpec",
    "ConfigError",
    "HubConfig",
    "ProtocolChoice",
    "load_config",
    "parse_agent_arg",
    "parse_protocol",
]

ProtocolChoice: TypeAlias = Choice
"""``auto`` offers protocol 2 and accepts 1; ``1`` or ``2`` offer and accept only that one."""

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_AGENT_KEYS = frozenset(
    {"command", "args", "env", "cwd", "protocol", "auth_method", "auth_meta", "permission_rules"}
)


class ConfigError(ValueError):
    """An agent definition or config file that cannot be used; the message names the culprit."""


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """How to run one agent.

    ``command`` is the program (looked up on the trimmed ``PATH`` the agent gets), ``args``
    its arguments, ``env`` variables added to the trimmed environment, ``cwd`` the process's
    working directory (``None``: the hub's), ``protocol`` the version choice.
    ``auth_method`` is the id of one of the agent's ``authMethods`` to log in with right
    after every start (``None``: no configured login), ``auth_meta`` the ``_meta`` of that
    login request (https://agentclientprotocol.com/protocol/initialization).
    """

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cwd: str | None = None
    protocol: ProtocolChoice = "auto"
    auth_method: str | None = None
    auth_meta: Mapping[str, Any] | None = None
    permission_rules: tuple[Mapping[str, Any], ...] = ()
    """Rules that answer matching permission requests in this agent's sessions
    (``hub.sessions.rules``, which checks them when the hub starts)."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"agent name {self.name!r} must start with a letter or digit and contain only "
                "letters, digits, '_', '.' and '-'"
            )
        if not self.command:
            raise ConfigError(f"agent {self.name!r}: command must not be empty")
        # Freeze what callers may have passed as mutable containers.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "protocol", parse_protocol(self.protocol, self.name))
        if self.auth_method is not None and (
            not isinstance(self.auth_method, str) or not self.auth_method
        ):
            raise ConfigError(f"agent {self.name!r}: auth_method must be a non-empty string")
        if self.auth_meta is not None:
            object.__setattr__(self, "auth_meta", MappingProxyType(dict(self.auth_meta)))

    @property
    def argv(self) -> list[str]:
        """The full command line: ``[command, *args]``."""
        return [self.command, *self.args]


@dataclass(frozen=True, slots=True)
class HubConfig:
    """A loaded config file: the agents by name (in file order), the default agent's name
    (``None`` when there are no agents) and the ``[hub]`` table as a plain dict."""

    agents: Mapping[str, AgentSpec]
    default_agent: str | None = None
    hub: Mapping[str, Any] = field(default_factory=dict)


def parse_protocol(value: object, agent: str = "?") -> ProtocolChoice:
    """Normalize a protocol choice (``hub.protocol.version.parse_choice``): ``"auto"``,
    ``1``/``"1"`` or ``2``/``"2"``; ``ConfigError`` naming the agent otherwise."""
    try:
        return parse_choice(value)
    except ValueError:
        raise ConfigError(
            f'agent {agent!r}: protocol must be "auto", 1 or 2, got {value!r}'
        ) from None


def parse_agent_arg(text: str) -> AgentSpec:
    """Parse a command-line definition ``NAME=COMMAND [ARGS...]`` (shell quoting applies)."""
    name, sep, rest = text.partition("=")
    if not sep:
        raise ConfigError(f"--agent {text!r}: expected NAME=COMMAND [ARGS...]")
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"--agent {text!r}: {exc}") from None
    if not words:
        raise ConfigError(f"--agent {text!r}: the command is missing")
    return AgentSpec(name=name.strip(), command=words[0], args=tuple(words[1:]))


def load_config(path: str | Path) -> HubConfig:
    """Read a TOML config file; raise ``ConfigError`` naming the file and key on any problem."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return config_from_dict(data, base=path.parent, source=str(path))


def config_from_dict(data: Mapping[str, Any], *, base: Path, source: str) -> HubConfig:
    """Build a ``HubConfig`` from parsed TOML; relative ``cwd`` values are resolved
    against ``base``."""
    hub = data.get("hub", {})
    if not isinstance(hub, dict):
        raise ConfigError(f"{source}: [hub] must be a table")
    agents_table = data.get("agents", {})
    if not isinstance(agents_table, dict):
        raise ConfigError(f"{source}: [agents] must be a table of [agents.NAME] tables")
    agents: dict[str, AgentSpec] = {}
    for name, table in agents_table.items():
        agents[name] = _agent_from_table(name, table, base=base, source=source)

    default = data.get("default_agent")
    if default is not None:
        if not isinstance(default, str) or default not in agents:
            known = ", ".join(agents) or "none"
            raise ConfigError(
                f"{source}: default_agent {default!r} is not a defined agent (defined: {known})"
            )
    elif agents:
        default = next(iter(agents))
    return HubConfig(agents=agents, default_agent=default, hub=dict(hub))


def _agent_from_table(name: str, table: object, *, base: Path, source: str) -> AgentSpec:
    where = f"{source}: [agents.{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = set(table) - _AGENT_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))} "
            f"(allowed: {', '.join(sorted(_AGENT_KEYS))})"
        )
    command = table.get("command")
    if not isinstance(command, str) or not command:
        raise ConfigError(f"{where}: command must be a non-empty string")
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}: args must be a list of strings")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ConfigError(f"{where}: env must be a table of string values")
    cwd = table.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            raise ConfigError(f"{where}: cwd must be a non-empty string")
        cwd = str((base / Path(cwd).expanduser()).resolve())
    auth_method = table.get("auth_method")
    if auth_method is not None and (not isinstance(auth_method, str) or not auth_method):
        raise ConfigError(f"{where}: auth_method must be a non-empty string")
    auth_meta = table.get("auth_meta")
    if auth_meta is not None and not isinstance(auth_meta, dict):
        raise ConfigError(f"{where}: auth_meta must be a table")
    rules = table.get("permission_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ConfigError(f"{where}: permission_rules must be a list of tables")
    try:
        return AgentSpec(
            name=name,
            permission_rules=tuple(rules),
            command=command,
            args=tuple(args),
            env=env,
            cwd=cwd,
            protocol=parse_protocol(table.get("protocol", "auto"), name),
            auth_method=auth_method,
            auth_meta=auth_meta,
        )
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
