"""What a client may hand an agent when it starts a session: a working directory and MCP servers.

An agent runs commands on the host in its session's ``cwd`` and starts the MCP servers it is
given, so both are checked before ``session/new`` reaches the agent:

* ``cwd`` must be an absolute path of at most ``MAX_CWD_BYTES`` bytes, without control
  characters, that exists as a directory and resolves (after symlinks) under one of the
  configured ``workspace_roots``. The agent gets the resolved path.
* ``mcpServers`` entries follow the ``mcp_servers`` policy: ``none`` refuses every entry,
  ``owner`` lets owners pass entries, ``any`` lets every client that may start a session pass
  them. A stdio entry's ``command`` must also be in ``mcp_commands`` when that list is not
  empty (matched against the command as given and as resolved on ``PATH``).

Both checks raise ``WorkspaceRefusal`` with a message meant for the client; the caller answers
it as ``-32602`` (invalid params) or ``-32040`` (forbidden), as ``kind`` says.
See ``docs/limits.md``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from hub.settings import McpPolicy

__all__ = [
    "MAX_CWD_BYTES",
    "McpPolicy",
    "WorkspaceRefusal",
    "check_cwd",
    "check_mcp_servers",
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


def check_mcp_servers(
    servers: Any, *, policy: McpPolicy, commands: Sequence[str], is_owner: bool
) -> list[Any]:
    """``servers`` if the policy lets this client pass them, else ``WorkspaceRefusal``.

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
        raise WorkspaceRefusal("forbidden", "only owners may pass MCP servers to agents")
    if commands:
        allowed = _allowed_commands(commands)
        for entry in servers:
            if not isinstance(entry, dict):
                raise WorkspaceRefusal("invalid", "mcpServers entries must be objects")
            if "command" not in entry:
                continue  # http / sse entries start no process on the host
            command = entry["command"]
            if not isinstance(command, str) or not _command_allowed(command, allowed):
                raise WorkspaceRefusal(
                    "forbidden", f"MCP server command {command!r} is not in mcp_commands"
                )
    return servers


def _allowed_commands(commands: Sequence[str]) -> set[str]:
    allowed = set(commands)
    for command in commands:
        found = shutil.which(command)
        if found:
            allowed.add(os.path.realpath(found))
    return allowed


def _command_allowed(command: str, allowed: set[str]) -> bool:
    if command in allowed:
        return True
    found = shutil.which(command)
    return found is not None and os.path.realpath(found) in allowed
