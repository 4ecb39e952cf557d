"""The conformance matrix (``tests/interop/matrix.py``): every method through every client.

One real hub, every pinned client at once. A cell is a pass, ``n/a`` (not in that protocol
version) or a failure; failures are allowed only where ``XFAILS`` names them with a reason,
and a listed cell that passes fails the test too. ``docs/protocol.md`` must carry the table
this run gives (``make matrix`` rewrites it).
"""

from __future__ import annotations

import pytest

from tests.interop.matrix import CLIENTS, METHODS, NA, PASS, XFAILS, documented, render
from tests.interop.scenario import run_matrix
from tests.peers import paths
from tests.support import require_binary

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_every_method_through_every_pinned_client() -> None:
    require_binary("node")
    paths.ts_ws_client_module_dir()  # skips (or fails in CI) without the peers
    results = await run_matrix()
    problems = []
    for client in CLIENTS:
        for method in METHODS:
            got = results[client].get(method, "missing")
            listed = (client, method) in XFAILS
            if listed and got == PASS:
                problems.append(f"{client} / {method}: listed in XFAILS, but passes")
            elif not listed and got not in (PASS, NA):
                problems.append(f"{client} / {method}: {got}")
    assert not problems, "\n".join(problems)
    assert documented() == render(results), "docs/protocol.md is stale: run `make matrix`"
