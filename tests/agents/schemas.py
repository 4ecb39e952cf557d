"""Validation of what agents send against the ACP v1/v2 JSON schemas
(https://agentclientprotocol.com/protocol/schema; the files are read through
``tests.support.acp_schema``).

The v2 schema's open ``other`` branch accepts the removed v1 discriminators (``tool_call``,
``plan``, ``current_mode_update``); a v2 peer must not send them, so ``update_validator``
rejects them explicitly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from tests.support import acp_schema

Json = dict[str, Any]

REMOVED_IN_V2 = frozenset({"tool_call", "plan", "current_mode_update"})


@cache
def _defs(version: int) -> Json:
    path = acp_schema(version)
    schema = json.loads(path.read_text())
    defs = schema["$defs"]
    assert isinstance(defs, dict)
    return defs


def validator(version: int, definition: str) -> Draft202012Validator:
    """A validator for ``#/$defs/<definition>`` of the v1 or v2 schema."""
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": _defs(version)})


def errors(version: int, definition: str, instance: Any) -> list[str]:
    return [error.message for error in validator(version, definition).iter_errors(instance)]


def update_validator(version: int) -> Callable[[Json], None]:
    """A check for the params of one ``session/update``: AssertionError when invalid."""
    definition = "UpdateSessionNotification" if version == 2 else "SessionNotification"
    check = validator(version, definition)

    def validate(params: Json) -> None:
        problems = [error.message for error in check.iter_errors(params)]
        assert not problems, f"invalid v{version} session/update {params}: {problems}"
        kind = params["update"].get("sessionUpdate")
        assert not (version == 2 and kind in REMOVED_IN_V2), f"v1-only update on v2: {params}"

    return validate
