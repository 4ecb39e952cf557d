"""Session config options and modes across versions.

v1 has session modes (``session/set_mode``, ``current_mode_update``) beside config options;
v2 folds modes into config options: the mode is the select option with ``category: "mode"``
(https://agentclientprotocol.com/protocol/v2/migration#session-modes-become-config-options).
The field names differ too: v1 ``id`` / ``group``, v2 ``configId`` / ``groupId``; a v1 value
is untagged (an id), a v2 value is tagged with its ``type``.

``mode_option`` is the one lookup of a session's mode option, for the translators and for
the server's ``session/set_mode``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from hub.protocol.errors import TranslationError
from hub.protocol.shapes import (  # Structural: the shape checks used here, one by one.
    copy_meta,
    fail,
    named_entries,
    rename,
    require_object,
    require_objects,
    require_str,
)

__all__ = [
    "MODE_OPTION_NAME",
    "config_options_v1_to_v2",
    "config_options_v2_to_v1",
    "mode_option",
    "modes_from_config_options",
    "set_config_option_v1_to_v2",
    "set_mode_v1_to_v2",
]

MODE_OPTION_NAME: Final = "Mode"
"""The name of the mode option the hub makes from a v1 agent's modes."""


def mode_option(options: Sequence[Any]) -> Mapping[str, Any] | None:
    """The mode option of a v2 config option set: the first ``category: "mode"`` select."""
    for option in options:
        if (
            isinstance(option, Mapping)
            and option.get("category") == "mode"
            and option.get("type") == "select"
        ):
            return option
    return None


def _select_options(option: Mapping[str, Any], group_old: str, group_new: str, where: str) -> Any:
    items = require_objects(option, "options", where)
    return [
        rename(item, group_old, group_new) if group_old in item else dict(item) for item in items
    ]


def config_options_v1_to_v2(options: Sequence[Any]) -> list[dict[str, Any]]:
    """v1 ``SessionConfigOption``s as v2: ``id`` -> ``configId``, ``group`` -> ``groupId``.

    Lossless; option types v1 does not know are kept as they are (v2 is open).
    """
    out = []
    for where, option in named_entries(options, "configOptions", "id"):
        kind = require_str(option, "type", where)
        converted = rename(option, "id", "configId")
        if kind == "select":
            require_str(option, "currentValue", where)
            converted["options"] = _select_options(option, "group", "groupId", where)
        out.append(converted)
    return out


def config_options_v2_to_v1(
    options: Sequence[Any], *, boolean: bool = True
) -> list[dict[str, Any]]:
    """v2 ``SessionConfigOption``s as v1: ``configId`` -> ``id``, ``groupId`` -> ``group``.

    Option types v1 cannot carry (``_x`` and future ones) are dropped, and ``boolean``
    options too when ``boolean`` is false (a v1 client that did not advertise
    ``session.configOptions.boolean``).
    """
    out = []
    for where, option in named_entries(options, "configOptions", "configId"):
        kind = require_str(option, "type", where)
        if kind == "select":
            converted = rename(option, "configId", "id")
            converted["options"] = _select_options(option, "groupId", "group", where)
            out.append(converted)
        elif kind == "boolean" and boolean:
            out.append(rename(option, "configId", "id"))
    return out


def modes_from_config_options(options: Sequence[Any]) -> dict[str, Any] | None:
    """The v1 ``SessionModeState`` derived from the first ``category: "mode"`` select.

    Grouped choices are flattened. ``None`` when there is no mode option.
    """
    option = mode_option(options)
    if option is None:
        return None
    modes = []
    for item in _flat_choices(option):
        mode = {"id": item.get("value"), "name": item.get("name")}
        if item.get("description") is not None:
            mode["description"] = item["description"]
        modes.append(mode)
    return {"currentModeId": option.get("currentValue"), "availableModes": modes}


def _flat_choices(option: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for item in option.get("options") or []:
        if isinstance(item, Mapping) and isinstance(item.get("options"), list):
            out.extend(choice for choice in item["options"] if isinstance(choice, Mapping))
        elif isinstance(item, Mapping):
            out.append(item)
    return out


def set_config_option_v1_to_v2(params: Mapping[str, Any]) -> dict[str, Any]:
    """A v1 ``session/set_config_option`` as v2: an untagged value is ``type: "id"``."""
    where = "params"
    obj = require_object(params, where)
    require_str(obj, "sessionId", where)
    require_str(obj, "configId", where)
    if obj.get("type") == "boolean":
        if not isinstance(obj.get("value"), bool):
            fail(where, "a 'boolean' value must be true or false")
        return dict(obj)
    if "type" in obj:
        fail(where, f"unknown value type {obj['type']!r}")
    require_str(obj, "value", where)
    return {**obj, "type": "id"}


def set_mode_v1_to_v2(params: Mapping[str, Any], options: Sequence[Any]) -> dict[str, Any]:
    """A v1 ``session/set_mode`` as a v2 ``session/set_config_option`` on the mode option.

    ``options`` is the session's current v2 config option set; without a mode option
    there is nothing to set and ``TranslationError`` is raised.
    """
    where = "params"
    obj = require_object(params, where)
    session_id = require_str(obj, "sessionId", where)
    mode_id = require_str(obj, "modeId", where)
    option = mode_option(options)
    if option is None:
        raise TranslationError("the session has no mode option")
    out = {
        "sessionId": session_id,
        "configId": option.get("configId"),
        "type": "id",
        "value": mode_id,
    }
    return copy_meta(obj, out)
