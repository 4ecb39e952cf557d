"""Config options, modes, ``session/set_mode`` and ``session/set_config_option``
across versions."""

from __future__ import annotations

import pytest

from hub.protocol.config_options import (
    config_options_v1_to_v2,
    config_options_v2_to_v1,
    modes_from_config_options,
    set_config_option_v1_to_v2,
    set_mode_v1_to_v2,
)
from hub.protocol.errors import InvalidParams, TranslationError
from tests.protocol.translation import (
    V2_OPTIONS,
    Schema,
)


def test_config_options_round_trip_and_boolean_filter(v1: Schema, v2: Schema) -> None:
    for option in V2_OPTIONS:
        v2.check("SessionConfigOption", option)
    out = config_options_v2_to_v1(V2_OPTIONS)
    for option in out:
        v1.check("SessionConfigOption", option)
    assert config_options_v1_to_v2(out) == V2_OPTIONS
    assert [o["id"] for o in config_options_v2_to_v1(V2_OPTIONS, boolean=False)] == ["mode"]
    assert config_options_v2_to_v1([{"configId": "x", "name": "X", "type": "_acme"}]) == []
    assert config_options_v1_to_v2([{"id": "x", "name": "X", "type": "_acme"}]) == [
        {"configId": "x", "name": "X", "type": "_acme"}
    ]


def test_modes_from_config_options(v1: Schema) -> None:
    modes = modes_from_config_options(V2_OPTIONS)
    assert modes == {
        "currentModeId": "ask",
        "availableModes": [
            {"id": "ask", "name": "Ask", "description": "d"},
            {"id": "yolo", "name": "Yolo"},
        ],
    }
    v1.check("SessionModeState", modes)
    assert modes_from_config_options(V2_OPTIONS[1:]) is None
    flat = {**V2_OPTIONS[0], "options": [{"value": "a", "name": "A"}, "junk"]}
    assert modes_from_config_options(["junk", flat]) == {
        "currentModeId": "ask",
        "availableModes": [{"id": "a", "name": "A"}],
    }


def test_set_mode_and_set_config_option_from_v1_clients(v2: Schema) -> None:
    out = set_mode_v1_to_v2({"sessionId": "s", "modeId": "yolo"}, V2_OPTIONS)
    assert out == {"sessionId": "s", "configId": "mode", "type": "id", "value": "yolo"}
    v2.check("SetSessionConfigOptionRequest", out)
    with pytest.raises(TranslationError):
        set_mode_v1_to_v2({"sessionId": "s", "modeId": "a"}, V2_OPTIONS[1:])
    with pytest.raises(InvalidParams):
        set_mode_v1_to_v2({"sessionId": "s"}, V2_OPTIONS)
    untagged = set_config_option_v1_to_v2({"sessionId": "s", "configId": "m", "value": "a"})
    assert untagged == {"sessionId": "s", "configId": "m", "value": "a", "type": "id"}
    v2.check("SetSessionConfigOptionRequest", untagged)
    boolean = {"sessionId": "s", "configId": "w", "type": "boolean", "value": True}
    assert set_config_option_v1_to_v2(boolean) == boolean
    for bad in (
        {**boolean, "value": "yes"},
        {"sessionId": "s", "configId": "m", "type": "id", "value": "a"},
        {"sessionId": "s", "configId": "m", "value": 1},
    ):
        with pytest.raises(InvalidParams):
            set_config_option_v1_to_v2(bad)
