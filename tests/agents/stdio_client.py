"""A tiny ACP client for tests: drives one agent subprocess over stdio, line by line.

Deliberately independent of the hub's own code so that the agents' tests do not depend on the
code under test. A reader thread parses stdout into a queue; the test consumes it in order with
timeouts, so nothing waits on a bare sleep. Every received ``session/update`` can be checked by
a validator (the JSON schemas, see ``schemas.py``).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Json = dict[str, Any]

TIMEOUT = 10.0
SCRIPTED_AGENT = Path(__file__).resolve().parent / "scripted_agent.py"


class NotJson:
    """A stdout line that did not parse as JSON."""

    def __init__(self, line: bytes) -> None:
        self.line = line

    def __repr__(self) -> str:
        return f"NotJson({self.line[:80]!r})"


Incoming = Json | list[Any] | NotJson


class AgentProcess:
    """One agent subprocess in its own process group, with a line reader on stdout."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        validate: Callable[[Json], None] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.validate = validate
        self._queue: queue.Queue[Incoming | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._stderr_lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 0
        self.seen: list[Incoming] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @classmethod
    def scripted(cls, *args: str, **kwargs: Any) -> AgentProcess:
        """The scripted agent with these command-line arguments."""
        return cls([sys.executable, str(SCRIPTED_AGENT), *args], **kwargs)

    # ------------------------------------------------------------------ I/O threads

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                self._queue.put(NotJson(line))
                continue
            self._queue.put(message)
        self._queue.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            self._stderr_lines.put(line)

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def stderr_line(self, timeout: float = TIMEOUT) -> str:
        return self._stderr_lines.get(timeout=timeout).decode(errors="replace")

    # ------------------------------------------------------------------ sending

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, method: str, params: Json) -> int:
        """Send a request; returns its id (numbered from 0, like the agent's own)."""
        request_id = self._next_id
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def notify(self, method: str, params: Json) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request_id: Any, result: Json) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    # ------------------------------------------------------------------ receiving

    def next_raw(self, timeout: float = TIMEOUT) -> Incoming:
        """The next stdout line, parsed; AssertionError on EOF or timeout."""
        try:
            message = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the agent within {timeout}s") from None
        if message is None:
            self._queue.put(None)  # stay at EOF
            raise AssertionError(f"agent closed stdout; stderr:\n{self.stderr}")
        self.seen.append(message)
        if (
            self.validate is not None
            and isinstance(message, dict)
            and message.get("method") == "session/update"
        ):
            self.validate(message["params"])
        return message

    def next(self, timeout: float = TIMEOUT) -> Json:
        message = self.next_raw(timeout)
        assert isinstance(message, dict), f"expected a JSON object, got {message!r}"
        return message

    def until(self, predicate: Callable[[Json], bool], timeout: float = TIMEOUT) -> list[Json]:
        """Messages up to and including the first that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        out: list[Json] = []
        while True:
            message = self.next(max(0.01, deadline - time.monotonic()))
            out.append(message)
            if predicate(message):
                return out

    def until_response(self, request_id: int, timeout: float = TIMEOUT) -> tuple[Json, list[Json]]:
        """(the response to ``request_id``, the messages that came before it)."""
        messages = self.until(lambda m: is_response(m, request_id), timeout)
        return messages[-1], messages[:-1]

    def call(self, method: str, params: Json, timeout: float = TIMEOUT) -> Json:
        """Request and return its result; AssertionError on an error response."""
        response, _ = self.until_response(self.request(method, params), timeout)
        assert "result" in response, f"{method} failed: {response}"
        result = response["result"]
        assert isinstance(result, dict) or result is None
        return result or {}

    def at_eof(self, timeout: float = TIMEOUT) -> bool:
        """True once stdout is closed (all messages before EOF are consumed and kept)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                message = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if message is None:
                self._queue.put(None)
                return True
            self.seen.append(message)

    # ------------------------------------------------------------------ ACP steps

    def initialize(self, version: int = 1, **client_caps: Any) -> Json:
        if version >= 2:
            params: Json = {
                "protocolVersion": version,
                "info": {"name": "test-client", "version": "0"},
                "capabilities": client_caps,
            }
        else:
            params = {
                "protocolVersion": version,
                "clientCapabilities": client_caps,
                "clientInfo": {"name": "test-client", "version": "0"},
            }
        return self.call("initialize", params)

    def new_session(self, cwd: str | Path) -> str:
        result = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id = result["sessionId"]
        assert isinstance(session_id, str)
        return session_id

    def prompt(self, session_id: str, text: str) -> int:
        return self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    # ------------------------------------------------------------------ lifecycle

    def wait(self, timeout: float = TIMEOUT) -> int:
        return self.proc.wait(timeout)

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Close stdin, give the agent a moment to exit, then kill its process group."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            pass
        self.kill_group()
        self.proc.wait(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_response(message: Json, request_id: Any) -> bool:
    return "method" not in message and message.get("id") == request_id


def is_update(message: Json, kind: str | None = None) -> bool:
    if message.get("method") != "session/update":
        return False
    return kind is None or message["params"]["update"].get("sessionUpdate") == kind


def updates(messages: Sequence[Json], kind: str | None = None) -> list[Json]:
    """The ``update`` objects of the ``session/update`` notifications among ``messages``."""
    return [m["params"]["update"] for m in messages if is_update(m, kind)]


def is_idle(message: Json) -> bool:
    return is_update(message, "state_update") and message["params"]["update"]["state"] == "idle"


def text_of(chunks: Sequence[Json]) -> str:
    return "".join(u["content"]["text"] for u in chunks)
