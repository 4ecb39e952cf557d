#!/usr/bin/env python3
"""A scripted ACP agent for the test suite, speaking ACP v1 or v2 over stdio.

It imports nothing from the hub, only the standard library, so that the hub meets it the way it
meets any foreign agent. For the same reason it repeats, on purpose, what ``hub.protocol`` and the
demo agent (``hub/demo/agent.py``) also have (error codes, the stdio loop, the v1/v2 shapes):
sharing that code would let a bug on one side of the wire hide the same bug on the other.

What a prompt turn does is driven by the prompt text: a small command
language, one command per line (``say hello``, ``stream 1000 64``, ``permission``, ``sleep 500``,
``crash`` ...). ``tests/agents/README.md`` documents the language and the command-line flags.

Theory of operation: the main thread reads stdin line by line and answers every request except
``session/prompt`` itself. A prompt starts a turn thread that runs the script; the turn thread
writes its updates directly (one lock serialises all writes to stdout) and blocks on responses
to its own requests (permission, elicitation), which the main thread hands over by id. A cancel
sets the turn's event; waiting commands (``sleep``, ``slow``) and every command boundary check it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]

AGENT_NAME = "scripted-agent"
AGENT_VERSION = "1.0.0"
LIST_PAGE_SIZE = 100
MODES = (("ask", "Ask", "Answer questions only"), ("code", "Code", "Write and change code"))

# JSON-RPC / ACP error codes (schema `ErrorCode`).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
AUTH_REQUIRED = -32000
REQUEST_CANCELLED = -32800

# --require-login: the methods advertised (the `terminal` one only to a client that opts in).
LOGIN_AGENT = "scripted-login"
LOGIN_ENV = "scripted-key"
LOGIN_ENV_VAR = "SCRIPTED_API_KEY"
LOGIN_TERMINAL = "scripted-terminal"
TERMINAL_MARKER = "scripted-terminal-login"  # the file `--terminal-login` writes under $HOME


class RpcFailure(Exception):
    """Raised by a request handler: answered as a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Cancelled(Exception):
    """The turn noticed a cancel: it ends with stop reason ``cancelled``."""


class Stop(Exception):
    """The ``stop REASON`` command: the turn ends with this stop reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


DEFERRED: Json = {}  # sentinel result: the handler answers the request later itself


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --------------------------------------------------------------------------- output channel


@dataclass
class _Pending:
    session_id: str
    event: threading.Event = field(default_factory=threading.Event)
    response: Json | None = None


class Channel:
    """Everything written to stdout, one lock for whole lines, plus the agent's own requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out = sys.stdout.buffer
        self._next_id = 0  # real agents number their requests from 0, colliding with the client's
        self._pending: dict[int, _Pending] = {}

    def write(self, data: bytes) -> None:
        with self._lock:
            self._write_locked(data)

    def _write_locked(self, data: bytes) -> None:
        try:
            self._out.write(data)
            self._out.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The client went away: nothing left to talk to.
            os._exit(1)

    def send(self, message: Json) -> None:
        self.write(encode(message))

    def write_pieces(self, pieces: Callable[[], list[bytes]]) -> None:
        """Write several pieces under one lock, flushing each: one line that arrives slowly."""
        with self._lock:
            for piece in pieces():
                self._write_locked(piece)

    def notify(self, method: str, params: Json) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Json) -> Json:
        """Send a request and block until its response (the whole response message) arrives."""
        pending = _Pending(session_id=str(params.get("sessionId")))
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
            self._pending[request_id] = pending
            self._write_locked(
                encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            )
        pending.event.wait()
        assert pending.response is not None
        return pending.response

    def cancel_pending(self, session_id: str) -> None:
        """Send `$/cancel_request` for each request of this session still awaiting an answer."""
        with self._lock:
            for request_id, pending in self._pending.items():
                if pending.session_id == session_id:
                    self._write_locked(
                        encode(
                            {
                                "jsonrpc": "2.0",
                                "method": "$/cancel_request",
                                "params": {"requestId": request_id},
                            }
                        )
                    )

    def resolve(self, message: Json) -> None:
        """Hand a response from the client to the request that waits for it."""
        request_id = message.get("id")
        with self._lock:
            pending = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None:
            log(f"response to unknown request id {request_id!r} ignored")
            return
        pending.response = message
        pending.event.set()


def encode(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def log(text: str) -> None:
    sys.stderr.write(f"[{AGENT_NAME}] {text}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------- sessions


@dataclass
class Turn:
    """One running prompt turn."""

    prompt_request_id: Any
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass
class Session:
    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str = field(default_factory=now_rfc3339)
    mode: str = "ask"
    model: str = ""
    verbose: bool = False
    history: list[Json] = field(default_factory=list)
    turn: Turn | None = None
    counter: int = 0
    used_tokens: int = 0
    path: str | None = None
    """With ``--state-dir``: where the session's metadata is kept, so that a restarted agent
    can resume it (without its history) and never reuses an id."""

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        self.save()
        return f"{prefix}-{self.counter}"

    def save(self) -> None:
        if self.path is None:
            return
        data = {"cwd": self.cwd, "counter": self.counter, "title": self.title, "mode": self.mode}
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.path)


# --------------------------------------------------------------------------- the agent


class Agent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.channel = Channel()
        self.version: int | None = None  # protocol version this connection speaks
        self.sessions: dict[str, Session] = {}
        self.elicitation_form = False
        self.boolean_options = False
        self.terminal_auth = False
        self.logged_in: str | None = None  # the method id of the login (--require-login)
        self.lock = threading.Lock()
        self.held: dict[str, Session] = {}  # `_acme/wait` requests held, by request id

    @property
    def v2(self) -> bool:
        return self.version == 2

    # ------------------------------------------------------------------ input loop

    def run(self) -> None:
        stdin = sys.stdin.buffer
        while True:
            line = stdin.readline()
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.channel.send(error_message(None, PARSE_ERROR, "Parse error"))
                continue
            if isinstance(message, list):
                self.handle_batch(message)
                continue
            reply = self.handle(message)
            if reply is not None:
                self.channel.send(reply)
        if self.args.ignore_eof:
            log("stdin closed; ignoring it")
            threading.Event().wait()
        os._exit(0)

    def handle_batch(self, entries: list[Any]) -> None:
        if not self.v2 or not entries:
            self.channel.send(error_message(None, INVALID_REQUEST, "Invalid Request"))
            return
        replies = [reply for entry in entries if (reply := self.handle(entry)) is not None]
        if replies:
            self.channel.send(replies)  # type: ignore[arg-type]

    def handle(self, message: Any) -> Json | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return error_message(None, INVALID_REQUEST, "Invalid Request")
        method = message.get("method")
        if method is None:
            if "id" in message and ("result" in message or "error" in message):
                self.channel.resolve(message)
                return None
            return error_message(None, INVALID_REQUEST, "Invalid Request")
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(method, str) or not isinstance(params, dict):
            return error_message(message.get("id"), INVALID_REQUEST, "Invalid Request")
        if "id" not in message:
            self.handle_notification(method, params)
            return None
        request_id = message["id"]
        try:
            result = self.handle_request(request_id, method, params)
        except RpcFailure as failure:
            return error_message(request_id, failure.code, failure.message)
        except Exception as exc:  # a bug here must not kill the agent
            traceback.print_exc()
            return error_message(request_id, INTERNAL_ERROR, f"internal error: {exc}")
        if result is DEFERRED:
            return None
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def handle_notification(self, method: str, params: Json) -> None:
        if method == "session/cancel":
            session = self.sessions.get(str(params.get("sessionId")))
            if session is not None and session.turn is not None:
                session.turn.cancel.set()
                if self.args.cancel_requests:
                    self.channel.cancel_pending(session.session_id)
        elif method == "$/cancel_request":
            # A held `_acme/wait` and a v1 prompt are pending long enough to be cancelled; every
            # other request is answered at once. The prompt is then answered with stop reason
            # `cancelled`, the wait with `-32800`.
            self.release_held(params.get("requestId"))
            for session in list(self.sessions.values()):
                turn = session.turn
                if (
                    turn is not None
                    and not self.v2
                    and turn.prompt_request_id == params.get("requestId")
                ):
                    turn.cancel.set()
        else:
            log(f"notification {method} ignored")

    def handle_request(self, request_id: Any, method: str, params: Json) -> Json:
        if method == "initialize":
            return self.initialize(params)
        if self.version is None:
            raise RpcFailure(INVALID_REQUEST, "initialize first")
        handlers: dict[str, Callable[[Json], Json]] = {
            "session/new": self.session_new,
            "session/list": self.session_list,
            "session/resume": self.session_resume,
            "session/load": self.session_load,
            "session/close": self.session_close,
            "session/delete": self.session_delete,
            "session/set_config_option": self.session_set_config_option,
            "session/set_mode": self.session_set_mode,
        }
        login, logout = ("auth/login", "auth/logout") if self.v2 else ("authenticate", "logout")
        if method == login:
            return self.log_in(params)
        if method == logout:
            self.logged_in = None
            log("logged out")
            return {}
        if self.args.require_login and self.logged_in is None and method.startswith("session/"):
            raise RpcFailure(AUTH_REQUIRED, "Authentication required")
        if method == "session/prompt":
            return self.session_prompt(request_id, params)
        if method in ("_acme/echo", "session/set_model"):
            return self.extension(method, params)
        if method == "_acme/wait":
            return self.hold(request_id, params)
        handler = handlers.get(method)
        if handler is None:
            raise RpcFailure(METHOD_NOT_FOUND, f"Method not found: {method}")
        return handler(params)

    # ------------------------------------------------------------------ initialize

    def initialize(self, params: Json) -> Json:
        offered = params.get("protocolVersion")
        supported = {1: (1,), 2: (2,), None: (1, 2)}[self.args.protocol]
        latest = max(supported)
        answer = offered if isinstance(offered, int) and offered in supported else latest
        if self.args.claim_v2_speak_v1:
            self.version = 1
            answer = 2
        else:
            self.version = answer
        if self.version == 2:
            caps = params.get("capabilities") or {}
        else:
            caps = params.get("clientCapabilities") or {}
            session_caps = caps.get("session") or {}
            config_caps = session_caps.get("configOptions") or {}
            self.boolean_options = config_caps.get("boolean") is not None
        elicitation = caps.get("elicitation") or {}
        self.elicitation_form = elicitation.get("form") is not None
        terminal = (caps.get("auth") or {}).get("terminal")
        self.terminal_auth = terminal is True or isinstance(terminal, dict)
        info = {"name": AGENT_NAME, "title": "Scripted test agent", "version": AGENT_VERSION}
        if self.version == 2:
            session_capabilities: Json = {
                "prompt": {"embeddedContext": {}},
                "delete": {},
                "additionalDirectories": {},
            }
            return {
                "protocolVersion": answer,
                "info": info,
                "capabilities": {"session": session_capabilities},
                "authMethods": self.auth_methods(),
            }
        session_capabilities = {"close": {}, "delete": {}, "additionalDirectories": {}}
        if not self.args.no_list:
            session_capabilities["list"] = {}
        if not self.args.no_resume:
            session_capabilities["resume"] = {}
        return {
            "protocolVersion": answer,
            "agentCapabilities": {
                "loadSession": not self.args.no_load,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": session_capabilities,
                **({"auth": {"logout": {}}} if self.args.require_login else {}),
            },
            "authMethods": self.auth_methods(),
            "agentInfo": info,
        }

    # ------------------------------------------------------------------ login

    def auth_methods(self) -> list[Json]:
        if not self.args.require_login:
            return []
        key = "methodId" if self.v2 else "id"
        methods: list[Json] = [
            {key: LOGIN_AGENT, "name": "Log in", "description": "Always succeeds"},
            {
                key: LOGIN_ENV,
                "name": f"Use {LOGIN_ENV_VAR}",
                "type": "env_var",
                "vars": [{"name": LOGIN_ENV_VAR}],
            },
        ]
        if self.v2:
            methods[0]["type"] = "agent"
        if self.terminal_auth:
            methods.append(
                {
                    key: LOGIN_TERMINAL,
                    "name": "Log in in a terminal",
                    "type": "terminal",
                    "args": ["--terminal-login"],
                }
            )
        return methods

    def log_in(self, params: Json) -> Json:
        method_id = params.get("methodId")
        if method_id == LOGIN_ENV and not os.environ.get(LOGIN_ENV_VAR):
            raise RpcFailure(AUTH_REQUIRED, f"{LOGIN_ENV_VAR} is not set")
        if method_id not in (LOGIN_AGENT, LOGIN_ENV):
            raise RpcFailure(
                INVALID_PARAMS,
                f"unknown auth method {method_id!r} (known: {LOGIN_AGENT}, {LOGIN_ENV})",
            )
        self.logged_in = method_id
        log(f"logged in with {method_id} (_meta {json.dumps(params.get('_meta'))})")
        return {}

    # ------------------------------------------------------------------ sessions

    def config_options(self, session: Session) -> list[Json]:
        key = "configId" if self.v2 else "id"
        options: list[Json] = [
            {
                key: "mode",
                "name": "Mode",
                "description": "How the agent works",
                "category": "mode",
                "type": "select",
                "currentValue": session.mode,
                "options": [
                    {"value": mode_id, "name": name, "description": description}
                    for mode_id, name, description in MODES
                ],
            }
        ]
        if self.v2 or self.boolean_options:
            options.append(
                {
                    key: "verbose",
                    "name": "Verbose",
                    "description": "Explain every step",
                    "type": "boolean",
                    "currentValue": session.verbose,
                }
            )
        return options

    def modes(self, session: Session) -> Json:
        return {
            "currentModeId": session.mode,
            "availableModes": [
                {"id": mode_id, "name": name, "description": description}
                for mode_id, name, description in MODES
            ],
        }

    def session_state(self, session: Session) -> Json:
        state: Json = {"configOptions": self.config_options(session)}
        if not self.v2:
            state["modes"] = self.modes(session)
        return state

    def state_path(self, session_id: str) -> str | None:
        state_dir: str | None = self.args.state_dir
        if state_dir is None or not session_id.replace("-", "").isalnum():
            return None
        return os.path.join(state_dir, f"{session_id}.json")

    def find(self, params: Json) -> Session:
        session_id = str(params.get("sessionId"))
        session = self.sessions.get(session_id)
        path = self.state_path(session_id)
        if session is None and path is not None and os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            session = Session(
                session_id=session_id,
                cwd=str(data["cwd"]),
                title=data.get("title"),
                mode=str(data.get("mode", "ask")),
                counter=int(data.get("counter", 0)),
                path=path,
            )
            self.sessions[session_id] = session
        if session is None:
            raise RpcFailure(RESOURCE_NOT_FOUND, f"unknown session {params.get('sessionId')!r}")
        return session

    def session_new(self, params: Json) -> Json:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcFailure(INVALID_PARAMS, "cwd must be an absolute path")
        session = Session(session_id=f"sess-{uuid.uuid4().hex[:16]}", cwd=cwd)
        session.path = self.state_path(session.session_id)
        session.save()
        self.sessions[session.session_id] = session
        return {"sessionId": session.session_id, **self.session_state(session)}

    def session_list(self, params: Json) -> Json:
        if self.args.no_list:
            raise RpcFailure(METHOD_NOT_FOUND, "Method not found: session/list")
        cwd = params.get("cwd")
        sessions = [s for s in self.sessions.values() if cwd is None or s.cwd == cwd]
        cursor = params.get("cursor")
        try:
            start = int(cursor) if cursor is not None else 0
        except ValueError:
            raise RpcFailure(INVALID_PARAMS, "invalid cursor") from None
        page = sessions[start : start + LIST_PAGE_SIZE]
        result: Json = {
            "sessions": [
                {
                    "sessionId": s.session_id,
                    "cwd": s.cwd,
                    "updatedAt": s.updated_at,
                    **({"title": s.title} if s.title is not None else {}),
                }
                for s in page
            ]
        }
        if start + LIST_PAGE_SIZE < len(sessions):
            result["nextCursor"] = str(start + LIST_PAGE_SIZE)
        return result

    def replay(self, session: Session) -> None:
        for update in list(session.history):
            self.channel.notify(
                "session/update", {"sessionId": session.session_id, "update": update}
            )

    def session_resume(self, params: Json) -> Json:
        if self.args.no_resume:
            raise RpcFailure(METHOD_NOT_FOUND, "Method not found: session/resume")
        session = self.find(params)
        replay_from = params.get("replayFrom") if self.v2 else None
        if replay_from is not None:
            if not isinstance(replay_from, dict) or replay_from.get("type") != "start":
                raise RpcFailure(INVALID_PARAMS, f"unsupported replayFrom {replay_from!r}")
            self.replay(session)
        return self.session_state(session)

    def session_load(self, params: Json) -> Json:
        if self.v2 or self.args.no_load:
            raise RpcFailure(METHOD_NOT_FOUND, "Method not found: session/load")
        session = self.find(params)
        self.replay(session)
        return self.session_state(session)

    def session_close(self, params: Json) -> Json:
        session = self.find(params)
        if session.turn is not None:
            session.turn.cancel.set()
        return {}

    def session_delete(self, params: Json) -> Json:
        session = self.sessions.pop(str(params.get("sessionId")), None)
        if session is not None and session.turn is not None:
            session.turn.cancel.set()
        return {}

    def session_set_config_option(self, params: Json) -> Json:
        session = self.find(params)
        config_id = params.get("configId")
        value = params.get("value")
        if config_id == "mode":
            if value not in {mode_id for mode_id, _, _ in MODES}:
                raise RpcFailure(INVALID_PARAMS, f"invalid mode {value!r}")
            session.mode = str(value)
        elif config_id == "verbose" and (self.v2 or self.boolean_options):
            if not isinstance(value, bool):
                raise RpcFailure(INVALID_PARAMS, "verbose takes a boolean")
            session.verbose = value
        else:
            raise RpcFailure(INVALID_PARAMS, f"unknown config option {config_id!r}")
        return {"configOptions": self.config_options(session)}

    def session_set_mode(self, params: Json) -> Json:
        if self.v2:
            raise RpcFailure(METHOD_NOT_FOUND, "Method not found: session/set_mode")
        session = self.find(params)
        mode = params.get("modeId")
        if mode not in {mode_id for mode_id, _, _ in MODES}:
            raise RpcFailure(INVALID_PARAMS, f"invalid mode {mode!r}")
        session.mode = str(mode)
        return {}

    def extension(self, method: str, params: Json) -> Json:
        """ACP extension surface: `_acme/echo` answers its params (and whether its
        `sessionId` names one of this agent's sessions); `session/set_model` (a session method
        a hub may not know) records the model."""
        session_id = params.get("sessionId")
        known = isinstance(session_id, str) and session_id in self.sessions
        if method == "session/set_model":
            session = self.find(params)
            session.model = str(params.get("modelId"))
            return {"_meta": {"scripted": {"model": session.model}}}
        echo = {k: v for k, v in params.items() if k != "sessionId"}
        return {"echo": echo, "sessionKnown": known, "protocolVersion": self.version}

    def hold(self, request_id: Any, params: Json) -> Json:
        """`_acme/wait`: held unanswered until `$/cancel_request` names it; the session is
        told both (agent messages `held _acme/wait`, `withdrawn _acme/wait`)."""
        session = self.find(params)
        with self.lock:
            self.held[_held_key(request_id)] = session
        self.say_outside_turn(session, "held _acme/wait\n")
        return DEFERRED

    def release_held(self, request_id: Any) -> None:
        with self.lock:
            session = self.held.pop(_held_key(request_id), None)
        if session is None:
            return
        self.channel.send(error_message(request_id, REQUEST_CANCELLED, "Request cancelled"))
        self.say_outside_turn(session, "withdrawn _acme/wait\n")

    def say_outside_turn(self, session: Session, text: str) -> None:
        update: Json = {"sessionUpdate": "agent_message_chunk"}
        update["content"] = {"type": "text", "text": text}
        if self.v2:
            update["messageId"] = session.next_id("msg")
        self.channel.notify("session/update", {"sessionId": session.session_id, "update": update})

    # ------------------------------------------------------------------ prompt turns

    def session_prompt(self, request_id: Any, params: Json) -> Json:
        session = self.find(params)
        prompt = params.get("prompt")
        if not isinstance(prompt, list):
            raise RpcFailure(INVALID_PARAMS, "prompt must be an array of content blocks")
        with self.lock:
            if session.turn is not None:
                raise RpcFailure(INVALID_REQUEST, "a prompt turn is already running")
            turn = Turn(prompt_request_id=request_id)
            session.turn = turn
        runner = TurnRunner(self, session, turn, prompt)
        if self.v2:
            # v2: acknowledge on acceptance, before the turn's first update. Some real peers
            # (and the TypeScript SDK 2.4.0 client) also put the user message id here.
            ack: Json = {}
            if self.args.ack_message_id:
                ack["messageId"] = runner.user_message_id
            self.channel.send({"jsonrpc": "2.0", "id": request_id, "result": ack})
        threading.Thread(target=runner.run, daemon=True).start()
        return DEFERRED


def _held_key(request_id: Any) -> str:
    """A request id as a key (ids are strings or numbers; JSON keeps them apart)."""
    return json.dumps(request_id)


def error_message(request_id: Any, code: int, message: str) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


# --------------------------------------------------------------------------- the command language

TERMINAL_OUTPUT = (
    "\x1b[1m$ pytest -q\x1b[0m\r\n"
    "\x1b[32m✓\x1b[0m test_alpha \x1b[2m(0.01s)\x1b[0m\r\n"
    "\x1b[32m✓\x1b[0m test_beta · ünïcödé \x1b[2m(0.02s)\x1b[0m\r\n"
    "\x1b[31m✗\x1b[0m test_gamma \x1b[33mskipped\x1b[0m\r\n"
    "\x1b[1;32m2 passed\x1b[0m, \x1b[33m1 skipped\x1b[0m in 0.03s 🎉\r\n"
).encode()


def terminal_chunks() -> list[bytes]:
    """TERMINAL_OUTPUT cut so that chunks split UTF-8 characters and escape sequences."""
    data = TERMINAL_OUTPUT
    cuts = {
        data.index(b"\x1b[32m") + 2,  # inside an escape sequence
        data.index("✓".encode()) + 1,  # inside a 3-byte UTF-8 character
        data.index("ü".encode()) + 1,  # inside a 2-byte UTF-8 character
        data.index(b"\x1b[1;32m") + 4,
        data.index("🎉".encode()) + 2,  # inside a 4-byte UTF-8 character
    }
    chunks: list[bytes] = []
    start = 0
    for cut in sorted(cuts):
        chunks.append(data[start:cut])
        start = cut
    chunks.append(data[start:])
    return chunks


def strip_ansi(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\x1b" and i + 1 < len(text) and text[i + 1] == "[":
            i += 2
            while i < len(text) and not ("@" <= text[i] <= "~"):
                i += 1
            i += 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out).replace("\r\n", "\n")


class TurnRunner:
    """Runs one prompt turn: the script, then the end of the turn."""

    def __init__(self, agent: Agent, session: Session, turn: Turn, prompt: list[Any]) -> None:
        self.agent = agent
        self.channel = agent.channel
        self.session = session
        self.turn = turn
        self.prompt = prompt
        self.v2 = agent.v2
        self.user_message_id = session.next_id("user")
        self.deaf = False  # `ignore-cancel`: this turn never notices a cancel
        self.commands: dict[str, Callable[[str], None]] = {
            "say": self.cmd_say,
            "think": self.cmd_think,
            "stream": self.cmd_stream,
            "whole": self.cmd_whole,
            "tool": self.cmd_tool,
            "plan": self.cmd_plan,
            "config": self.cmd_config,
            "usage": self.cmd_usage,
            "title": self.cmd_title,
            "permission": self.cmd_permission,
            "permission-edit": self.cmd_permission_edit,
            "permission-exec": self.cmd_permission_exec,
            "elicit": self.cmd_elicit,
            "elicit-url": self.cmd_elicit_url,
            "sleep": self.cmd_sleep,
            "hang": self.cmd_hang,
            "ignore-cancel": self.cmd_ignore_cancel,
            "slow": self.cmd_slow,
            "crash": self.cmd_crash,
            "crash-signal": self.cmd_crash_signal,
            "invalid-json": self.cmd_invalid_json,
            "huge-line": self.cmd_huge_line,
            "wrong-shape": self.cmd_wrong_shape,
            "unknown-update": self.cmd_unknown_update,
            "ext-notify": self.cmd_ext_notify,
            "ext-ask": self.cmd_ext_ask,
            "update": self.cmd_update,
            "raw": self.cmd_raw,
            "replay-lines": self.cmd_replay_lines,
            "stderr": self.cmd_stderr,
            "stop": self.cmd_stop,
        }

    # ------------------------------------------------------------------ plumbing

    def update(self, update: Json, record: bool = True) -> None:
        self.channel.notify(
            "session/update", {"sessionId": self.session.session_id, "update": update}
        )
        if record:
            self.session.history.append(update)

    def state(self, state: str, stop_reason: str | None = None) -> None:
        update: Json = {"sessionUpdate": "state_update", "state": state}
        if stop_reason is not None:
            update["stopReason"] = stop_reason
        self.update(update, record=False)

    def check_cancel(self) -> None:
        if self.turn.cancel.is_set() and not self.deaf:
            raise Cancelled

    def wait(self, ms: float) -> None:
        if self.deaf:
            time.sleep(ms / 1000)
        elif self.turn.cancel.wait(ms / 1000):
            raise Cancelled

    def chunk(self, kind: str, message_id: str, text: str) -> None:
        update: Json = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if self.v2:
            update["messageId"] = message_id
        self.update(update)

    def say(self, kind: str, text: str) -> None:
        message_id = self.session.next_id("msg")
        words = text.split(" ")
        for i in range(0, len(words), 3):
            piece = " ".join(words[i : i + 3])
            if i + 3 < len(words):
                piece += " "
            self.chunk(kind, message_id, piece)

    def tool_start(self, tool: Json) -> None:
        kind = "tool_call_update" if self.v2 else "tool_call"
        self.update({"sessionUpdate": kind, **tool})

    def tool_update(self, tool_call_id: str, **fields: Any) -> None:
        self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, **fields})

    def path(self, raw: str) -> str:
        return raw if os.path.isabs(raw) else os.path.join(self.session.cwd, raw)

    # ------------------------------------------------------------------ the turn

    def run(self) -> None:
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
                self.state("running")
            else:
                # v1 does not echo the prompt live, but a load replays it.
                for block in self.prompt:
                    self.session.history.append(
                        {"sessionUpdate": "user_message_chunk", "content": block}
                    )
            self.run_script()
        except Cancelled:
            stop_reason = "cancelled"
        except Stop as stop:
            stop_reason = stop.reason
        except Exception as exc:  # a bug in a command: report it, end the turn
            traceback.print_exc()
            self.finish(None, error=str(exc))
            return
        if self.turn.cancel.is_set() and not self.deaf:
            stop_reason = "cancelled"
        self.finish(stop_reason)

    def finish(self, stop_reason: str | None, error: str | None = None) -> None:
        self.session.updated_at = now_rfc3339()
        with self.agent.lock:
            self.session.turn = None
        if self.v2:
            self.state("idle", stop_reason or "end_turn")
        elif error is not None:
            self.channel.send(error_message(self.turn.prompt_request_id, INTERNAL_ERROR, error))
        else:
            self.channel.send(
                {
                    "jsonrpc": "2.0",
                    "id": self.turn.prompt_request_id,
                    "result": {"stopReason": stop_reason},
                }
            )

    def run_script(self) -> None:
        text = "\n".join(
            str(block.get("text", ""))
            for block in self.prompt
            if isinstance(block, dict) and block.get("type") == "text"
        )
        lines = [line.strip() for line in text.splitlines()]
        lines = [line for line in lines if line and not line.startswith("#")]
        if not lines:
            lines = ["say ok"]
        for line in lines:
            self.check_cancel()
            word, _, rest = line.partition(" ")
            command = self.commands.get(word)
            if command is None:
                self.cmd_say(line)  # plain text is said back
            else:
                command(rest.strip())

    # ------------------------------------------------------------------ commands

    def cmd_say(self, rest: str) -> None:
        self.say("agent_message_chunk", rest)

    def cmd_think(self, rest: str) -> None:
        self.say("agent_thought_chunk", rest)

    def cmd_stream(self, rest: str) -> None:
        parts = rest.split()
        count = int(parts[0])
        size = int(parts[1]) if len(parts) > 1 else 32
        message_id = self.session.next_id("msg")
        cancel = self.turn.cancel
        for i in range(count):
            if cancel.is_set():
                self.check_cancel()
            head = f"{i:06d}"
            text = head + "." * max(0, size - len(head) - 1) + "\n"
            self.chunk("agent_message_chunk", message_id, text)

    def cmd_whole(self, rest: str) -> None:
        message_id = self.session.next_id("msg")
        if self.v2:
            self.update(
                {
                    "sessionUpdate": "agent_message",
                    "messageId": message_id,
                    "content": [{"type": "text", "text": rest}],
                }
            )
        else:
            self.chunk("agent_message_chunk", message_id, rest)

    def cmd_tool(self, rest: str) -> None:
        what, _, arg = rest.partition(" ")
        tool_call_id = self.session.next_id("call")
        if what == "diff":
            self.tool_diff(tool_call_id, self.path(arg.strip() or "src/app.py"))
        elif what == "text":
            self.tool_start(
                {
                    "toolCallId": tool_call_id,
                    "title": "Read notes.txt",
                    "kind": "read",
                    "status": "in_progress",
                    "locations": [{"path": self.path("notes.txt"), "line": 1}],
                }
            )
            content = {"type": "content", "content": {"type": "text", "text": "notes: all good"}}
            self.tool_update(tool_call_id, status="completed", content=[content])
        elif what == "terminal":
            self.tool_terminal(tool_call_id)
        else:
            raise ValueError(f"unknown tool kind {what!r} (diff, text, terminal)")

    def tool_diff(self, tool_call_id: str, path: str) -> None:
        old_text = "def greet():\n    return 'hello'\n"
        new_text = "def greet(name: str) -> str:\n    return f'hello {name}'\n"
        if self.v2:
            patch = (
                f"diff --git a{path} b{path}\n--- a{path}\n+++ b{path}\n@@ -1,2 +1,2 @@\n"
                "-def greet():\n-    return 'hello'\n"
                "+def greet(name: str) -> str:\n+    return f'hello {name}'\n"
            )
            diff: Json = {
                "type": "diff",
                "changes": [{"operation": "modify", "path": path, "fileType": "text"}],
                "patch": {"format": "git_patch", "text": patch},
            }
        else:
            diff = {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}
        self.tool_start(
            {
                "toolCallId": tool_call_id,
                "title": f"Edit {os.path.basename(path)}",
                "kind": "edit",
                "status": "in_progress",
                "locations": [{"path": path, "line": 1}],
            }
        )
        self.tool_update(tool_call_id, status="completed", content=[diff])

    def tool_terminal(self, tool_call_id: str) -> None:
        if not self.v2:
            self.tool_start(
                {
                    "toolCallId": tool_call_id,
                    "title": "Run pytest -q",
                    "kind": "execute",
                    "status": "in_progress",
                }
            )
            text = strip_ansi(TERMINAL_OUTPUT.decode())
            content = {"type": "content", "content": {"type": "text", "text": text}}
            self.tool_update(tool_call_id, status="completed", content=[content])
            return
        terminal_id = self.session.next_id("term")
        self.tool_start(
            {
                "toolCallId": tool_call_id,
                "title": "Run pytest -q",
                "kind": "execute",
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            }
        )
        self.update(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                "command": "pytest -q",
                "cwd": self.session.cwd,
            }
        )
        for piece in terminal_chunks():
            self.update(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": terminal_id,
                    "data": base64.b64encode(piece).decode(),
                }
            )
        self.update(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": terminal_id,
                "exitStatus": {"exitCode": 0},
            }
        )
        self.tool_update(tool_call_id, status="completed")

    def cmd_plan(self, rest: str) -> None:
        steps = ["Read the code", "Make the change", "Run the tests"]
        plan_id = self.session.next_id("plan")
        for done in range(len(steps) + 1):
            entries = [
                {
                    "content": step,
                    "priority": "high" if i == 0 else "medium",
                    "status": "completed"
                    if i < done
                    else "in_progress"
                    if i == done
                    else "pending",
                }
                for i, step in enumerate(steps)
            ]
            if self.v2:
                plan: Json = {"type": "items", "planId": plan_id, "entries": entries}
                self.update({"sessionUpdate": "plan_update", "plan": plan})
            else:
                self.update({"sessionUpdate": "plan", "entries": entries})

    def cmd_config(self, rest: str) -> None:
        ids = [mode_id for mode_id, _, _ in MODES]
        self.session.mode = ids[(ids.index(self.session.mode) + 1) % len(ids)]
        self.update(
            {
                "sessionUpdate": "config_option_update",
                "configOptions": self.agent.config_options(self.session),
            }
        )
        if not self.v2:
            self.update(
                {"sessionUpdate": "current_mode_update", "currentModeId": self.session.mode}
            )

    def cmd_usage(self, rest: str) -> None:
        self.session.used_tokens += 1000
        used = self.session.used_tokens
        self.update(
            {
                "sessionUpdate": "usage_update",
                "used": used,
                "size": 200000,
                "cost": {"amount": round(used * 0.00001, 6), "currency": "USD"},
            }
        )

    def cmd_title(self, rest: str) -> None:
        self.session.title = rest
        self.update(
            {"sessionUpdate": "session_info_update", "title": rest, "updatedAt": now_rfc3339()}
        )

    def blocked(self, method: str, params: Json) -> Json:
        """Send a request to the client and wait; v2 reports `requires_action` meanwhile."""
        if self.v2:
            self.state("requires_action")
        response = self.channel.request(method, params)
        if self.v2:
            self.state("running")
        return response

    def cmd_permission(self, rest: str) -> None:
        self.ask_permission(rest or "Write to config.toml", "edit", {})

    def cmd_permission_edit(self, rest: str) -> None:
        path = rest or "src/app.py"
        self.ask_permission(f"Edit {path}", "edit", {"locations": [{"path": path}]})

    def cmd_permission_exec(self, rest: str) -> None:
        command = rest or "ls"
        self.ask_permission(f"Run {command}", "execute", {"rawInput": {"command": command}})

    def ask_permission(self, title: str, kind: str, extra: Json) -> None:
        tool_call_id = self.session.next_id("call")
        tool: Json = {
            "toolCallId": tool_call_id,
            "title": title,
            "kind": kind,
            "status": "pending",
            **extra,
        }
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        params: Json = {"sessionId": self.session.session_id, "options": options}
        if self.v2:
            params["title"] = f"Allow: {title}?"
            params["description"] = "The agent wants to change a file."
            params["subject"] = {"type": "tool_call", "toolCall": tool}
            self.session.history.append({"sessionUpdate": "tool_call_update", **tool})
        else:
            self.tool_start(tool)
            params["toolCall"] = {"toolCallId": tool_call_id, "title": title}
        response = self.blocked("session/request_permission", params)
        status = "failed"
        if "error" in response:
            report = f"permission: error {response['error'].get('code')}"
        else:
            outcome = (response.get("result") or {}).get("outcome") or {}
            ended = outcome.get("outcome")
            if ended == "selected":
                report = f"permission: selected {outcome.get('optionId')}"
                status = "completed" if outcome.get("optionId") == "allow" else "failed"
            else:
                report = f"permission: {ended}"
                status = "cancelled" if self.v2 else "failed"
        self.tool_update(tool_call_id, status=status)
        self.chunk("agent_message_chunk", self.session.next_id("msg"), report)

    def cmd_elicit(self, rest: str) -> None:
        message_id = self.session.next_id("msg")
        force = rest == "force" or rest.startswith("force ")
        schema_text = rest[len("force") :].strip() if force else rest.strip()
        if not self.agent.elicitation_form and not force:
            self.chunk("agent_message_chunk", message_id, "elicit: not supported by the client")
            return
        schema: Json = {
            "type": "object",
            "properties": {"name": {"type": "string", "title": "Name"}},
            "required": ["name"],
        }
        if schema_text:
            schema = json.loads(schema_text)
        params: Json = {
            "sessionId": self.session.session_id,
            "mode": "form",
            "message": "Which name should the greeting use?",
            "requestedSchema": schema,
        }
        response = self.blocked("elicitation/create", params)
        if "error" in response:
            report = f"elicit: error {response['error'].get('code')}"
        else:
            result = response.get("result") or {}
            report = f"elicit: {result.get('action')}"
            if "content" in result:
                report += " " + json.dumps(result["content"], sort_keys=True)
        self.chunk("agent_message_chunk", message_id, report)

    def cmd_elicit_url(self, rest: str) -> None:
        # URL elicitations one after the other, none ever completed (`complete` is optional).
        prefix, _, count = rest.strip().partition(" ")
        answers: list[str] = []
        for n in range(int(count or "1")):
            params: Json = {
                "sessionId": self.session.session_id,
                "mode": "url",
                "elicitationId": f"{prefix}-{n}",
                "url": f"https://example.com/authorize/{prefix}-{n}",
                "message": "Open this page to authorize",
            }
            response = self.blocked("elicitation/create", params)
            result = response.get("result") or {}
            answers.append(str(result.get("action", "error")))
        self.chunk("agent_message_chunk", self.session.next_id("msg"), f"elicit-url: {answers}")

    def cmd_sleep(self, rest: str) -> None:
        self.wait(float(rest))

    def cmd_hang(self, rest: str) -> None:
        # An agent that does not notice a cancel: from here on it finishes as if nothing happened.
        self.deaf = True
        time.sleep(float(rest) / 1000)

    def cmd_ignore_cancel(self, rest: str) -> None:
        self.deaf = True

    def cmd_slow(self, rest: str) -> None:
        parts = rest.split()
        count, interval = int(parts[0]), float(parts[1])
        message_id = self.session.next_id("msg")
        for i in range(count):
            if i:
                self.wait(interval)
            self.check_cancel()
            self.chunk("agent_message_chunk", message_id, f"slow {i}\n")

    def cmd_crash(self, rest: str) -> None:
        log("crashing on purpose (exit 3)")
        os._exit(3)

    def cmd_crash_signal(self, rest: str) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def cmd_invalid_json(self, rest: str) -> None:
        self.channel.write(b'{"jsonrpc": "2.0", "method": "session/update", "params": {oops\n')

    def cmd_huge_line(self, rest: str) -> None:
        total = int(float(rest or "1") * 1024 * 1024)
        marker = "@@huge-line@@"
        update: Json = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": marker},
        }
        if self.v2:
            update["messageId"] = self.session.next_id("msg")
        envelope = encode(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": self.session.session_id, "update": update},
            }
        )
        head, _, tail = envelope.partition(marker.encode())

        def pieces() -> list[bytes]:
            out = [head]
            step = 1024 * 1024
            out.extend(b"x" * min(step, total - at) for at in range(0, total, step))
            out.append(tail)
            return out

        self.channel.write_pieces(pieces)

    def cmd_wrong_shape(self, rest: str) -> None:
        if self.v2:
            # A known discriminator with a malformed payload: `content` missing, bad messageId.
            bad: Json = {"sessionUpdate": "agent_message_chunk", "messageId": 42}
        else:
            bad = {"sessionUpdate": "tool_call", "status": "done"}
        self.update(bad, record=False)

    def cmd_unknown_update(self, rest: str) -> None:
        self.update(
            {"sessionUpdate": "_scripted_custom", "payload": {"note": rest or "custom"}},
        )

    def cmd_ext_notify(self, rest: str) -> None:
        method, _, extra = rest.partition(" ")
        params: Json = json.loads(extra) if extra.strip() else {}
        params["sessionId"] = self.session.session_id
        self.channel.notify(method or "_acp/something", params)

    def cmd_ext_ask(self, rest: str) -> None:
        method, _, extra = rest.partition(" ")
        params: Json = json.loads(extra) if extra.strip() else {}
        params["sessionId"] = self.session.session_id
        response = self.channel.request(method or "_acme/ask", params)
        if "error" in response:
            report = f"ext-ask: error {response['error'].get('code')}"
        else:
            report = "ext-ask: " + json.dumps(response.get("result"), sort_keys=True)
        self.say("agent_message_chunk", report)

    def cmd_update(self, rest: str) -> None:
        self.update(json.loads(rest))

    def cmd_raw(self, rest: str) -> None:
        self.channel.write(rest.encode() + b"\n")

    def cmd_replay_lines(self, rest: str) -> None:
        # A lying agent: every line of the file, byte for byte (invalid UTF-8, overlong lines,
        # anything but a newline), with `@SESSION@` replaced by this session's id.
        with open(rest, "rb") as fh:
            data = fh.read()
        session_id = self.session.session_id.encode()
        for line in data.split(b"\n"):
            if line:
                self.channel.write(line.replace(b"@SESSION@", session_id) + b"\n")

    def cmd_stderr(self, rest: str) -> None:
        sys.stderr.write(rest + "\n")
        sys.stderr.flush()

    def cmd_stop(self, rest: str) -> None:
        raise Stop(rest or "end_turn")


# --------------------------------------------------------------------------- entry point


def spawn_grandchild() -> None:
    import subprocess

    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    sys.stderr.write(f"grandchild pid {child.pid}\n")
    sys.stderr.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--protocol",
        choices=["1", "2", "auto"],
        default="auto",
        help="versions spoken: 1, 2 or both (auto, the default)",
    )
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--ignore-eof", action="store_true", help="keep running after stdin EOF")
    parser.add_argument("--grandchild", action="store_true")
    parser.add_argument("--claim-v2-speak-v1", action="store_true")
    parser.add_argument("--garbage-before-init", action="store_true")
    parser.add_argument("--notify-before-init", action="store_true")
    parser.add_argument(
        "--ack-message-id",
        action="store_true",
        help="v2: answer session/prompt with {messageId} (the user message id), not {}",
    )
    parser.add_argument(
        "--cancel-requests",
        action="store_true",
        help="on session/cancel, send $/cancel_request for the session's pending requests",
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        help="keep session metadata here so that a restarted agent can resume its sessions",
    )
    # One flag per behaviour a test asks of the agent: alike in shape only.
    parser.add_argument("--no-load", action="store_true")
    parser.add_argument("--no-resume", action="store_true")
    parser.add_argument("--no-list", action="store_true")
    parser.add_argument(
        "--require-login",
        action="store_true",
        help="advertise auth methods and answer session/* -32000 until logged in",
    )
    parser.add_argument(
        "--terminal-login",
        action="store_true",
        help="the terminal login: write $HOME/" + TERMINAL_MARKER + ", print a line, exit 0",
    )
    args = parser.parse_args(argv)
    args.protocol = None if args.protocol == "auto" else int(args.protocol)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.terminal_login:
        with open(os.path.join(os.environ["HOME"], TERMINAL_MARKER), "w") as fh:
            fh.write(json.dumps({"cwd": os.getcwd(), "argv": sys.argv[1:]}))
        print("terminal login done", flush=True)
        return
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.grandchild:
        spawn_grandchild()
    agent = Agent(args)
    if args.garbage_before_init:
        agent.channel.write(b"Starting scripted agent... (this line is not JSON)\n")
    if args.notify_before_init:
        agent.channel.notify("_auth/status_update", {"status": "unauthenticated", "ready": True})
    agent.run()


if __name__ == "__main__":
    main()
