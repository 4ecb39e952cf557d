"""The ``store`` setting: ``memory``, ``sqlite:///PATH`` or ``redis://HOST:PORT/DB``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


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
        if not parts.hostname:
            raise ValueError("store: a redis store is redis://HOST:PORT/DB")
        return StoreUrl("redis", text)
    raise ValueError("store must be 'memory', 'sqlite:///PATH' or 'redis://HOST:PORT/DB'")
