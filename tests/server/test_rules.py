"""Permission rules end to end with the project's scripted agent and the TypeScript SDK's
example agent: a session rule answers an edit under ``src/`` while the command still reaches a
person; every client sees the rule and who answered; a viewer cannot add rules; a path outside
the cwd is never allowed by rule."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hub.agents.spec import AgentSpec
from hub.settings import Settings
from tests.credentials import token
from tests.peers.paths import ts_agent_js
from tests.server.harness import AcpClient, RpcFailure, acp_client, running_hub, scripted_agent
from tests.server.test_arbitration import allow, permission_requests, resume
from tests.support import ROOT, require_binary

pytestmark = pytest.mark.anyio
FORBIDDEN = -32040
HOSTILE = ROOT / "tests" / "agents" / "hostile_agent.py"


def hub_updates(client: AcpClient, sid: str, variant: str) -> list[dict[str, Any]]:
    return [
        p["update"]
        for p in client.session_updates(sid)
        if p["update"].get("sessionUpdate") == variant
    ]


def reports(client: AcpClient, sid: str) -> list[str]:
    return [
        u["content"]["text"]
        for u in hub_updates(client, sid, "agent_message_chunk")
        if u["content"]["text"].startswith("permission:")
    ]


async def run_turn(client: AcpClient, sid: str, script: str, answers: list[str]) -> list[str]:
    """Prompt ``script``; answer each permission request that reaches ``client`` in turn
    with ``answers``; the titles of those requests."""
    prompt = await client.start(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": script}]}
    )
    seen: list[str] = []

    def asked() -> list[dict[str, Any]]:
        return [r for r in permission_requests(client) if r["params"]["sessionId"] == sid]

    for answer in answers:
        await client.wait_for(lambda: len(asked()) > len(seen))
        request = asked()[len(seen)]
        seen.append(request["params"]["title"])
        await client.answer(request["id"], allow(answer))
    await client.result(prompt)
    await client.wait_for(lambda: client.idle_count(sid) >= 1)
    return seen


async def test_a_rule_answers_the_edit_and_the_command_reaches_a_person(tmp_path: Path) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url, name="alice") as alice:
        sid = await alice.new_session(cwd=str(tmp_path))
        viewer_token = token("viewer", sub="vic", name="Vic", sessions=[sid])
        async with acp_client(hub.url_with(viewer_token)) as vic:
            await resume(vic, sid)
            added = await alice.call(
                "_hub/rules/add",
                {"sessionId": sid, "match": {"kind": "edit", "path": "src/**"}, "answer": "allow"},
            )
            rule_id = added["ruleId"]
            # Everyone sees the rule, and who added it.
            await vic.wait_for(lambda: bool(hub_updates(vic, sid, "_hub_rules")))
            (rule,) = hub_updates(vic, sid, "_hub_rules")[-1]["rules"]
            assert rule["ruleId"] == rule_id
            assert rule["match"] == {"kind": "edit", "path": "src/**"}
            assert rule["createdBy"]
            listed = await vic.call("_hub/rules/list", {"sessionId": sid})
            assert [r["ruleId"] for r in listed["rules"]] == [rule_id]
            # A viewer cannot add or remove rules.
            for method, params in (
                ("_hub/rules/add", {"match": {}, "answer": "allow"}),
                ("_hub/rules/remove", {"ruleId": rule_id}),
            ):
                with pytest.raises(RpcFailure) as info:
                    await vic.call(method, {"sessionId": sid, **params})
                assert info.value.code == FORBIDDEN

            script = "permission-edit src/app/main.py\npermission-exec rm -rf build"
            asked = await run_turn(alice, sid, script, ["reject"])
            # Only the command reached a person; the edit was answered by the rule.
            assert asked == ["Allow: Run rm -rf build?"]
            assert reports(alice, sid) == [
                "permission: selected allow",
                "permission: selected reject",
            ]
            decided = [
                u for u in hub_updates(vic, sid, "_hub_permission") if u["status"] == "resolved"
            ]
            assert decided[0]["by"] == {"rule": rule_id, "createdBy": rule["createdBy"]}
            assert decided[0]["outcome"] == {"outcome": "selected", "optionId": "allow"}
            assert "by" not in decided[1]
            # The transcript says which rule allowed it, and who added the rule.
            page = await alice.call("_hub/export", {"sessionId": sid, "format": "md"})
            assert f"Allow — by rule {rule_id} (added by {rule['createdBy']})" in page["data"]
            # Removed, the rule answers nothing any more.
            await alice.call("_hub/rules/remove", {"sessionId": sid, "ruleId": rule_id})
            assert (await alice.call("_hub/rules/list", {"sessionId": sid}))["rules"] == []
            with pytest.raises(RpcFailure):
                await alice.call("_hub/rules/remove", {"sessionId": sid, "ruleId": rule_id})


async def test_a_path_outside_the_cwd_is_never_allowed_by_rule(tmp_path: Path) -> None:
    every_edit = {"match": {"kind": "edit"}, "answer": "allow"}
    settings = replace(Settings(), permission_rules=(every_edit,))
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        (tmp_path / "project").mkdir()
        sid = await owner.new_session(cwd=str(tmp_path / "project"))
        await owner.call("_hub/rules/add", {"sessionId": sid, **every_edit})
        script = "\n".join(
            [
                "permission-edit src/inside.py",
                "permission-edit ../outside.py",
                "permission-edit /etc/passwd",
                "permission-edit src/../../escape.py",
            ]
        )
        asked = await run_turn(owner, sid, script, ["reject", "reject", "reject"])
        assert asked == [
            "Allow: Edit ../outside.py?",
            "Allow: Edit /etc/passwd?",
            "Allow: Edit src/../../escape.py?",
        ]
        assert reports(owner, sid)[0] == "permission: selected allow"


async def test_bad_rules_are_refused() -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url) as owner:
        sid = await owner.new_session()
        for params in (
            {"match": {"kind": "edit"}, "answer": "maybe"},
            {"match": {"colour": "red"}, "answer": "allow"},
            {"match": {"path": ""}, "answer": "allow"},
            {"match": "src/**", "answer": "allow"},
        ):
            with pytest.raises(RpcFailure) as info:
                await owner.call("_hub/rules/add", {"sessionId": sid, **params})
            assert info.value.code == -32602
    with pytest.raises(ValueError, match="permission_rules"):
        async with running_hub(
            [scripted_agent()], replace(Settings(), permission_rules=({"answer": "yes"},))
        ):
            pass


async def test_an_agents_rules_answer_in_its_sessions_only(tmp_path: Path) -> None:
    listing = {"match": {"kind": "execute", "command": "ls *"}, "answer": "allow"}
    trusting = replace(scripted_agent("trusting"), permission_rules=(listing,))
    async with (
        running_hub([trusting, scripted_agent("plain")]) as hub,
        acp_client(hub.url) as owner,
    ):
        sid = await owner.new_session("trusting", cwd=str(tmp_path))
        asked = await run_turn(
            owner, sid, "permission-exec ls -la\npermission-exec rm x", ["reject"]
        )
        assert asked == ["Allow: Run rm x?"]
        decided = [u for u in hub_updates(owner, sid, "_hub_permission") if u.get("by")]
        assert decided[0]["by"] == {"rule": "agent-1", "createdBy": "config"}
        other = await owner.new_session("plain", cwd=str(tmp_path))
        assert await run_turn(owner, other, "permission-exec ls -la", ["allow"]) == [
            "Allow: Run ls -la?"
        ]


def _said(client: AcpClient, sid: str) -> str:
    return "".join(
        str(u.get("content", {}).get("text"))
        for u in hub_updates(client, sid, "agent_message_chunk")
    )


async def test_rules_answer_a_third_party_agents_request_and_never_allow_outside_the_cwd(
    tmp_path: Path,
) -> None:
    # The TypeScript SDK's example agent asks to edit /home/user/project/config.json, a path
    # outside any session's cwd here: an allow rule never answers it, a person does; a reject
    # rule (no cwd restriction: refusing is always safe) answers it at once.
    node = require_binary("node")
    agent = AgentSpec(name="ts", command=node, args=(str(ts_agent_js()),))
    async with running_hub([agent]) as hub, acp_client(hub.url, name="alice") as alice:
        sid = await alice.new_session(cwd=str(tmp_path))
        await alice.call(
            "_hub/rules/add",
            {"sessionId": sid, "match": {"kind": "edit", "path": "**"}, "answer": "allow"},
        )
        titles = await run_turn(alice, sid, "change the configuration", ["allow"])
        assert titles == ["Modifying critical configuration file"]  # asked of a person
        assert "successfully updated the configuration" in _said(alice, sid)

        rule = await alice.call(
            "_hub/rules/add", {"sessionId": sid, "match": {"kind": "edit"}, "answer": "reject"}
        )
        before = len(permission_requests(alice))
        await alice.call(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "change it again"}]},
        )
        await alice.wait_for(lambda: alice.idle_count(sid) >= 2)
        assert len(permission_requests(alice)) == before  # nobody was asked
        assert "prefer not to make that change" in _said(alice, sid)
        records = [
            u
            for u in hub_updates(alice, sid, "_hub_permission")
            if u.get("status") == "resolved" and u.get("by")
        ]
        assert [r["by"]["rule"] for r in records] == [rule["ruleId"]]


async def test_a_request_without_the_rules_option_kind_goes_to_people(tmp_path: Path) -> None:
    # `hostile-options` offers an `allow_always` and an `allow_once` and nothing that says no:
    # a reject rule has no option to pick, so a person is asked; an allow rule answers it.
    hostile = AgentSpec(
        name="hostile", command=sys.executable, args=(str(HOSTILE), "--protocol", "2")
    )
    async with running_hub([hostile]) as hub, acp_client(hub.url, name="alice") as alice:
        sid = await alice.new_session(cwd=str(tmp_path))
        await alice.call(
            "_hub/rules/add", {"sessionId": sid, "match": {"kind": "edit"}, "answer": "reject"}
        )
        asked = await run_turn(alice, sid, "hostile-options", ["c"])
        assert asked == ["Edit config.toml"]
        assert reports(alice, sid) == ["permission: selected c"]
        assert not [u for u in hub_updates(alice, sid, "_hub_permission") if u.get("by")]

        allowing = await alice.call(
            "_hub/rules/add", {"sessionId": sid, "match": {"kind": "edit"}, "answer": "allow"}
        )
        before = len(permission_requests(alice))
        await alice.prompt(sid, "hostile-options")
        await alice.wait_for(lambda: alice.idle_count(sid) >= 2)
        assert len(permission_requests(alice)) == before  # nobody was asked this time
        # The reject rule comes first but has no option here: the allow rule answers, with the
        # request's `allow_once`.
        assert reports(alice, sid)[-1] == "permission: selected c"
        (decided,) = [u for u in hub_updates(alice, sid, "_hub_permission") if u.get("by")]
        assert decided["by"]["rule"] == allowing["ruleId"]


async def test_the_audit_trail_records_rules_and_their_answers(tmp_path: Path) -> None:
    async with running_hub([scripted_agent()]) as hub, acp_client(hub.url, name="alice") as alice:
        sid = await alice.new_session(cwd=str(tmp_path))
        added = await alice.call(
            "_hub/rules/add", {"sessionId": sid, "match": {"kind": "edit"}, "answer": "allow"}
        )
        rule_id = added["ruleId"]
        assert await run_turn(alice, sid, "permission-edit src/a.py", []) == []
        await alice.call("_hub/rules/remove", {"sessionId": sid, "ruleId": rule_id})
        assert await run_turn(alice, sid, "permission-edit src/b.py", ["reject"]) == [
            "Allow: Edit src/b.py?"
        ]
        entries = (await alice.call("_hub/audit/list", {"limit": 500}))["entries"]
        trail = [e for e in reversed(entries) if e.get("sessionId") == sid]
        events = [e["event"] for e in trail]
        assert [e for e in events if e != "session_created"] == [
            "rule_added",
            "permission_decided",
            "rule_removed",
            "permission_decided",
        ]
        added_entry, by_rule, removed, by_person = [
            e for e in trail if e["event"] != "session_created"
        ]
        assert added_entry["rule"]["ruleId"] == rule_id
        assert added_entry["rule"]["match"] == {"kind": "edit"}
        assert added_entry["rule"]["answer"] == "allow"
        assert added_entry["principal"] == "test-owner"
        assert by_rule["rule"] == rule_id
        assert by_rule["outcome"] == {"outcome": "selected", "optionId": "allow"}
        assert by_rule["principal"] is None
        assert removed["ruleId"] == rule_id
        assert removed["principal"] == "test-owner"
        assert by_person["rule"] is None
        assert by_person["principal"] == "test-owner"
        assert by_person["outcome"] == {"outcome": "selected", "optionId": "reject"}
