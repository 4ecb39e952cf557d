"""Shared test support: locating optional binaries, the ACP JSON schemas and the shared spec folder.

A test that needs a binary which is absent skips with the reason on a developer's
machine; with ``ACP_HUB_REQUIRE_ALL=1`` (set by ``.ci/run``) the same absence fails.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
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


def require_shared(*parts: str) -> Path:
    """A path under ``../shared``, or skip/fail when absent.

    ``../shared/acp-spec`` is a snapshot of the ACP specification repository
    (https://github.com/agentclientprotocol/agent-client-protocol: its ``schema/`` folder) kept
    beside a development checkout; a clean clone does not have it."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        missing(f"{path} is not present (../shared is only beside a development checkout)")
    return path


def acp_schema(version: int) -> Path:
    """The ACP v1 or v2 JSON schema (``schema.json``) the hub implements, or skip/fail.

    The one place the schema tests find it. The pinned SDK packages of ``tests/peers`` ship
    schemas of later protocol revisions (the 2.4.0 package's v2 schema differs in 77
    definitions, e.g. ``AvailableCommand`` gained a required ``type``), so they cannot stand
    in for it; the snapshot beside a development checkout (``../shared/acp-spec``) is
    required in CI (``ACP_HUB_REQUIRE_ALL=1``) and skipped elsewhere when absent.
    """
    return require_shared("acp-spec", "schema", f"v{version}", "schema.json")
