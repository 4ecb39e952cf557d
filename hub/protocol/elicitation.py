"""The shape of an agent's ``elicitation/create`` before the hub asks a client with it.

https://agentclientprotocol.com/protocol/v2/elicitation: a ``message`` for the person, and a
``mode``: ``form`` with a ``requestedSchema`` (an object schema whose ``properties`` are
objects, ``required`` a list of names), or ``url`` with an ``elicitationId`` and the ``url``.
Other modes are future or ``_``-prefixed extensions that a proxy forwards as they are; only
their ``message`` is checked. Nothing else of the payload is touched.
"""

from __future__ import annotations

from typing import Any

from hub.protocol.shapes import fail, optional_object, require_object, require_str

__all__ = ["check_elicitation"]


def check_elicitation(params: Any) -> dict[str, Any]:
    """Return ``params`` (a copy) if it is an elicitation request a client can be asked;
    raise ``InvalidParams`` naming what is wrong otherwise."""
    request = require_object(params, "elicitation/create")
    where = "elicitation/create"
    require_str(request, "message", where)
    mode = require_str(request, "mode", where)
    if mode == "form":
        schema = require_object(request.get("requestedSchema"), f"{where}.requestedSchema")
        properties = optional_object(schema, "properties", f"{where}.requestedSchema")
        for name, prop in (properties or {}).items():
            if not isinstance(prop, dict):
                fail(f"{where}.requestedSchema.properties.{name}", "must be an object")
        required = schema.get("required")
        if required is not None and not (
            isinstance(required, list) and all(isinstance(n, str) for n in required)
        ):
            fail(f"{where}.requestedSchema.required", "must be a list of property names")
    elif mode == "url":
        require_str(request, "elicitationId", where)
        require_str(request, "url", where)
    return dict(request)
