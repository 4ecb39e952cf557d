"""The hub's log lines: who they are about, credentials kept out, text or JSON.

Theory of operation
-------------------
A client's connection runs in tasks started under ``client_context(connection_id,
principal)``: every log record made in those tasks (and in the tasks they start) carries the
connection id and the principal, without each call site passing them. A line about a client
made elsewhere (the fan-out runs in the agent's task) names it with
``extra={"connection": id}``, which the context does not override.

``ClientContext`` (a filter) puts the two fields on every record that reaches a handler;
``Redact`` (a filter) removes credentials from the message, its arguments and its traceback
text: ``token=`` values in query strings and ``Bearer`` values, wherever they appear, so that a
URL or a header quoted by any library (uvicorn included) never leaks one into the log.
``handler`` puts both on a stream handler, in the readable text format or as one JSON object
per line; ``configure`` makes it the only handler of the root logger.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import orjson

__all__ = [
    "FORMATS",
    "ClientContext",
    "JsonFormatter",
    "Redact",
    "TextFormatter",
    "UvicornLines",
    "client_context",
    "configure",
    "handler",
    "redact",
]

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")

_client: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "acp_hub_client", default=None
)

# `token=VALUE` in a query string (or anywhere a URL is quoted), up to the next delimiter;
# `Bearer VALUE` (an Authorization header or its echo); a JSON member whose name ends in
# `token` (`"token": "..."`, `"accessToken": "..."`); the password of a URL
# (`redis://:PASSWORD@host`, `scheme://user:PASSWORD@host`). Case-insensitive.
_TOKEN = re.compile(r"(?i)(token=)[^&\s\"'#;,)\]]+")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;)\]]+")
_URL_PASSWORD = re.compile(r"(?i)([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(?=@)")
_JSON_TOKEN = re.compile(r"(?i)(\"[\w-]*token\"\s*:\s*\")(?:[^\"\\]|\\.)*")
# A token offered as a WebSocket subprotocol entry (hub.access.carriers), and anything shaped
# like a JWT (header.payload.signature, base64url, the header starting `{"` = `eyJ`), wherever
# it is quoted: a credential never needs to be in a log line to be useful.
_SUBPROTOCOL_TOKEN = re.compile(r"(acp-hub\.token\.)[A-Za-z0-9._~+/=-]+")
_JWT = re.compile(r"()eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """``text`` with every ``token=`` value, ``Bearer`` credential, URL password, JSON
    ``"...token"`` string value, ``acp-hub.token.*`` subprotocol entry and JWT replaced by
    ``[redacted]``."""
    for pattern in (_TOKEN, _BEARER, _URL_PASSWORD, _JSON_TOKEN, _SUBPROTOCOL_TOKEN, _JWT):
        text = pattern.sub(r"\1" + REDACTED, text)
    return text


class client_context:
    """Mark the log records made inside (and in tasks started inside) as about this client.

    A class rather than a generator-based context manager: one lives as long as its
    connection, and a suspended generator (with its frame) costs several times the memory.
    """

    __slots__ = ("_token", "_value")

    def __init__(self, connection_id: str, principal: str) -> None:
        self._value = (connection_id, principal)
        self._token: contextvars.Token[tuple[str, str] | None] | None = None

    def __enter__(self) -> None:
        self._token = _client.set(self._value)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _client.reset(self._token)
            self._token = None


class ClientContext(logging.Filter):
    """Sets ``record.connection`` and ``record.principal`` (``None`` when the line is about
    no client); an explicit ``extra={"connection": ...}`` wins over the context."""

    def filter(self, record: logging.LogRecord) -> bool:
        client = _client.get()
        connection = getattr(record, "connection", None)
        if connection is None and client is not None:
            connection = client[0]
        record.connection = connection
        if getattr(record, "principal", None) is None:
            # The context's principal only for a line about the context's own client.
            same = client is not None and client[0] == connection
            record.principal = client[1] if same and client is not None else None
        return True


class Redact(logging.Filter):
    """Replaces credentials in a record's message, traceback and stack text (see ``redact``).

    The message is rendered here (``msg % args``) and the arguments dropped, so no handler
    or formatter after this one sees a credential in them."""

    _traceback = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._traceback.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class TextFormatter(logging.Formatter):
    """``2026-01-01 12:00:00,000 I hub.server = c-1f…: connected [c-1f… local]``: the
    readable format; the client's connection id and principal close a line about a client."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname).1s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        connection = getattr(record, "connection", None)
        if connection is None:
            return text
        principal = getattr(record, "principal", None)
        tag = f" [{connection} {principal}]" if principal else f" [{connection}]"
        first, newline, rest = text.partition("\n")
        return first + tag + newline + rest


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``,
    ``message``, ``connection`` and ``principal`` when the line is about a client, ``exc``
    with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        connection = getattr(record, "connection", None)
        if connection is not None:
            entry["connection"] = connection
            principal = getattr(record, "principal", None)
            if principal is not None:
                entry["principal"] = principal
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return orjson.dumps(entry, default=str).decode()


def handler(fmt: LogFormat = "text", stream: TextIO | None = None) -> logging.Handler:
    """A handler writing to ``stream`` (standard error by default) in ``fmt``, with the
    client context added and credentials redacted."""
    out = logging.StreamHandler(stream if stream is not None else sys.stderr)
    out.addFilter(ClientContext())
    out.addFilter(Redact())
    out.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return out


def configure(level: str, fmt: LogFormat = "text", stream: TextIO | None = None) -> None:
    """Send every log record (the hub's, uvicorn's, the libraries') at ``level`` or above to
    one ``handler(fmt, stream)``, replacing the root logger's handlers. Raises ``ValueError``
    for an unknown level name."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler(fmt, stream))
    server_log = logging.getLogger("uvicorn.error")
    for old_filter in list(server_log.filters):
        if isinstance(old_filter, UvicornLines):
            server_log.removeFilter(old_filter)
    server_log.addFilter(UvicornLines())


class UvicornLines(logging.Filter):
    """uvicorn's own lines under the name ``uvicorn`` (it logs everything of its own, errors or
    not, as ``uvicorn.error``), and its start and stop announcements (``Started server
    process``, ``Application startup complete``, ...) at debug: the hub's banner says that
    much on standard output. Its warnings and errors keep their level."""

    CHATTER = (
        "Started server process",
        "Finished server process",
        "Waiting for application startup",
        "Application startup complete",
        "Waiting for application shutdown",
        "Application shutdown complete",
        "Shutting down",
        "Uvicorn running on",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        record.name = "uvicorn"
        if record.levelno == logging.INFO and str(record.msg).startswith(self.CHATTER):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True
