"""Fixtures shared by the server tests.

The hubs and clients of a test are context managers (``tests.server.harness``), not async
fixtures: pytest-asyncio's auto mode would run an async fixture in an event loop of its own,
not in the test's, and a hub served there never answers the test.
"""

from __future__ import annotations
