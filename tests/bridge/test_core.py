"""The bridge's core without processes or sockets: the relay's decisions, message by message
(``tests/bridge/core_driver.py`` plays the I/O)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from hub.bridge.actions import Action, Connect, Notify, OwnAnswer, Reconnect, Submit, ToEditor
from hub.bridge.core import Relay
from hub.bridge.frames import HUB_UNREACHABLE
from hub.bridge.tracking import PromptWait
from hub.protocol.errors import RESOURCE_NOT_FOUND, LineTooLong, RpcError
from tests.bridge.core_driver import URL, Driver, chunk, sent_to_hub, shown, update

S = "s-1"


def prompt(d: Driver, editor_id: Any, text: str = "hi") -> int:
    blocks = [{"type": "text", "text": text}]
    return d.request(editor_id, "session/prompt", {"sessionId": S, "prompt": blocks})


def hub_prompt(message_id: str, client_id: str = "c1") -> dict[str, Any]:
    return {"sessionUpdate": "_hub_prompt", "messageId": message_id, "clientId": client_id}


def idle(stop_reason: str = "end_turn") -> dict[str, Any]:
    return {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop_reason}


def answers(actions: list[Action]) -> list[dict[str, Any]]:
    """The answers (not the notifications) the actions write to the editor."""
    return [m for m in shown(actions) if "id" in m]


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in messages]


# -- the editor side ---------------------------------------------------------------------------


def test_initialize_is_negotiated_once_and_tells_the_hub_less_than_the_editor() -> None:
    d = Driver(version=1)
    hub_init = d.relay.hub_initialize()
    assert hub_init["clientCapabilities"] == {}  # fs is not claimed towards the hub
    assert hub_init["_meta"]["acp-hub"]["events"] is True
    again = shown(d.editor({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {}}))
    assert again[0]["error"]["data"] == "already initialized"


def test_nothing_goes_to_the_hub_before_initialize_and_a_failed_one_may_be_retried() -> None:
    relay = Relay(URL)
    early = relay.from_editor(b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}')
    assert shown(early)[0]["error"]["code"] == -32600
    init = b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":2}}'
    assert relay.from_editor(init) == [Connect(2)]
    failed = relay.initialize_failed(2, RpcError(HUB_UNREACHABLE, "cannot reach the hub"))
    assert shown(failed)[0]["error"]["code"] == HUB_UNREACHABLE
    assert relay.from_editor(init) == [Connect(2)]  # not "already initialized"
    assert relay.version == 2


def test_lines_that_are_not_one_request_are_refused_with_a_reason() -> None:
    d = Driver()
    too_long = shown(d.relay.from_editor(LineTooLong(100, 10)))
    batch = shown(d.relay.from_editor(b'[{"jsonrpc":"2.0","id":1,"method":"x"}]'))
    bad_params = shown(d.editor({"jsonrpc": "2.0", "id": 3, "method": "x", "params": [1]}))
    assert [m["error"]["code"] for m in too_long + batch + bad_params] == [-32600, -32600, -32602]
    assert "batches" in batch[0]["error"]["data"]


def test_request_ids_are_remapped_both_ways() -> None:
    d = Driver()
    first = d.request("a", "session/list", {})
    second = d.request("a", "session/list", {"cursor": "x"})  # the editor may reuse its ids
    assert first != second
    assert d.answer(second, {"sessions": []}) == [
        {"jsonrpc": "2.0", "id": "a", "result": {"sessions": []}}
    ]
    assert d.answer(second, {}) == []  # answered once


def test_the_editors_cancel_names_the_hubs_id_for_the_request() -> None:
    d = Driver()
    d.new_session(S)
    hub_id = prompt(d, "p")
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p"}}
    [notify] = d.editor(cancel)
    assert isinstance(notify, Notify)
    assert orjson.loads(notify.frame)["params"] == {"requestId": hub_id}
    unknown = {**cancel, "params": {"requestId": "nope"}}
    assert d.editor(unknown) == []


def test_agent_goes_on_session_new_and_session_attaches_the_first_one_only() -> None:
    d = Driver(version=2, agent="claude", session="s-shared")
    [first] = d.editor({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {}})
    [second] = d.editor({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {}})
    assert isinstance(first, Submit)
    assert isinstance(second, Submit)
    assert (first.pending.method, first.pending.params["sessionId"]) == (
        "session/resume",
        "s-shared",
    )
    assert first.pending.params["replayFrom"] == {"type": "start"}
    assert second.pending.method == "session/new"
    assert second.pending.params["_meta"]["acp-hub"]["agent"] == "claude"


# -- the hub side, cursors ---------------------------------------------------------------------


def test_an_attached_sessions_replay_follows_the_answer_in_order() -> None:
    d = Driver(session="s-shared")
    hub_id = d.request(1, "session/new", {"cwd": "/w", "mcpServers": []})
    # The replay comes before the answer: the editor does not know the session yet.
    assert d.hub(chunk("s-shared", 1, "a")) == []
    assert d.hub(chunk("s-shared", 2, "b")) == []
    out = d.answer(hub_id, {"_meta": {"acp-hub": {"epoch": 1, "seq": 0}}})
    assert out[0] == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"sessionId": "s-shared", "_meta": {"acp-hub": {"epoch": 1, "seq": 0}}},
    }
    assert texts(out[1:]) == ["a", "b"]
    assert texts(shown(d.hub(chunk("s-shared", 3, "c")))) == ["c"]  # live from now on


def test_an_update_below_the_cursor_is_dropped_and_hub_updates_are_not_passed_on() -> None:
    d = Driver()
    d.new_session(S, seq=4)
    assert shown(d.hub(chunk(S, 3, "old"))) == []
    assert texts(shown(d.hub(chunk(S, 5, "new")))) == ["new"]
    assert shown(d.hub(update(S, 6, {"sessionUpdate": "_hub_presence"}))) == []
    assert d.relay.sessions[S].cursor == (1, 6)
    assert shown(d.hub(chunk(S, 1, "older"))) == []  # same epoch, below the cursor
    other_epoch = chunk(S, 1, "after a restart")
    other_epoch["params"]["_meta"]["acp-hub"]["epoch"] = 2
    assert texts(shown(d.hub(other_epoch))) == ["after a restart"]
    assert d.relay.sessions[S].cursor == (2, 1)


def test_a_reconnect_resumes_after_the_cursor_without_gap_or_duplicate() -> None:
    d = Driver()
    d.new_session(S)
    seen: list[str] = []
    for seq, text in enumerate(["a", "b", "c"], start=1):
        seen += texts(shown(d.hub(chunk(S, seq, text))))
    assert d.drop() == [Reconnect()]
    d.reconnect()
    assert d.resumed[-1] == {
        "sessionId": S,
        "cwd": "/w",
        "_meta": {"acp-hub": {"after": {"epoch": 1, "seq": 3}}},
    }
    # The hub replays from the cursor; an overlapping older one is dropped.
    for seq, text in [(2, "b"), (4, "d"), (5, "e")]:
        seen += texts(shown(d.hub(chunk(S, seq, text))))
    assert seen == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("received", range(7))
def test_wherever_the_link_drops_each_event_reaches_the_editor_once_in_order(
    version: int, received: int
) -> None:
    events = [chr(ord("a") + i) for i in range(6)]
    d = Driver(version=version)
    d.new_session(S)
    seen: list[str] = []
    for seq in range(1, received + 1):  # what arrived before the drop; the rest was lost
        seen += texts(shown(d.hub(chunk(S, seq, events[seq - 1]))))
    d.drop()
    d.reconnect()
    resume = d.resumed[-1]
    after = resume["replayFrom"] if version >= 2 else resume["_meta"]["acp-hub"]["after"]
    assert after["seq"] == received
    stale = [received - 1] if received > 1 else []  # a late frame from before the cursor
    for seq in [*stale, *range(received + 1, len(events) + 1)]:
        seen += texts(shown(d.hub(chunk(S, seq, events[seq - 1]))))
    assert seen == events


def test_a_v2_resume_asks_for_the_events_after_the_cursor() -> None:
    d = Driver(version=2)
    d.new_session(S, seq=7)
    d.drop()
    d.reconnect()
    assert d.resumed[-1]["replayFrom"] == {"type": "_hub_after", "epoch": 1, "seq": 7}


def test_after_a_reset_only_what_the_editor_lacks_is_shown() -> None:
    d = Driver()
    d.new_session(S)
    d.hub(chunk(S, 1, "Hello, "))
    d.hub(update(S, 2, {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls"}))
    assert shown(d.hub(update(S, None, {"sessionUpdate": "_hub_reset", "reason": "gone"}))) == []
    # The state sent again comes without seqs; the first live update ends it.
    again = chunk(S, 0, "Hello, world")
    del again["params"]["_meta"]
    [text] = shown(d.hub(again))
    [tool] = shown(d.hub(update(S, None, {"sessionUpdate": "tool_call", "toolCallId": "t1"})))
    [live] = shown(d.hub(chunk(S, 5, "!")))
    assert text["params"]["update"]["content"]["text"] == "world"
    assert tool["params"]["update"]["sessionUpdate"] == "tool_call_update"
    assert live["params"]["update"]["content"]["text"] == "!"
    assert d.relay.sessions[S].shown["m-agent"] == "Hello, world!"


def test_the_editors_own_prompt_is_not_echoed_to_it() -> None:
    d = Driver()
    d.new_session(S)
    prompt(d, 1)
    d.hub(update(S, 1, hub_prompt("m-user")))
    mine = {
        "sessionUpdate": "user_message_chunk",
        "messageId": "m-user",
        "content": {"type": "text", "text": "hi"},
    }
    theirs = {**mine, "messageId": "m-other"}
    assert shown(d.hub(update(S, 2, mine))) == []
    assert len(shown(d.hub(update(S, 3, theirs)))) == 1


def test_a_closed_session_is_no_longer_resumed_and_notifications_wait_for_initialize() -> None:
    d = Driver()
    d.new_session(S)
    d.new_session("s-2")
    hub_id = d.request("c", "session/close", {"sessionId": S})
    assert d.answer(hub_id, {}) == [{"jsonrpc": "2.0", "id": "c", "result": {}}]
    d.drop()
    d.reconnect()
    assert [params["sessionId"] for params in d.resumed] == ["s-2"]
    early = Relay(URL)
    note = b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s-2"}}'
    assert early.from_editor(note) == []
    [notify] = d.relay.from_editor(note)
    assert isinstance(notify, Notify)
    assert orjson.loads(notify.frame) == orjson.loads(note)


# -- the link and the orphans ------------------------------------------------------------------


def test_a_drop_fails_the_bridges_own_requests_as_lost_and_a_stale_drop_is_ignored() -> None:
    d = Driver()
    pending, _ = d.relay.own_request("session/list", {}, d.generation)
    stale = d.relay.dropped(d.generation - 1, "old")
    assert stale == []
    out = d.drop()
    assert out == [OwnAnswer(pending), Reconnect()]
    assert pending.lost
    assert pending.error is not None
    assert pending.error.code == HUB_UNREACHABLE
    assert d.drop() == []  # reported once


def test_an_own_request_on_a_connection_that_dropped_fails_at_once_as_lost() -> None:
    d = Driver()
    d.new_session(S)
    # The connection closes and its requests are rejected before the bridge's next own request
    # on it (the next resume, the next session/list page): nothing would ever answer it.
    first = d.generation
    assert d.drop() == [Reconnect()]
    late, frame = d.relay.own_request("session/list", {"cursor": "p2"}, first)
    assert frame is None
    assert late.lost
    assert late.error is not None
    assert late.error.code == HUB_UNREACHABLE
    assert "session/list" in late.error.message
    # Nor is one for an older connection sent once a new one is up; the new one is unaffected.
    d.link()
    stale, frame = d.relay.own_request("session/resume", {"sessionId": S}, first)
    assert (frame, stale.lost) == (None, True)
    current, frame = d.relay.own_request("session/list", {}, d.generation)
    assert frame is not None
    assert not current.lost
    # Failed already: the next drop reports only what was sent.
    assert d.drop() == [OwnAnswer(current), Reconnect()]


def test_a_request_while_the_link_is_down_waits_for_it_and_goes_out_after_the_resume() -> None:
    d = Driver()
    d.drop()
    [submit] = d.editor({"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}})
    assert isinstance(submit, Submit)
    assert d.relay.submit(submit.pending) == [Reconnect()]
    sent = sent_to_hub(d.reconnect())
    assert [m["method"] for m in sent] == ["session/list"]
    assert d.answer(sent[0]["id"], {"sessions": []})[0]["id"] == 9


def test_orphans_are_settled_in_the_order_sent() -> None:
    d = Driver()
    d.new_session(S)
    first = d.request(1, "session/list", {})
    d.request(2, "session/new", {"cwd": "/x", "mcpServers": []})
    d.request(3, "session/set_mode", {"sessionId": S, "modeId": "ask"})
    d.drop()
    out = d.reconnect()
    resent = sent_to_hub(out)
    assert [m["method"] for m in resent] == ["session/list", "session/set_mode"]
    assert all(m["id"] > first + 2 for m in resent)  # fresh ids: a late answer matches nothing
    [failed] = shown(out)
    assert failed["id"] == 2
    assert failed["error"]["code"] == HUB_UNREACHABLE
    assert "may have taken effect" in failed["error"]["message"]
    order = [type(a).__name__ for a in out]
    assert order == ["ToHub", "ToEditor", "ToHub"]


def test_a_v1_prompt_the_hub_started_is_answered_by_its_turns_end_after_a_drop() -> None:
    d = Driver(version=1)
    d.new_session(S)
    hub_id = prompt(d, "p")
    d.hub(update(S, 1, hub_prompt("m-1")))
    d.drop()
    assert d.reconnect() == []  # not sent again: the hub runs it
    assert sent_to_hub(d.hub(chunk(S, 2, "working"))) == []
    out = answers(d.hub(update(S, 3, idle("max_tokens"))))
    assert out == [{"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "max_tokens"}}]
    assert d.answer(hub_id, {"stopReason": "end_turn"}) == []  # the old id is gone
    assert answers(d.hub(update(S, 4, idle()))) == []  # answered once


def test_a_v2_prompt_the_hub_started_is_answered_with_its_message_at_once() -> None:
    _, actions, ask = orphan_a_started_prompt(version=2)
    assert ask is None
    [answer] = shown(actions)
    assert answer["id"] == "p"
    assert answer["result"]["messageId"] == "m-1"


def test_a_prompt_of_another_connection_does_not_settle_the_editors() -> None:
    d = Driver(version=1)
    d.new_session(S)
    prompt(d, "p")
    d.hub(update(S, 1, hub_prompt("m-other", client_id="someone-else")))
    d.drop()
    resent = sent_to_hub(d.reconnect())  # never started: sent again
    assert [m["method"] for m in resent] == ["session/prompt"]
    assert answers(d.hub(update(S, 2, idle()))) == []


def test_a_prompt_started_on_the_new_connection_is_matched_by_its_connection_id() -> None:
    d = Driver(version=1)
    d.new_session(S)
    prompt(d, "p")
    d.drop()
    [resent] = sent_to_hub(d.reconnect())
    d.hub(update(S, 1, hub_prompt("m-1", client_id="c2")))
    assert d.answer(resent["id"], {"stopReason": "end_turn"}) == [
        {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "end_turn"}}
    ]


def orphan_a_started_prompt(version: int) -> tuple[Driver, list[Action], PromptWait | None]:
    """Prompt ``p`` started by the hub as ``m-1``, then a drop and a new connection: the
    driver, and what settling the orphan did and asked."""
    d = Driver(version=version)
    d.new_session(S)
    prompt(d, "p")
    d.hub(update(S, 1, hub_prompt("m-1")))
    d.drop()
    d.link()
    [orphan] = d.relay.take_orphans()
    actions, ask = d.relay.settle_orphan(orphan)
    return d, actions, ask


def test_a_v1_turn_that_ended_unseen_is_answered_from_what_the_hub_tells() -> None:
    d, actions, ask = orphan_a_started_prompt(version=1)
    assert actions == []
    assert ask is not None
    assert ask.message_id == "m-1"
    assert shown(d.relay.turn_ended(ask, "cancelled")) == [
        {"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "cancelled"}}
    ]


def test_a_hub_that_stays_gone_fails_the_orphans_but_not_a_prompt_the_hub_queued() -> None:
    d = Driver(version=2)
    d.new_session(S)
    queued = prompt(d, "q")
    assert d.answer(queued, {"messageId": None, "_meta": {"acp-hub": {"queued": True}}})
    d.request("l", "session/list", {})
    d.drop()
    gone = RpcError(HUB_UNREACHABLE, "the hub is gone: refused")
    failed = shown(d.relay.fail_orphans(gone))
    assert failed == [{"jsonrpc": "2.0", "id": "l", "error": gone.to_dict()}]
    [queued_wait] = d.relay.sessions[S].prompts  # followed until it starts
    assert queued_wait.answered
    assert queued_wait.message_id is None
    assert d.relay.fail_orphans(gone) == []


def test_a_session_the_hub_lost_fails_its_waiting_prompts() -> None:
    d, _, _ = orphan_a_started_prompt(version=1)
    [track] = d.relay.sessions.values()
    lost = RpcError(RESOURCE_NOT_FOUND, "no such session")
    [failed] = shown(d.relay.resume_failed(track, lost))
    assert failed["id"] == "p"
    assert failed["error"]["code"] == RESOURCE_NOT_FOUND
    assert S not in d.relay.sessions
    assert d.relay.resume_failed(track, RpcError(-32603, "busy")) == []


# -- dialogs -----------------------------------------------------------------------------------


def permission_request(hub_id: int, permission_id: str = "perm-1") -> dict[str, Any]:
    params = {"sessionId": S, "options": [], "_meta": {"acp-hub": {"permissionId": permission_id}}}
    return {
        "jsonrpc": "2.0",
        "id": hub_id,
        "method": "session/request_permission",
        "params": params,
    }


ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow"}}


def test_a_permission_offered_again_after_a_drop_reaches_the_open_dialog() -> None:
    d = Driver()
    d.new_session(S)
    [dialog] = shown(d.hub(permission_request(40)))
    d.drop()
    d.reconnect()
    assert d.hub(permission_request(7)) == []  # the editor still shows it
    answered = d.editor({"jsonrpc": "2.0", "id": dialog["id"], "result": ALLOW})
    assert sent_to_hub(answered) == [{"jsonrpc": "2.0", "id": 7, "result": ALLOW}]


def test_an_answer_given_while_the_hub_was_away_is_delivered_when_it_is_offered_again() -> None:
    d = Driver()
    d.new_session(S)
    [dialog] = shown(d.hub(permission_request(40)))
    d.drop()
    assert d.editor({"jsonrpc": "2.0", "id": dialog["id"], "result": ALLOW}) == []
    d.reconnect()
    assert sent_to_hub(d.hub(permission_request(3))) == [
        {"jsonrpc": "2.0", "id": 3, "result": ALLOW}
    ]


def test_a_permission_settled_elsewhere_or_cancelled_is_withdrawn_from_the_editor() -> None:
    d = Driver()
    d.new_session(S)
    [first] = shown(d.hub(permission_request(40, "perm-1")))
    [second] = shown(d.hub(permission_request(41, "perm-2")))
    settled = {"sessionUpdate": "_hub_permission", "permissionId": "perm-1", "status": "allowed"}
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": first["id"]}}
    assert shown(d.hub(update(S, 1, settled))) == [cancel]
    hub_cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 41}}
    assert shown(d.hub(hub_cancel)) == [{**cancel, "params": {"requestId": second["id"]}}]
    late = d.editor({"jsonrpc": "2.0", "id": first["id"], "result": ALLOW})
    assert late == []
    assert len(d.relay.dialogs) == 0


def test_the_bridges_own_ids_towards_the_editor_never_repeat() -> None:
    d = Driver()
    request = {"jsonrpc": "2.0", "method": "session/elicit", "params": {"sessionId": S}}
    ids = [shown(d.hub({**request, "id": 1}))[0]["id"] for _ in range(3)]
    assert len(set(ids)) == 3
    assert all(isinstance(a, ToEditor) for a in d.hub({**request, "id": 2}))
