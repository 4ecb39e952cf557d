"""Shape checks shared by the fold, its checks and the translators, and the hub's ``_meta`` notes.

Only what a caller relies on is checked; the rest of a payload passes untouched. Every check
raises ``InvalidParams`` (the peer's fault) as ``"<where>: <why>"``, where ``where`` names the
variant or the path of the offending value (``update.content[2]``), and returns the checked
value so that a caller reads and checks in one step.

``_meta`` objects belong to the peers (https://agentclientprotocol.com/protocol/v2/extensibility):
the hub keeps them and writes its own notes only under its key ``HUB_META`` (``"acp-hub"``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, NoReturn, TypeGuard

from hub.protocol.errors import InvalidParams

__all__ = [
    "HUB_META",
    "check_block",
    "copy_meta",
    "decode_base64",
    "fail",
    "is_int",
    "named_entries",
    "optional_object",
    "optional_str",
    "rename",
    "require_list",
    "require_object",
    "require_objects",
    "require_str",
    "with_hub_meta",
]

HUB_META: Final = "acp-hub"
"""The ``_meta`` key under which the hub records what it added or a translation changed."""

# Required string fields of the content block types the v2 schema defines
# (https://agentclientprotocol.com/protocol/v2/content).
_BLOCK_STRINGS: Final = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("name", "uri"),
}


def fail(where: str, why: str) -> NoReturn:
    """Raise ``InvalidParams("<where>: <why>")``."""
    raise InvalidParams(f"{where}: {why}")


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (``bool`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_object(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` itself, which must be an object."""
    # `type(...) is dict` first: decoded JSON is always a dict, and the ABC check is slow.
    if type(value) is not dict and not isinstance(value, Mapping):
        fail(where, "expected an object")
    return value


def require_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    """``obj[key]``, which must be a string."""
    value = obj.get(key)
    if not isinstance(value, str):
        fail(where, f"'{key}' must be a string")
    return value


def optional_str(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    """``obj[key]``, which may be absent or ``null``, else a string."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        fail(where, f"'{key}' must be a string or null")
    return value


def optional_object(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    """``obj[key]``, which may be absent or ``null``, else an object."""
    value = obj.get(key)
    if value is not None and not isinstance(value, Mapping):
        fail(where, f"'{key}' must be an object or null")
    return value


def require_list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """``obj[key]``, which must be an array."""
    value = obj.get(key)
    if not isinstance(value, list):
        fail(where, f"'{key}' must be an array")
    return value


def require_objects(obj: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    """``obj[key]``, which must be an array of objects."""
    return [
        require_object(item, f"{where}.{key}[{i}]")
        for i, item in enumerate(require_list(obj, key, where))
    ]


def named_entries(
    items: Sequence[Any] | None, label: str, id_key: str
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each of ``items`` (``None``: none) with the place it is named by in errors
    (``label[i]``), checked to be an object with string ``id_key`` and ``name``: the entries of
    a list of named things (config options, auth methods) that each version keys differently."""
    for i, raw in enumerate(items or []):
        where = f"{label}[{i}]"
        entry = require_object(raw, where)
        require_str(entry, id_key, where)
        require_str(entry, "name", where)
        yield where, entry


def check_block(value: Any, where: str) -> Mapping[str, Any]:
    """``value``, a ``ContentBlock``: an open union on ``type``; the types the schema defines
    need their required fields."""
    if (type(value) is not dict and not isinstance(value, Mapping)) or not isinstance(
        value.get("type"), str
    ):
        fail(where, "a content block needs a string 'type'")
    kind = value["type"]
    for key in _BLOCK_STRINGS.get(kind, ()):
        if not isinstance(value.get(key), str):
            fail(where, f"a '{kind}' content block needs a string '{key}'")
    if kind == "resource" and not isinstance(value.get("resource"), Mapping):
        fail(where, "a 'resource' content block needs a 'resource' object")
    return value


def decode_base64(value: object, where: str) -> bytes:
    """The bytes of ``value``, a strict base64 string (terminal output, ``data`` fields)."""
    if not isinstance(value, str):
        fail(where, "'data' must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        fail(where, "'data' is not valid base64")


def rename(obj: Mapping[str, Any], old: str, new: str) -> dict[str, Any]:
    """A copy of ``obj`` with the key ``old`` renamed to ``new`` (order kept)."""
    return {(new if key == old else key): value for key, value in obj.items()}


def with_hub_meta(obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into ``obj["_meta"]["acp-hub"]`` without clobbering other keys."""
    meta = obj.get("_meta")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    hub = meta.get(HUB_META)
    meta[HUB_META] = {**(hub if isinstance(hub, Mapping) else {}), **fields}
    obj["_meta"] = meta
    return obj


def copy_meta(src: Mapping[str, Any], dst: dict[str, Any]) -> dict[str, Any]:
    """``dst`` with ``src``'s ``_meta``, when it has one."""
    if src.get("_meta") is not None:
        dst["_meta"] = src["_meta"]
    return dst
