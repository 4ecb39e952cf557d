"""The load generator process: runs one scenario against one server and prints its result.

``python -m tests.bench.loadgen '<json spec>'`` where the spec is ``{"scenario": "S1",
"kind": "hub"|"baseline", "host", "port", "server_pid", "params": {...}}``, with
``"second_port"`` for a second hub node (``"nodes": "split"``: one session's observers split
between the two; ``"spread"``: the sessions spread over the two), or ``"ports"`` and
``"kill_pid"`` for a cluster of nodes (the storm scenario kills one). The result is
printed as one JSON line on stdout. The harness (``run.py``) pins this process to its own
core; it uses uvloop when available, like the servers.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

from tests.bench import loop
from tests.bench.scenarios import SCENARIOS, Result
from tests.bench.targets import ClusterTarget, SplitHubTarget, SpreadHubTarget, make_target

__all__ = ["main", "raise_nofile"]


def raise_nofile(wanted: int = 65536) -> int:
    """Raise the open-file limit towards ``wanted`` (thousands of sockets); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


async def _run(spec: dict[str, Any]) -> Result:
    version = int(spec["params"].get("observer_version", 2))
    target = make_target(spec["kind"], spec["host"], int(spec["port"]), version)
    if spec.get("second_port"):
        pair = SpreadHubTarget if spec.get("nodes") == "spread" else SplitHubTarget
        target = pair(spec["host"], int(spec["port"]), int(spec["second_port"]))
    if spec.get("ports"):
        target = ClusterTarget(spec["host"], [int(p) for p in spec["ports"]])
    scenario = SCENARIOS[spec["scenario"]]
    params = dict(spec["params"])
    params["pids"] = [int(pid) for pid in spec.get("pids", [spec["server_pid"]])]
    if spec.get("redis_pids"):
        params["redis_pids"] = [int(pid) for pid in spec["redis_pids"]]
    if spec.get("kill_pid"):
        params["kill_pid"] = int(spec["kill_pid"])
    return await scenario(target, params, int(spec["server_pid"]))


def main(argv: list[str] | None = None) -> int:
    """Run the scenario of the spec in ``argv[0]`` and print its result."""
    args = sys.argv[1:] if argv is None else argv
    spec: dict[str, Any] = json.loads(args[0])
    raise_nofile()
    result = loop.run(_run(spec))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
