"""Driving the bridge's core (``hub.bridge.core.Relay``) the way ``hub.bridge.relay`` does,
with JSON values in place of stdin and a WebSocket: no process, no socket, no event loop.

``Driver`` plays the I/O: ``editor(...)`` and ``hub(...)`` feed one message and return the
actions; ``link()`` opens a new hub connection the way the bridge does (its ``initialize``
answered, every tracked session resumed with ``resumed``); ``sent_to_hub`` / ``shown`` read the
frames the actions carry.
"""

from __future__ import annotations

from typing import Any

import orjson

from hub.bridge.actions import Action, Connect, OwnAnswer, Submit, ToEditor, ToHub
from hub.bridge.core import Relay
from hub.bridge.tracking import Pending

URL = "ws://hub.test/acp"


def shown(actions: list[Action]) -> list[dict[str, Any]]:
    """The messages the actions write to the editor, in order."""
    return [orjson.loads(a.frame) for a in actions if isinstance(a, ToEditor)]


def sent_to_hub(actions: list[Action]) -> list[dict[str, Any]]:
    """The messages the actions send to the hub, in order."""
    return [orjson.loads(a.frame) for a in actions if isinstance(a, ToHub)]


def update(
    session_id: str, seq: int | None, body: dict[str, Any], epoch: int = 1
) -> dict[str, Any]:
    """A hub ``session/update`` notification at ``(epoch, seq)``."""
    params: dict[str, Any] = {"sessionId": session_id, "update": body}
    if seq is not None:
        params["_meta"] = {"acp-hub": {"epoch": epoch, "seq": seq}}
    return {"jsonrpc": "2.0", "method": "session/update", "params": params}


def chunk(session_id: str, seq: int, text: str, message_id: str = "m-agent") -> dict[str, Any]:
    """An agent message chunk at ``seq``."""
    body = {
        "sessionUpdate": "agent_message_chunk",
        "messageId": message_id,
        "content": {"type": "text", "text": text},
    }
    return update(session_id, seq, body)


class Driver:
    """A ``Relay`` with an initialized editor (``version``) and its first hub connection."""

    def __init__(self, version: int = 1, **options: Any) -> None:
        self.relay = Relay(URL, **options)
        self.connections = 0
        self.resumed: list[dict[str, Any]] = []
        """The ``session/resume`` params of every ``link()``, in order."""
        init = {"protocolVersion": version, "clientCapabilities": {"fs": {"readTextFile": True}}}
        [connect] = self.editor({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        assert isinstance(connect, Connect)
        result = self.link()
        assert shown(self.relay.initialized(connect.editor_id, result)) == [
            {"jsonrpc": "2.0", "id": 0, "result": result}
        ]

    @property
    def generation(self) -> int:
        return self.relay.generation

    def editor(self, message: dict[str, Any]) -> list[Action]:
        return self.relay.from_editor(orjson.dumps(message))

    def hub(self, message: dict[str, Any]) -> list[Action]:
        return self.relay.from_hub(orjson.dumps(message).decode(), self.generation)

    def own(self, method: str, params: dict[str, Any], result: Any) -> Pending:
        """One of the bridge's own requests, answered with ``result``."""
        pending, frame = self.relay.own_request(method, params, self.generation)
        assert frame is not None
        sent = orjson.loads(frame)
        assert (sent["method"], sent["params"]) == (method, params)
        answered = self.hub({"jsonrpc": "2.0", "id": sent["id"], "result": result})
        assert answered == [OwnAnswer(pending)]
        return pending

    def link(self, cursors: dict[str, tuple[int, int]] | None = None) -> dict[str, Any]:
        """A new hub connection: initialized, then each tracked session resumed (answered at
        ``cursors[session]`` when given). The ``initialize`` result."""
        self.relay.linked()
        self.connections += 1
        result = {
            "protocolVersion": self.relay.version,
            "_meta": {"acp-hub": {"connectionId": f"c{self.connections}"}},
        }
        self.own("initialize", self.relay.hub_initialize(), result)
        self.relay.connected(result)
        for track, params in self.relay.resumes():
            self.resumed.append(params)
            answer: dict[str, Any] = {}
            if cursors and track.session_id in cursors:
                epoch, seq = cursors[track.session_id]
                answer["_meta"] = {"acp-hub": {"epoch": epoch, "seq": seq}}
            self.relay.resumed(track, answer)
        return result

    def request(self, editor_id: Any, method: str, params: dict[str, Any]) -> int:
        """An editor request sent to the hub over the link that is up; its hub id."""
        actions = self.editor(
            {"jsonrpc": "2.0", "id": editor_id, "method": method, "params": params}
        )
        [submit] = actions
        assert isinstance(submit, Submit)
        [sent] = sent_to_hub(self.relay.submit(submit.pending))
        assert sent["method"] == submit.pending.method
        return int(sent["id"])

    def answer(self, hub_id: int, result: Any) -> list[dict[str, Any]]:
        """The hub answers ``hub_id``; what the editor is shown."""
        return shown(self.hub({"jsonrpc": "2.0", "id": hub_id, "result": result}))

    def new_session(self, session_id: str, seq: int = 0) -> None:
        """``session/new`` answered with ``session_id`` at cursor ``(1, seq)``."""
        hub_id = self.request(f"new-{session_id}", "session/new", {"cwd": "/w", "mcpServers": []})
        result = {"sessionId": session_id, "_meta": {"acp-hub": {"epoch": 1, "seq": seq}}}
        assert self.answer(hub_id, result)[0]["result"]["sessionId"] == session_id

    def drop(self) -> list[Action]:
        return self.relay.dropped(self.generation, "close code 1012")

    def reconnect(self, cursors: dict[str, tuple[int, int]] | None = None) -> list[Action]:
        """A new connection after a drop, then every orphan settled the way the bridge does
        (a v1 prompt whose turn the events did not tell is reported not over)."""
        self.link(cursors)
        out: list[Action] = []
        for pending in self.relay.take_orphans():
            actions, ask = self.relay.settle_orphan(pending)
            out.extend(actions)
            if ask is not None:
                out.extend(self.relay.turn_ended(ask, None))
        return out
