"""Shared test support: locating optional binaries and the ACP JSON schemas.

A test that needs a binary which is absent skips with the reason on a developer's
machine; with ``ACP_HUB_REQUIRE_ALL=1`` (set by ``.ci/run``) the same absence fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIRE_ALL = os.environ.get("ACP_HUB_REQUIRE_ALL") == "1"


def missing(reason: str) -> None:
    """Skip (developer machine) or fail (CI) because something the test needs is absent."""
    if REQUIRE_ALL:
        pytest.fail(f"required by ACP_HUB_REQUIRE_ALL=1 but missing: {reason}", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str) -> str:
    """The full path of ``name`` on PATH, or skip/fail with the reason."""
    path = shutil.which(name)
    if path is None:
        missing(f"{name} is not installed")
        raise AssertionError("unreachable")
    return path


def hypothesis_profile(environ: Mapping[str, str]) -> str:
    """The Hypothesis profile of a run: ``HYPOTHESIS_PROFILE`` (``.ci/run`` sets ``ci``), else
    ``ci`` where ``CI`` is set (as CI services do), else ``dev``."""
    return environ.get("HYPOTHESIS_PROFILE") or ("ci" if environ.get("CI") else "dev")


def acp_schema(version: int) -> Path:
    """The ACP v1 or v2 JSON schema (``schema.json``) the hub implements.

    The one place the schema tests find it: a copy kept in the repository
    (``tests/protocol/schema/``, see its README), because the pinned SDK packages of
    ``tests/peers`` ship schemas of later protocol revisions (the 2.4.0 package's v2 schema
    differs in 77 definitions, e.g. ``AvailableCommand`` gained a required ``type``).
    """
    return ROOT / "tests" / "protocol" / "schema" / f"v{version}" / "schema.json"
