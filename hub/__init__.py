"""acp-hub: share ACP agent sessions with many WebSocket clients."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    # One source of truth: the version in pyproject.toml, as the installed metadata has it.
    __version__ = version("acp-hub")
except PackageNotFoundError:  # pragma: no cover - a checkout on sys.path, never installed
    __version__ = "0+unknown"
