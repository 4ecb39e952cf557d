"""The client examples of ``docs/protocol.md`` (*Clients: the SDK functions for each
transport*), run exactly as the document has them, against a real hub.

Each example follows an ``<!-- example: NAME -->`` marker. The Python ones run with this
interpreter; the TypeScript ones with node, from a directory whose ``node_modules`` maps
``@agentclientprotocol/sdk`` and ``ws`` to the pinned peers, so that the imports a user
writes resolve unchanged.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import anyio
import pytest

from tests.peers import paths
from tests.server.harness import ROOT, running_hub, scripted_agent
from tests.support import require_binary

pytestmark = pytest.mark.anyio

DOC = ROOT / "docs" / "protocol.md"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\n```(\w+)\n(.*?)```", re.DOTALL)


def examples() -> dict[str, tuple[str, str]]:
    return {m[1]: (m[2], m[3]) for m in EXAMPLE.finditer(DOC.read_text(encoding="utf-8"))}


def test_the_document_has_an_example_for_every_transport() -> None:
    assert set(examples()) == {
        "python-ws",
        "python-http",
        "python-stdio",
        "typescript-ws",
        "typescript-http",
    }


@pytest.mark.parametrize("name", sorted(examples()))
async def test_a_documented_client_example_runs_a_turn(name: str, tmp_path: Path) -> None:
    language, code = examples()[name]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    if language == "python":
        script = tmp_path / "example.py"
        command = [sys.executable, str(script)]
    else:
        node = require_binary("node")
        modules = tmp_path / "node_modules"
        (modules / "@agentclientprotocol").mkdir(parents=True)
        (modules / "@agentclientprotocol" / "sdk").symlink_to(paths.TS_SDK_V2)
        (modules / "ws").symlink_to(paths.NODE_MODULES / "ws")
        paths.ts_ws_client_module_dir()  # skips (or fails in CI) without the peers
        script = tmp_path / "example.mjs"
        command = [node, str(script)]
    script.write_text(code, encoding="utf-8")
    async with running_hub([scripted_agent("scripted", 2, "--ack-message-id")]) as hub:
        env["ACP_HUB_URL"] = hub.url
        with anyio.fail_after(60):
            done = await anyio.run_process(command, env=env, cwd=str(tmp_path), check=False)
    output = done.stdout.decode()
    assert done.returncode == 0, (output, done.stderr.decode()[-2000:])
    # The stop reason on a line of its own (over HTTP the session's stream may still be
    # printing the answer when the prompt's answer arrives on the connection's).
    assert "end_turn" in output.replace("hello", "\n").split(), output
    if language == "python":
        assert "hello" in output  # the agent's answer, printed by the example's client
