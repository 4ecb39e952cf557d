"""A session's config options as one client's protocol version shows them.

v2 clients get the options as they are; v1 clients get their v1 rendering and the session's
modes (``hub.protocol.config_options``). Every attach answer and ``session/set_config_option``
answer carry this.
"""

from __future__ import annotations

from typing import Any

from hub.protocol.config_options import config_options_v2_to_v1, modes_from_config_options

__all__ = ["config_result"]


def config_result(version: int, options: list[Any]) -> dict[str, Any]:
    """The config options as a client of ``version`` sees them (v1: with the modes)."""
    if version >= 2:
        return {"configOptions": options}
    result: dict[str, Any] = {"configOptions": config_options_v2_to_v1(options)}
    modes = modes_from_config_options(options)
    if modes is not None:
        result["modes"] = modes
    return result
