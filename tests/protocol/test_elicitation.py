"""The shape check of an agent's ``elicitation/create`` (``hub.protocol.elicitation``)."""

from __future__ import annotations

from typing import Any

import pytest

from hub.protocol.elicitation import check_elicitation
from hub.protocol.errors import InvalidParams

FORM = {
    "message": "Who are you?",
    "mode": "form",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}


@pytest.mark.parametrize(
    "params",
    [
        FORM,
        {**FORM, "requestedSchema": {"type": "object"}},
        {"message": "Open this", "mode": "url", "elicitationId": "e-1", "url": "https://x/y"},
        {"message": "A future mode", "mode": "_acme_wizard", "steps": 3},
    ],
)
def test_requests_a_client_can_be_asked_pass_unchanged(params: dict[str, Any]) -> None:
    checked = check_elicitation(params)
    assert checked == params
    assert checked is not params  # a copy


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        {"mode": "form", "requestedSchema": {}},
        {"message": "m"},
        {**FORM, "requestedSchema": None},
        {**FORM, "requestedSchema": {"properties": []}},
        {**FORM, "requestedSchema": {"properties": {"name": "string"}}},
        {**FORM, "requestedSchema": {"properties": {}, "required": "name"}},
        {**FORM, "requestedSchema": {"properties": {}, "required": [1]}},
        {"message": "m", "mode": "url", "url": "https://x"},
        {"message": "m", "mode": "url", "elicitationId": "e-1"},
    ],
)
def test_malformed_requests_are_refused(params: Any) -> None:
    with pytest.raises(InvalidParams):
        check_elicitation(params)
