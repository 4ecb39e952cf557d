"""The hub's signing key and its state directory.

The key that signs the hub's own tokens (owner URLs, share links, ``acp-hub token``) comes
from, in order: the ``ACP_HUB_SECRET`` environment variable, the file named by the
``secret_file`` setting, or a file ``secret`` in the state directory, generated on first
start (32 random bytes, base64url, mode 0600). Several hub nodes share a key by giving each
the same one. A key shorter than 32 bytes is refused: HS256 with a short key can be brute
forced offline from any token.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hub.settings import Settings

SECRET_ENV = "ACP_HUB_SECRET"
STATE_DIR_ENV = "ACP_HUB_STATE_DIR"
MIN_SECRET_BYTES = 32


class HubKeyError(ValueError):
    """The hub's key cannot be loaded (the message says which source and why)."""


@dataclass(frozen=True, slots=True)
class HubKey:
    """The HS256 key of the hub's own tokens; ``kid`` identifies it without revealing it
    (a token signed by a previous key is refused as ``unknown_key``), ``source`` says where
    it came from (for the start-up log line, never the key itself)."""

    secret: bytes
    kid: str
    source: str

    def __repr__(self) -> str:  # never print the key
        return f"HubKey(kid={self.kid!r}, source={self.source!r})"


def state_dir(settings: Settings, environ: Mapping[str, str] = os.environ) -> Path:
    """The hub's state directory: the ``state_dir`` setting, ``ACP_HUB_STATE_DIR``,
    ``$XDG_STATE_HOME/acp-hub`` or ``~/.local/state/acp-hub``."""
    if settings.state_dir:
        return Path(settings.state_dir).expanduser()
    if environ.get(STATE_DIR_ENV):
        return Path(environ[STATE_DIR_ENV]).expanduser()
    xdg = environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "acp-hub"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) if needed and return it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` atomically with ``data``, readable by the owner only (0600)."""
    ensure_private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def key_from_secret(secret: bytes, source: str) -> HubKey:
    """The ``HubKey`` of ``secret`` (``HubKeyError`` when shorter than 32 bytes)."""
    if len(secret) < MIN_SECRET_BYTES:
        raise HubKeyError(
            f"{source}: the hub's secret must be at least {MIN_SECRET_BYTES} bytes "
            f"(got {len(secret)}); generate one with: openssl rand -base64 32"
        )
    kid = hashlib.sha256(b"acp-hub key id\x00" + secret).hexdigest()[:16]
    return HubKey(secret, kid, source)


def load_hub_key(settings: Settings, environ: Mapping[str, str] = os.environ) -> HubKey:
    """The hub's key (see the module docstring); ``HubKeyError`` when a configured source is
    unusable. Generating the key is the only write, and it never replaces an existing file."""
    value = environ.get(SECRET_ENV)
    if value:
        return key_from_secret(value.strip().encode(), SECRET_ENV)
    if settings.secret_file:
        path = Path(settings.secret_file).expanduser()
        try:
            return key_from_secret(path.read_bytes().strip(), str(path))
        except OSError as exc:
            raise HubKeyError(f"secret_file {path}: {exc.strerror or exc}") from None
    path = ensure_private_dir(state_dir(settings, environ)) / "secret"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            return key_from_secret(path.read_bytes().strip(), str(path))
        except OSError as exc:
            raise HubKeyError(f"{path}: {exc.strerror or exc}") from None
    except OSError as exc:
        raise HubKeyError(f"{path}: cannot create the hub's key: {exc.strerror or exc}") from None
    secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=")
    with os.fdopen(fd, "wb") as fh:
        fh.write(secret + b"\n")
    return key_from_secret(secret, f"{path} (generated)")
