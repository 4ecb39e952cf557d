"""The hub launcher of the store tests is ``tests.hubproc`` (shared by every test that runs a
hub process); these names stay importable from here."""

from __future__ import annotations

from tests.hubproc import HubProcess, hub_nodes, hub_process, scripted

__all__ = ["HubProcess", "hub_nodes", "hub_process", "scripted"]
