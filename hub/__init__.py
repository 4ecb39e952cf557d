"""acp-hub: share ACP agent sessions with many WebSocket clients."""

from __future__ import annotations

__version__ = "0.1.0"
