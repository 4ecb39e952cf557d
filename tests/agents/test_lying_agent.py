"""An agent that lies in its answers or does not answer at all, behind a real supervisor."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from hub.agents.errors import AgentError
from hub.agents.spec import AgentSpec
from hub.protocol.errors import AGENT_UNAVAILABLE
from tests.agents.harness import TEST_POLICY, RecordingSink, Supervised

pytestmark = pytest.mark.anyio

# A v2 agent that answers `session/new` with a megabyte string the first time and never
# answers it the second time (nor anything after).
LIAR = r"""
import json, sys
news = 0
for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        result = {"protocolVersion": 2, "info": {"name": "liar", "version": "1"},
                  "capabilities": {"session": {}}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    elif method == "session/new":
        news += 1
        if news == 1:
            big = {"jsonrpc": "2.0", "id": rid, "result": "x" * (1 << 20)}
            sys.stdout.write(json.dumps(big) + "\n")
    sys.stdout.flush()
"""


async def test_a_lying_answer_is_bounded_and_a_missing_one_times_out(
    supervised: Supervised, tmp_path: Path
) -> None:
    script = tmp_path / "liar.py"
    script.write_text(LIAR)
    spec = AgentSpec("liar", sys.executable, (str(script),))
    policy = replace(TEST_POLICY, response_timeout=0.5)
    async with supervised(spec, policy=policy) as sup:
        agent = sup.get("liar")
        # A megabyte of nonsense: refused, and the error (which reaches clients and the log)
        # does not carry the megabyte.
        with pytest.raises(AgentError) as lie:
            await agent.new_session("/tmp", [], RecordingSink())
        assert lie.value.error.code == AGENT_UNAVAILABLE
        assert len(lie.value.error.message) < 400
        # No answer at all: the deadline fails the request instead of waiting for ever.
        with pytest.raises(AgentError) as silent:
            await agent.new_session("/tmp", [], RecordingSink())
        assert silent.value.error.code == AGENT_UNAVAILABLE
        assert "no answer to session/new within 0.5s" in silent.value.error.message
        assert agent.running  # a silent agent is not a dead one
