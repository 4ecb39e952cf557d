"""The demo agent: a scripted, offline ACP agent (v1 and v2 over stdio) for ``acp-hub demo``.

To any prompt it plays a realistic coding-agent turn about the prompt's topic: thoughts, a plan
whose entries progress, a proposed edit (a tool call with a diff), a test run in an agent-owned
terminal with coloured output, a permission request before "applying" the edit (the answer is
honoured), a streamed markdown answer (headings, a list, a code fence, a table, a link) and usage
updates. The session offers two config options, ``mode`` (``code`` runs tools, ``ask`` only
answers) and ``model`` (cosmetic). The prompt ``/slow`` starts a long, slow turn for trying
cancellation. Every pause is cancellable; ``ACP_HUB_DEMO_FAST=1`` removes the pauses (tests).

Theory of operation: the main thread reads stdin and answers requests; ``session/prompt`` starts
a turn thread. All writes to stdout go through one lock, one JSON message per line. The turn
thread blocks on the client's answer to its permission request, which the main thread hands over
by request id. A cancel (``session/cancel``, ``session/close``, ``$/cancel_request`` for a v1
prompt) sets the turn's event; every pause and step checks it and the turn ends ``cancelled``.

Standalone on purpose: it imports nothing from ``hub`` (only the standard library and orjson), so
that the hub meets it as it meets any foreign agent, over stdio in the agent's own words and not
through the hub's own translators and checks. For the same reason it is one file (over the
600-line mark: one script an agent author can read top to bottom) and repeats, deliberately, what
``hub.protocol`` and the test suite's scripted agent also have (error codes, the stdio loop, the
v1/v2 update shapes); a shared module would make the two sides of the wire one code.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

Json = dict[str, Any]

NAME = "acp-hub-demo"
VERSION = "1.0.0"
FAST_ENV = "ACP_HUB_DEMO_FAST"

MODES = (
    ("code", "Code", "Plan, edit and run tests (asks before applying changes)"),
    ("ask", "Ask", "Answer only; no tools"),
)
MODELS = (
    ("demo-large", "Demo Large", "Thorough answers"),
    ("demo-small", "Demo Small", "Quick answers"),
)

# Structural: the schema's codes, as hub.protocol.errors has them (standalone on purpose).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002


class RpcFailure(Exception):
    """A request handler's failure, answered as a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Cancelled(Exception):
    """The turn saw a cancel; it ends with stop reason ``cancelled``."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _error(request_id: Any, code: int, message: str) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


# --------------------------------------------------------------------------- transport


@dataclass
class _Waiter:
    event: threading.Event = field(default_factory=threading.Event)
    response: Json | None = None


class Transport:
    """stdout, one whole line per message under one lock, and the agent's own requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out = sys.stdout.buffer
        self._next_id = 0
        self._waiters: dict[int, _Waiter] = {}

    def send(self, message: Json | list[Json]) -> None:
        """Write one message (or batch reply); exits quietly when the client has gone."""
        data = orjson.dumps(message) + b"\n"
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, OSError, ValueError):
                os._exit(0)

    def notify(self, method: str, params: Json) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Json) -> Json:
        """Send a request and block until the whole response message arrives."""
        waiter = _Waiter()
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
            self._waiters[request_id] = waiter
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        waiter.event.wait()
        assert waiter.response is not None
        return waiter.response

    def resolve(self, message: Json) -> None:
        """Hand a response from the client to the request waiting for it (unknown ids: dropped)."""
        request_id = message.get("id")
        with self._lock:
            waiter = self._waiters.pop(request_id, None) if isinstance(request_id, int) else None
        if waiter is not None:
            waiter.response = message
            waiter.event.set()


# --------------------------------------------------------------------------- sessions


@dataclass
class DemoTurnState:
    """The running turn of a session."""

    prompt_request_id: Any
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass
class DemoSession:
    """One conversation: its settings and the updates to replay on load/resume."""

    session_id: str
    cwd: str
    mode: str = "code"
    model: str = "demo-large"
    title: str | None = None
    updated_at: str = field(default_factory=_now)
    history: list[Json] = field(default_factory=list)
    turn: DemoTurnState | None = None
    tokens: int = 0
    counter: int = 0
    plan_id: str = ""
    """The session's one plan: each turn's plan replaces the previous turn's."""

    def new_id(self, prefix: str) -> str:
        """A fresh id for a message, tool call, terminal or plan, unique in this session."""
        self.counter += 1
        return f"{prefix}_{self.counter}_{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------- the agent


class DemoAgent:
    """Answers the client's requests; prompts run in a ``DemoTurn`` thread."""

    def __init__(self, protocol: int | None, fast: bool) -> None:
        self.supported = (protocol,) if protocol is not None else (1, 2)
        self.fast = fast
        self.transport = Transport()
        self.version = 0
        self.sessions: dict[str, DemoSession] = {}
        self.lock = threading.Lock()

    @property
    def v2(self) -> bool:
        return self.version == 2

    def serve(self) -> None:
        """Read stdin until EOF, then exit."""
        for raw in sys.stdin.buffer:
            line = raw.strip()
            if not line:
                continue
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.transport.send(_error(None, PARSE_ERROR, "Parse error"))
                continue
            if isinstance(message, list):
                self._batch(message)
                continue
            reply = self.handle(message)
            if reply is not None:
                self.transport.send(reply)
        sys.stdout.flush()
        os._exit(0)

    def _batch(self, entries: list[Any]) -> None:
        if not self.v2 or not entries:
            self.transport.send(_error(None, INVALID_REQUEST, "Invalid Request"))
            return
        replies = [reply for entry in entries if (reply := self.handle(entry)) is not None]
        if replies:  # an all-notification batch gets no answer at all
            self.transport.send(replies)

    def handle(self, message: Any) -> Json | None:
        """Answer one incoming message; returns the reply to send, if any."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "Invalid Request")
        method = message.get("method")
        if method is None:
            if "id" in message:
                self.transport.resolve(message)
                return None
            return _error(None, INVALID_REQUEST, "Invalid Request")
        params = message.get("params") or {}
        if not isinstance(method, str) or not isinstance(params, dict):
            return _error(message.get("id"), INVALID_REQUEST, "Invalid Request")
        if "id" not in message:
            self._notification(method, params)
            return None
        request_id = message["id"]
        try:
            result = self._request(request_id, method, params)
        except RpcFailure as failure:
            return _error(request_id, failure.code, failure.message)
        except Exception as exc:  # a bug must not take the agent down
            traceback.print_exc()
            return _error(request_id, INTERNAL_ERROR, str(exc))
        if result is None:
            return None  # answered later (a v1 prompt)
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _notification(self, method: str, params: Json) -> None:
        if method == "session/cancel":
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None and session.turn is not None:
                session.turn.cancel.set()
        elif method == "$/cancel_request":
            # Only a v1 prompt stays pending long enough to be cancelled this way.
            for session in list(self.sessions.values()):
                turn = session.turn
                if not self.v2 and turn and turn.prompt_request_id == params.get("requestId"):
                    turn.cancel.set()

    def _request(self, request_id: Any, method: str, params: Json) -> Json | None:
        if method == "initialize":
            return self._initialize(params)
        if not self.version:
            raise RpcFailure(INVALID_REQUEST, "initialize first")
        if method == "session/prompt":
            return self._prompt(request_id, params)
        handlers: dict[str, Callable[[Json], Json]] = {
            "session/new": self._new,
            "session/list": self._list,
            "session/resume": self._resume,
            "session/close": self._close,
            "session/delete": self._delete,
            "session/set_config_option": self._set_config_option,
        }
        if not self.v2:
            handlers["session/load"] = self._load
            handlers["session/set_mode"] = self._set_mode
        handler = handlers.get(method)
        if handler is None:
            raise RpcFailure(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params)

    # ------------------------------------------------------------------ initialize, sessions

    def _initialize(self, params: Json) -> Json:
        offered = params.get("protocolVersion")
        self.version = (
            offered
            if isinstance(offered, int) and offered in self.supported
            else max(self.supported)
        )
        info = {"name": NAME, "title": "acp-hub demo agent", "version": VERSION}
        if self.v2:
            return {
                "protocolVersion": 2,
                "info": info,
                "capabilities": {"session": {"delete": {}}},
                "authMethods": [],
            }
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
            },
            "authMethods": [],
            "agentInfo": info,
        }

    def config_options(self, session: DemoSession) -> list[Json]:
        """The full set of config options with their current values, in this version's shape."""
        key = "configId" if self.v2 else "id"

        def select(config_id: str, name: str, category: str, current: str, choices: Any) -> Json:
            return {
                key: config_id,
                "name": name,
                "category": category,
                "type": "select",
                "currentValue": current,
                "options": [
                    {"value": value, "name": label, "description": description}
                    for value, label, description in choices
                ],
            }

        return [
            select("mode", "Mode", "mode", session.mode, MODES),
            select("model", "Model", "model", session.model, MODELS),
        ]

    def _state(self, session: DemoSession) -> Json:
        state: Json = {"configOptions": self.config_options(session)}
        if not self.v2:
            state["modes"] = {
                "currentModeId": session.mode,
                "availableModes": [
                    {"id": mode, "name": name, "description": description}
                    for mode, name, description in MODES
                ],
            }
        return state

    def _find(self, params: Json) -> DemoSession:
        session = self.sessions.get(str(params.get("sessionId")))
        if session is None:
            raise RpcFailure(RESOURCE_NOT_FOUND, "Session not found")
        return session

    def _new(self, params: Json) -> Json:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcFailure(INVALID_PARAMS, "cwd must be an absolute path")
        session = DemoSession(session_id=f"demo_{uuid.uuid4().hex}", cwd=cwd)
        self.sessions[session.session_id] = session
        return {"sessionId": session.session_id, **self._state(session)}

    def _list(self, params: Json) -> Json:
        cwd = params.get("cwd")
        return {
            "sessions": [
                {
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    "updatedAt": s.updated_at,
                    **({"title": s.title} if s.title else {}),
                }
                for s in self.sessions.values()
                if cwd is None or s.cwd == cwd
            ]
        }

    def _replay(self, session: DemoSession) -> None:
        for update in list(session.history):
            self.transport.notify(
                "session/update", {"sessionId": session.session_id, "update": update}
            )

    def _resume(self, params: Json) -> Json:
        session = self._find(params)
        replay_from = params.get("replayFrom") if self.v2 else None
        if replay_from is not None:
            if not isinstance(replay_from, dict) or replay_from.get("type") != "start":
                raise RpcFailure(INVALID_PARAMS, "only replayFrom {type: start} is supported")
            self._replay(session)
        return self._state(session)

    def _load(self, params: Json) -> Json:
        session = self._find(params)
        self._replay(session)
        return self._state(session)

    def _close(self, params: Json) -> Json:
        session = self._find(params)
        if session.turn is not None:
            session.turn.cancel.set()
        return {}

    def _delete(self, params: Json) -> Json:
        session = self.sessions.pop(str(params.get("sessionId")), None)
        if session is not None and session.turn is not None:
            session.turn.cancel.set()
        return {}

    def _set_config_option(self, params: Json) -> Json:
        session = self._find(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id == "mode" and value in {m for m, _, _ in MODES}:
            session.mode = str(value)
        elif config_id == "model" and value in {m for m, _, _ in MODELS}:
            session.model = str(value)
        else:
            raise RpcFailure(INVALID_PARAMS, f"invalid value {value!r} for {config_id!r}")
        return {"configOptions": self.config_options(session)}

    def _set_mode(self, params: Json) -> Json:
        session = self._find(params)
        mode = params.get("modeId")
        if mode not in {m for m, _, _ in MODES}:
            raise RpcFailure(INVALID_PARAMS, f"invalid mode {mode!r}")
        session.mode = str(mode)
        return {}

    def _prompt(self, request_id: Any, params: Json) -> Json | None:
        session = self._find(params)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcFailure(INVALID_PARAMS, "prompt must be an array of content blocks")
        with self.lock:
            if session.turn is not None:
                raise RpcFailure(INVALID_REQUEST, "a prompt turn is already running")
            session.turn = DemoTurnState(prompt_request_id=request_id)
        turn = DemoTurn(self, session, session.turn, prompt)
        if self.v2:
            # v2 acknowledges acceptance before the turn's first update; like the SDK agents it
            # names the user message it is about to report (an extra field the schema allows).
            ack = {"messageId": turn.user_message_id}
            self.transport.send({"jsonrpc": "2.0", "id": request_id, "result": ack})
        threading.Thread(target=turn.run, name="demo-turn", daemon=True).start()
        return None


# --------------------------------------------------------------------------- one turn

TEST_OUTPUT = (
    "\x1b[1m$ pytest -q tests/test_{slug}.py\x1b[0m\r\n"
    "\x1b[32m.\x1b[0m\x1b[32m.\x1b[0m\x1b[32m.\x1b[0m\x1b[33ms\x1b[0m"
    "                                              [100%]\r\n"
    "\x1b[32m✔ test_{slug}_handles_empty_input\x1b[0m\r\n"
    "\x1b[32m✔ test_{slug}_keeps_order\x1b[0m\r\n"
    "\x1b[32m✔ test_{slug}_round_trip — naïve input\x1b[0m\r\n"
    "\x1b[33m⚠ test_{slug}_slow_path skipped (needs --runslow)\x1b[0m\r\n"
    "\x1b[1;32m3 passed\x1b[0m, \x1b[33m1 skipped\x1b[0m in 0.12s\r\n"
)


def topic_of(prompt: list[Any]) -> str:
    """The prompt's first line of text, trimmed to a short topic."""
    text = " ".join(
        str(block.get("text", ""))
        for block in prompt
        if isinstance(block, dict) and block.get("type") == "text"
    ).strip()
    first = text.splitlines()[0].strip() if text else ""
    if not first:
        return "your request"
    return first if len(first) <= 60 else first[:57].rstrip() + "..."


def slug_of(topic: str) -> str:
    """A file-name-safe slug of up to three words of the topic."""
    words = re.findall(r"[a-z0-9]+", topic.lower())
    return "_".join(words[:3]) or "example"


def words_of(text: str, per_chunk: int = 3) -> list[str]:
    """``text`` cut into pieces of a few words; the pieces concatenate back to ``text``."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return ["".join(parts[i : i + per_chunk]) for i in range(0, len(parts), per_chunk)]


class DemoTurn:
    """Plays one prompt turn of the demo script for a session."""

    def __init__(
        self, agent: DemoAgent, session: DemoSession, state: DemoTurnState, prompt: list[Any]
    ) -> None:
        self.agent = agent
        self.transport = agent.transport
        self.session = session
        self.state = state
        self.prompt = prompt
        self.v2 = agent.v2
        self.fast = agent.fast
        self.user_message_id = session.new_id("user")
        self.topic = topic_of(prompt)
        self.slug = slug_of(self.topic)
        self.known_tools: set[str] = set()  # v1: created with `tool_call` once
        self.open_tools: set[str] = set()  # not finished yet: marked on cancel

    # ------------------------------------------------------------------ plumbing

    def update(self, update: Json, record: bool = True) -> None:
        self.transport.notify(
            "session/update", {"sessionId": self.session.session_id, "update": update}
        )
        if record:
            self.session.history.append(update)

    def set_state(self, state: str, stop_reason: str | None = None) -> None:
        if not self.v2:
            return
        update: Json = {"sessionUpdate": "state_update", "state": state}
        if stop_reason is not None:
            update["stopReason"] = stop_reason
        self.update(update, record=False)

    def pause(self, seconds: float) -> None:
        """A cancellable pause (none in fast mode, but a cancel still ends the turn)."""
        if self.state.cancel.wait(0 if self.fast else seconds):
            raise Cancelled

    def stream(self, kind: str, text: str, delay: float) -> None:
        """Stream ``text`` as one message of a few words per chunk."""
        message_id = self.session.new_id("msg")
        for piece in words_of(text):
            self.pause(delay)
            update: Json = {"sessionUpdate": kind, "content": {"type": "text", "text": piece}}
            if self.v2:
                update["messageId"] = message_id
            self.update(update)

    def tool(self, tool_call_id: str, **fields: Any) -> None:
        """Create (first call, v1 ``tool_call``) or patch a tool call."""
        kind = "tool_call_update" if self.v2 or tool_call_id in self.known_tools else "tool_call"
        self.update({"sessionUpdate": kind, "toolCallId": tool_call_id, **fields})
        self.known_tools.add(tool_call_id)
        if fields.get("status") in {"completed", "failed", "cancelled"}:
            self.open_tools.discard(tool_call_id)
        else:
            self.open_tools.add(tool_call_id)

    def plan(self, plan_id: str, done: int, steps: list[str]) -> None:
        entries = [
            {
                "content": step,
                "priority": "high" if i < 2 else "medium",
                "status": "completed" if i < done else "in_progress" if i == done else "pending",
            }
            for i, step in enumerate(steps)
        ]
        if self.v2:
            self.update(
                {
                    "sessionUpdate": "plan_update",
                    "plan": {"type": "items", "planId": plan_id, "entries": entries},
                }
            )
        else:
            self.update({"sessionUpdate": "plan", "entries": entries})

    def usage(self, tokens: int) -> None:
        self.session.tokens += tokens
        used = self.session.tokens
        self.update(
            {
                "sessionUpdate": "usage_update",
                "used": used,
                "size": 128000,
                "cost": {"amount": round(used * 0.000003, 6), "currency": "USD"},
            }
        )

    # ------------------------------------------------------------------ the turn

    def run(self) -> None:
        """Play the turn and end it with its stop reason (v1 response or v2 idle)."""
        stop_reason = "end_turn"
        try:
            if self.v2:
                self.update(
                    {
                        "sessionUpdate": "user_message",
                        "messageId": self.user_message_id,
                        "content": self.prompt,
                    }
                )
            else:
                for block in self.prompt:  # v1 does not echo the prompt; a load replays it
                    self.session.history.append(
                        {"sessionUpdate": "user_message_chunk", "content": block}
                    )
            self.set_state("running")
            if self.topic.strip().lower().startswith("/slow"):
                self.slow()
            else:
                self.script()
        except Cancelled:
            stop_reason = "cancelled"
            for tool_call_id in sorted(self.open_tools):
                self.tool(tool_call_id, status="cancelled" if self.v2 else "failed")
        except Exception:  # a bug: end the turn rather than leave the client waiting
            traceback.print_exc()
            stop_reason = "refusal"
        self.finish(stop_reason)

    def finish(self, stop_reason: str) -> None:
        self.session.updated_at = _now()
        with self.agent.lock:
            self.session.turn = None
        if self.v2:
            self.set_state("idle", stop_reason)
        else:
            self.transport.send(
                {
                    "jsonrpc": "2.0",
                    "id": self.state.prompt_request_id,
                    "result": {"stopReason": stop_reason},
                }
            )

    def slow(self) -> None:
        self.stream("agent_thought_chunk", "This will take a while. Cancel me any time.", 0.1)
        message_id = self.session.new_id("msg")
        for i in range(1, 121):
            self.pause(0.5)
            update: Json = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"Step {i} of 120 done.\n"},
            }
            if self.v2:
                update["messageId"] = message_id
            self.update(update)

    def script(self) -> None:
        topic, slug = self.topic, self.slug
        if self.session.title is None:
            self.session.title = topic
            self.update(
                {"sessionUpdate": "session_info_update", "title": topic, "updatedAt": _now()}
            )
        self.stream(
            "agent_thought_chunk",
            f"The user asks about {topic!r}. I should look at the relevant module, "
            "propose a small change, run the tests and explain the result.",
            0.05,
        )
        self.usage(850)
        if self.session.mode == "ask":
            self.answer(applied=None)
            self.usage(420)
            return
        steps = [
            f"Read the code related to {topic}",
            f"Propose an edit to src/{slug}.py",
            "Run the test suite",
            "Apply the change (needs your permission)",
            "Summarise",
        ]
        if not self.session.plan_id:
            self.session.plan_id = self.session.new_id("plan")
        plan_id = self.session.plan_id  # a new turn's plan replaces the last one
        self.plan(plan_id, 0, steps)
        self.pause(0.3)

        path = os.path.join(self.session.cwd, "src", f"{slug}.py")
        edit_id = self.session.new_id("call")
        self.plan(plan_id, 1, steps)
        self.tool(
            edit_id,
            title=f"Edit src/{slug}.py",
            kind="edit",
            status="in_progress",
            locations=[{"path": path, "line": 1}],
        )
        self.pause(0.4)
        self.tool(edit_id, content=[self.diff(path)])

        self.plan(plan_id, 2, steps)
        self.run_tests()

        self.plan(plan_id, 3, steps)
        applied = self.ask_permission(edit_id, path)
        self.tool(edit_id, status="completed" if applied else "failed")

        self.plan(plan_id, 4, steps)
        self.answer(applied=applied)
        self.usage(1650)
        self.plan(plan_id, 5, steps)

    def diff(self, path: str) -> Json:
        func = self.slug
        old_text = f"def {func}(items):\n    return items\n"
        new_text = (
            f"def {func}(items: list[str]) -> list[str]:\n"
            f'    """Handle {self.topic} (sorted, without duplicates)."""\n'
            "    return sorted(set(items))\n"
        )
        if not self.v2:
            return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}
        patch = (
            f"diff --git a{path} b{path}\n--- a{path}\n+++ b{path}\n@@ -1,2 +1,3 @@\n"
            + "".join(f"-{line}\n" for line in old_text.splitlines())
            + "".join(f"+{line}\n" for line in new_text.splitlines())
        )
        return {
            "type": "diff",
            "changes": [{"operation": "modify", "path": path, "fileType": "text"}],
            "patch": {"format": "git_patch", "text": patch},
        }

    def run_tests(self) -> None:
        output = TEST_OUTPUT.format(slug=self.slug)
        tool_id = self.session.new_id("call")
        command = f"pytest -q tests/test_{self.slug}.py"
        if not self.v2:
            self.tool(tool_id, title=f"Run {command}", kind="execute", status="in_progress")
            self.pause(0.8)
            plain = re.sub(r"\x1b\[[0-9;]*m", "", output).replace("\r\n", "\n")
            text = {"type": "content", "content": {"type": "text", "text": plain}}
            self.tool(tool_id, status="completed", content=[text])
            return
        terminal_id = self.session.new_id("term")
        self.tool(
            tool_id,
            title=f"Run {command}",
            kind="execute",
            status="in_progress",
            content=[{"type": "terminal", "terminalId": terminal_id}],
        )
        self.update(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                "command": command,
                "cwd": self.session.cwd,
            }
        )
        data = output.encode()
        # Fixed-size pieces, as a pipe delivers them: they cut through UTF-8 and escapes.
        for start in range(0, len(data), 37):
            self.pause(0.06)
            self.update(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": terminal_id,
                    "data": base64.b64encode(data[start : start + 37]).decode(),
                }
            )
        self.update(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                "exitStatus": {"exitCode": 0},
            }
        )
        self.tool(tool_id, status="completed")

    def ask_permission(self, edit_id: str, path: str) -> bool:
        """Ask before applying the edit; True when allowed. A cancel while asking ends the turn."""
        options = [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ]
        title = f"Apply the edit to src/{self.slug}.py?"
        params: Json = {"sessionId": self.session.session_id, "options": options}
        if self.v2:
            params["title"] = title
            params["description"] = f"The demo agent wants to write {path}."
            params["subject"] = {
                "type": "tool_call",
                "toolCall": {"toolCallId": edit_id, "status": "pending"},
            }
            self.set_state("requires_action")
        else:
            params["toolCall"] = {"toolCallId": edit_id, "title": title, "status": "pending"}
        response = self.transport.request("session/request_permission", params)
        if self.state.cancel.is_set():
            raise Cancelled
        self.set_state("running")
        outcome = (response.get("result") or {}).get("outcome") or {}
        # Anything but an explicit "allow" (errors, cancelled, unknown outcomes) is a refusal.
        return outcome.get("outcome") == "selected" and outcome.get("optionId") == "allow_once"

    def answer(self, applied: bool | None) -> None:
        topic, slug, model = self.topic, self.slug, self.session.model
        if applied is None:
            status = "I only answered (mode **Ask**); switch to **Code** to let me edit files."
        elif applied:
            status = f"I applied the edit to `src/{slug}.py` and the tests pass."
        else:
            status = f"You rejected the edit, so `src/{slug}.py` is unchanged."
        text = (
            f"## {topic[:1].upper()}{topic[1:]}\n\n"
            f"{status}\n\n"
            "### What I did\n\n"
            f"1. Read the code around **{topic}**.\n"
            f"2. Proposed a typed version of `{slug}()` that sorts and de-duplicates.\n"
            "3. Ran the tests in a terminal (3 passed, 1 skipped).\n\n"
            "### The new function\n\n"
            "```python\n"
            f"def {slug}(items: list[str]) -> list[str]:\n"
            "    return sorted(set(items))\n"
            "```\n\n"
            "| check | result |\n"
            "|---|---|\n"
            "| tests | 3 passed, 1 skipped |\n"
            f"| edit | {'applied' if applied else 'not applied'} |\n"
            f"| model | `{model}` |\n\n"
            "- Everything here is simulated by the demo agent: no file was touched.\n"
            "- Learn more about the protocol at "
            "[agentclientprotocol.com](https://agentclientprotocol.com).\n"
        )
        self.stream("agent_message_chunk", text, 0.035)


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> None:
    """``python -m hub.demo.agent [--protocol 1|2|auto]``: serve ACP on stdin/stdout."""
    parser = argparse.ArgumentParser(prog="python -m hub.demo.agent", description=__doc__)
    parser.add_argument("--protocol", choices=["1", "2", "auto"], default="auto")
    args = parser.parse_args(argv)
    protocol = None if args.protocol == "auto" else int(args.protocol)
    fast = os.environ.get(FAST_ENV, "") not in {"", "0"}
    DemoAgent(protocol, fast).serve()


if __name__ == "__main__":
    main()
