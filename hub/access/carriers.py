"""Where a request carries its token (pure functions over header values).

- ``Authorization: Bearer TOKEN``: programs (the SDK clients can set headers);
- a ``Sec-WebSocket-Protocol`` entry ``acp-hub.token.TOKEN``: browsers, whose WebSocket API
  cannot set headers. The entry is never echoed: the hub selects one of the other offered
  subprotocols (or none), and proxies rarely log this header;
- ``?token=TOKEN`` in the query string: links and simple clients. It is the one most likely
  to end up in a log, which is why ``hub.access.redact`` scrubs every log line.

A request may carry several (a client library that always sends a placeholder header, plus
a link's ``?token=``): they are tried in that order and the first that verifies is the
credential; when none does, the first one's refusal is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

TOKEN_SUBPROTOCOL_PREFIX = "acp-hub.token."


@dataclass(frozen=True, slots=True)
class Carried:
    """The tokens a request carries, each with where it came from (``header``,
    ``subprotocol``, ``query``), in the order they are tried, and the subprotocol to select
    in the upgrade response (the first offered one that is not a token entry)."""

    tokens: tuple[tuple[str, str], ...]
    subprotocol: str | None


def offered_subprotocols(header: str | None) -> list[str]:
    """The entries of a ``Sec-WebSocket-Protocol`` header, in order."""
    if not header:
        return []
    return [p.strip() for p in header.split(",") if p.strip()]


def carried_tokens(
    authorization: str | None, subprotocols: list[str], query_string: str
) -> Carried:
    """The credentials of a request, following the order of the module docstring."""
    others = [p for p in subprotocols if not p.startswith(TOKEN_SUBPROTOCOL_PREFIX)]
    found: list[tuple[str, str]] = []
    if authorization:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            found.append((value.strip(), "header"))
    for entry in subprotocols:
        if entry.startswith(TOKEN_SUBPROTOCOL_PREFIX) and len(entry) > len(
            TOKEN_SUBPROTOCOL_PREFIX
        ):
            found.append((entry[len(TOKEN_SUBPROTOCOL_PREFIX) :], "subprotocol"))
            break
    if query_string:
        try:
            values = parse_qs(query_string, max_num_fields=32).get("token")
        except ValueError:  # too many fields: not a request of ours
            values = None
        if values and values[0]:
            found.append((values[0], "query"))
    return Carried(tuple(found), others[0] if others else None)
