"""What a client may hand an agent when it starts a session: a working directory and MCP servers.

An agent runs commands on the host in its session's ``cwd`` and starts the MCP servers it is
given, so both are checked before ``session/new`` reaches the agent:

* ``cwd`` must be an absolute path of at most ``MAX_CWD_BYTES`` bytes, without control
  characters, that exists as a directory and resolves (after symlinks) under one of the
  configured ``workspace_roots``. The agent gets the resolved path.
* ``mcpServers`` entries follow the ``mcp_servers`` policy: ``none`` refuses every entry,
  ``owner`` lets the hub's own owners pass entries (a hub-signed owner credential: the owner
  URL, ``acp-hub token --role owner``; not a share link, not an external issuer's token),
  ``any`` lets every client that may start a session pass them (an external issuer's owners
  too).
* When ``mcp_commands`` is not empty, a stdio entry must match one of its entries: a command
  (matched as given and as resolved on ``PATH``) and, when the entry names them, its arguments
  (each word a glob pattern, matched one for one; a last word ``**`` admits any further
  arguments). An entry of a command alone admits any arguments, which is the command's
  business: ``npx``, ``uvx``, ``python`` or ``sh`` run whatever their arguments name, so pin
  those with their arguments. Its ``env`` may then not set a variable that changes what a
  program loads or runs (``DENIED_ENV``: ``LD_*``, ``DYLD_*``, ``NODE_OPTIONS``,
  ``PYTHON*``, ``PATH``, ...) unless ``mcp_allowed_env`` names it. Without ``mcp_commands``
  an entry may run any command anyway, so neither is checked.

Both checks raise ``WorkspaceRefusal`` with a message meant for the client; the caller answers
it as ``-32602`` (invalid params) or ``-32040`` (forbidden), as ``kind`` says.
See ``docs/limits.md``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from hub.settings import McpPolicy, mcp_command_words

__all__ = [
    "DENIED_ENV",
    "MAX_CWD_BYTES",
    "McpPolicy",
    "WorkspaceRefusal",
    "check_cwd",
    "check_mcp_servers",
    "parse_mcp_command",
    "resolve_roots",
]


MAX_CWD_BYTES = 4096
"""The longest ``cwd`` accepted (Linux's ``PATH_MAX``)."""


class WorkspaceRefusal(Exception):
    """A ``cwd`` or MCP server entry the hub will not hand to an agent.

    ``kind`` is ``"invalid"`` (malformed: answer ``-32602``) or ``"forbidden"`` (well formed
    but not allowed: answer ``-32040``).
    """

    def __init__(self, kind: Literal["invalid", "forbidden"], message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def resolve_roots(roots: Sequence[str]) -> tuple[Path, ...]:
    """The configured roots, resolved once (symlinks followed). A root that does not exist is
    a configuration error: ``ValueError`` names it."""
    resolved: list[Path] = []
    for root in roots:
        path = Path(root).expanduser()
        if not path.is_absolute():
            raise ValueError(f"workspace root {root!r} must be an absolute path")
        if not path.is_dir():
            raise ValueError(f"workspace root {root!r} is not a directory")
        resolved.append(path.resolve())
    return tuple(resolved)


def check_cwd(cwd: Any, roots: Sequence[Path]) -> str:
    """The resolved working directory for ``cwd``, or ``WorkspaceRefusal``.

    ``roots`` are resolved paths (``resolve_roots``); an empty tuple refuses every ``cwd``.
    """
    if not isinstance(cwd, str) or not cwd:
        raise WorkspaceRefusal("invalid", "cwd must be a non-empty string")
    if len(cwd.encode("utf-8", "surrogatepass")) > MAX_CWD_BYTES:
        raise WorkspaceRefusal("invalid", f"cwd is longer than {MAX_CWD_BYTES} bytes")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in cwd):
        raise WorkspaceRefusal("invalid", "cwd must not contain control characters")
    if not os.path.isabs(cwd):
        raise WorkspaceRefusal("invalid", "cwd must be an absolute path")
    if not roots:
        raise WorkspaceRefusal(
            "forbidden", "this hub has no workspace_roots configured: no cwd is allowed"
        )
    try:
        resolved = Path(cwd).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise WorkspaceRefusal("invalid", f"cwd {cwd!r} does not exist") from None
    if not resolved.is_dir():
        raise WorkspaceRefusal("invalid", f"cwd {cwd!r} is not a directory")
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise WorkspaceRefusal("forbidden", f"cwd {cwd!r} is outside the hub's workspace roots")
    return str(resolved)


DENIED_ENV: tuple[str, ...] = (
    "LD_*",
    "DYLD_*",
    "PATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHON*",
    "PERL5LIB",
    "PERL5OPT",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "GCONV_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "LUA_INIT*",
    "LUA_PATH*",
    "LUA_CPATH*",
    "PHPRC",
    "GIT_*",
    "NPM_CONFIG_*",
    "UV_*",
    "PIP_*",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
)
"""Environment variables an MCP server entry may not set under ``mcp_commands`` (unless
``mcp_allowed_env`` names them): each makes a program load or run other code (the dynamic
loader's, interpreters' and package managers' options, the search path, the home whose
start-up files a program reads). Matched case-insensitively; ``*`` is a glob."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ANY_FURTHER = "**"
"""The last word of an ``mcp_commands`` entry that admits any further arguments."""


@dataclass(frozen=True, slots=True)
class McpCommand:
    """One ``mcp_commands`` entry: the command and, unless ``None`` (any), its argument
    patterns; ``more``: any further arguments after those."""

    command: str
    args: tuple[str, ...] | None
    more: bool = False

    def admits(self, args: Sequence[str]) -> bool:
        if self.args is None:
            return True
        if len(args) < len(self.args) or (len(args) > len(self.args) and not self.more):
            return False
        return all(fnmatchcase(a, p) for a, p in zip(args, self.args, strict=False))


def parse_mcp_command(entry: str) -> McpCommand:
    """An ``mcp_commands`` entry (shell words: the command, then argument patterns);
    ``ValueError`` naming it when it cannot be read."""
    words = mcp_command_words(entry)
    if len(words) == 1:
        return McpCommand(words[0], None)
    more = words[-1] == ANY_FURTHER
    return McpCommand(words[0], tuple(words[1:-1] if more else words[1:]), more)


def env_denied(name: str, allowed: Sequence[str]) -> bool:
    """Whether an MCP server entry may not set ``name`` (``DENIED_ENV`` less ``allowed``)."""
    upper = name.upper()
    if any(fnmatchcase(upper, pattern.upper()) for pattern in allowed):
        return False
    return any(fnmatchcase(upper, pattern) for pattern in DENIED_ENV)


def check_mcp_servers(
    servers: Any,
    *,
    policy: McpPolicy,
    commands: Sequence[str],
    is_owner: bool,
    allowed_env: Sequence[str] = (),
) -> list[Any]:
    """``servers`` if the policy lets this client pass them, else ``WorkspaceRefusal``.

    ``is_owner``: the client is one of the hub's own owners (see the module docstring).
    An empty list is always allowed. Only the shape needed for the decision is checked here;
    the entries' other fields are validated where they are translated for the agent.
    """
    if not isinstance(servers, list):
        raise WorkspaceRefusal("invalid", "mcpServers must be an array")
    if not servers:
        return servers
    if policy == "none":
        raise WorkspaceRefusal("forbidden", "this hub does not pass MCP servers to agents")
    if policy == "owner" and not is_owner:
        raise WorkspaceRefusal(
            "forbidden", "only the hub's owners may pass MCP servers to agents (mcp_servers)"
        )
    if commands:
        rules = [parse_mcp_command(c) for c in commands]
        for entry in servers:
            if not isinstance(entry, dict):
                raise WorkspaceRefusal("invalid", "mcpServers entries must be objects")
            if "command" not in entry:
                continue  # http / sse entries start no process on the host
            _check_stdio(entry, rules, allowed_env)
    return servers


def _check_stdio(
    entry: dict[str, Any], rules: Sequence[McpCommand], allowed_env: Sequence[str]
) -> None:
    command = entry["command"]
    if not isinstance(command, str):
        raise WorkspaceRefusal(
            "forbidden", f"MCP server command {command!r} is not in mcp_commands"
        )
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise WorkspaceRefusal("invalid", "an MCP server's args must be strings")
    matching = [r for r in rules if _same_command(command, r.command)]
    if not matching:
        raise WorkspaceRefusal(
            "forbidden", f"MCP server command {command!r} is not in mcp_commands"
        )
    if not any(r.admits(args) for r in matching):
        raise WorkspaceRefusal(
            "forbidden",
            f"the arguments of MCP server command {command!r} are not allowed by mcp_commands",
        )
    env = entry.get("env") or []
    if not isinstance(env, list):
        raise WorkspaceRefusal("invalid", "an MCP server's env must be a list")
    for variable in env:
        name = variable.get("name") if isinstance(variable, dict) else None
        if not isinstance(name, str) or _ENV_NAME.fullmatch(name) is None:
            raise WorkspaceRefusal("invalid", "an MCP server's env names must be variable names")
        if env_denied(name, allowed_env):
            raise WorkspaceRefusal(
                "forbidden",
                f"an MCP server may not set {name} (it changes what programs load or run; "
                "mcp_allowed_env)",
            )


def _same_command(command: str, allowed: str) -> bool:
    """Whether ``command`` is ``allowed``, as given or as both resolve on ``PATH``."""
    if command == allowed:
        return True
    found, wanted = shutil.which(command), shutil.which(allowed)
    return (
        found is not None
        and wanted is not None
        and os.path.realpath(found) == os.path.realpath(wanted)
    )
