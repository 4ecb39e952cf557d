"""The owner URL file: where a running hub leaves its owner URL for the person who started it.

Each hub writes its own file, ``owner-url-PORT`` in its state directory (mode 0600), named by
the port it listens on, so that two hubs of one user (same state directory, different ports)
never overwrite each other's. A clean shutdown removes the file again (if it still holds this
hub's URL), so the files present name the hubs running. ``acp-hub url`` reads them back
(``find``): one hub, its URL; several, the ports to choose from.
"""

from __future__ import annotations

import re
from pathlib import Path

from hub.access.keys import write_private

__all__ = ["PREFIX", "find", "path_for", "remove", "write"]

PREFIX = "owner-url-"
_NAME = re.compile(rf"^{PREFIX}(\d{{1,5}})$")


def path_for(state: Path, port: int) -> Path:
    """The owner URL file of the hub listening on ``port`` with state directory ``state``."""
    return state / f"{PREFIX}{port}"


def write(state: Path, port: int, url: str) -> Path:
    """Write ``url`` to the hub's owner URL file (0600, atomically); its path."""
    path = path_for(state, port)
    write_private(path, (url + "\n").encode())
    return path


def remove(path: Path, url: str) -> None:
    """Remove ``path`` if it still holds ``url`` (another hub may have taken the port since)."""
    try:
        if path.read_text().strip() == url:
            path.unlink()
    except OSError:
        pass


def find(state: Path) -> dict[int, Path]:
    """The owner URL files in ``state`` by port (the hubs that are running, or crashed)."""
    try:
        entries = list(state.iterdir())
    except OSError:
        return {}
    found = {}
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is not None and entry.is_file():
            found[int(match.group(1))] = entry
    return dict(sorted(found.items()))
