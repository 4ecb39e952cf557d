"""Fixtures of the protocol tests: the ACP v1 and v2 JSON schemas."""

from __future__ import annotations

import pytest

from tests.protocol.translation import Schema, schema


@pytest.fixture
def v1() -> Schema:
    return schema("v1")


@pytest.fixture
def v2() -> Schema:
    return schema("v2")
