"""Permission rules: permission requests answered by rule, visibly and accountably.

Theory of operation
-------------------
A rule is ``{match: {kind?, title?, command?, path?}, answer: "allow" | "reject"}``. Every
field given must match (``kind`` exactly, the others as globs: ``*`` within a path segment,
``**`` across segments, ``?`` one character); a rule with an empty ``match`` matches every
request. ``path`` is matched against each path the request touches (the tool call's
``locations``, ``rawInput.path`` / ``file_path`` / ``filePath``, a diff's ``changes``), relative to
the session's cwd, and every one must match. A request that touches a path outside the cwd
never matches an ``allow`` rule, whatever its fields: a rule can say "edits under src/ are fine",
never "anything is fine" for a file elsewhere. A rule that names ``path`` or ``command`` never
matches a request that has none.

``allow`` picks the request's ``allow_once`` option (``allow_always`` when there is none),
``reject`` its ``reject_once`` (``reject_always``); a request without such an option goes to
people as if no rule matched.

Rules come from three places, consulted in this order, first match wins: the session's own
(set by its owners over the wire), the agent's (``[agents.NAME] permission_rules``), the hub's
(``[hub] permission_rules``). Session rules live in the session's log as a ``_hub_rules``
snapshot update, so they are kept by every store, replayed to late joiners, followed by every
node and taken over with the session; adding or removing one on a node that does not own the
session is forwarded to the owner (``hub.sessions.mirror.FORWARDED_METHODS``), which answers
requests. Config rules are ``ruleId`` ``hub-N`` / ``agent-N``, ``createdBy`` ``config``.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Final

from hub.protocol.errors import invalid_params, resource_not_found
from hub.sessions.errors import SessionFailure

MATCH_FIELDS: Final = ("kind", "title", "command", "path")
ANSWERS: Final = ("allow", "reject")
MAX_RULES: Final = 100
"""Session rules one session may hold."""
MAX_GLOB: Final = 500
"""The longest glob a rule may carry."""
RULES_VARIANT: Final = "_hub_rules"

_OPTION_KINDS: Final = {
    "allow": ("allow_once", "allow_always"),
    "reject": ("reject_once", "reject_always"),
}


def check_rule(match: Any, answer: Any) -> dict[str, str]:
    """``match`` checked (a copy with only string fields); ``ValueError`` saying what is
    wrong."""
    if answer not in ANSWERS:
        raise ValueError("answer must be allow or reject")
    if not isinstance(match, Mapping):
        raise ValueError("match must be an object")
    unknown = sorted(set(match) - set(MATCH_FIELDS))
    if unknown:
        raise ValueError(f"match has unknown field(s): {', '.join(map(str, unknown))}")
    clean: dict[str, str] = {}
    for key, value in match.items():
        if not isinstance(value, str) or not value or len(value) > MAX_GLOB:
            raise ValueError(f"match.{key} must be a string of 1 to {MAX_GLOB} characters")
        clean[str(key)] = value
    return clean


def config_rules(raw: Sequence[Any], prefix: str) -> tuple[dict[str, Any], ...]:
    """Rules of a config file (``[hub]`` or ``[agents.NAME]`` ``permission_rules``) as rule
    records; ``ValueError`` naming the bad one."""
    rules = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, Mapping):
            raise ValueError(f"permission_rules[{index}] must be a table")
        unknown = sorted(set(entry) - {"match", "answer"})
        if unknown:
            raise ValueError(f"permission_rules[{index}]: unknown key(s): {', '.join(unknown)}")
        try:
            match = check_rule(entry.get("match", {}), entry.get("answer"))
        except ValueError as exc:
            raise ValueError(f"permission_rules[{index}]: {exc}") from None
        rules.append(
            {
                "ruleId": f"{prefix}-{index + 1}",
                "match": match,
                "answer": entry["answer"],
                "createdBy": "config",
                "createdAt": None,
            }
        )
    return tuple(rules)


def new_rule(match: dict[str, str], answer: str, created_by: str) -> dict[str, Any]:
    """A session rule record with a fresh id."""
    return {
        "ruleId": f"r-{secrets.token_hex(6)}",
        "match": match,
        "answer": answer,
        "createdBy": created_by,
        "createdAt": datetime.now(UTC).isoformat(timespec="seconds"),
    }


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            if pattern.startswith("/", i):  # `a/**/b` also matches `a/b`
                out[-1] = "(?:.*/)?"
                i += 1
            continue
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def glob_match(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern`` (see the module docstring)."""
    return _glob(pattern).fullmatch(text) is not None


def _tool(request: Mapping[str, Any]) -> Mapping[str, Any]:
    subject = request.get("subject")
    tool = subject.get("toolCall") if isinstance(subject, Mapping) else request.get("toolCall")
    return tool if isinstance(tool, Mapping) else {}


def _command(tool: Mapping[str, Any]) -> str | None:
    raw = tool.get("rawInput")
    command = raw.get("command") if isinstance(raw, Mapping) else None
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        return " ".join(command)
    return command if isinstance(command, str) else None


def _paths(tool: Mapping[str, Any]) -> list[str]:
    paths: list[str] = []
    for location in tool.get("locations") or []:
        if isinstance(location, Mapping) and isinstance(location.get("path"), str):
            paths.append(location["path"])
    raw = tool.get("rawInput")
    if isinstance(raw, Mapping):
        paths += [raw[k] for k in ("path", "file_path", "filePath") if isinstance(raw.get(k), str)]
    for item in tool.get("content") or []:
        if isinstance(item, Mapping) and item.get("type") == "diff":
            if isinstance(item.get("path"), str):
                paths.append(item["path"])
            for change in item.get("changes") or []:
                if isinstance(change, Mapping):
                    paths += [
                        change[k] for k in ("path", "oldPath") if isinstance(change.get(k), str)
                    ]
    return paths


def relative(path: str, cwd: str) -> str | None:
    """``path`` relative to ``cwd`` (``None``: outside it). Resolved lexically (``..`` and
    ``.`` folded), since the file may not exist yet."""
    if not cwd:
        return None
    root = os.path.normpath(cwd)
    full = os.path.normpath(os.path.join(root, path))
    if full == root:
        return "."
    if not full.startswith(root.rstrip("/") + "/"):
        return None
    return full[len(root.rstrip("/")) + 1 :]


def matches(rule: Mapping[str, Any], request: Mapping[str, Any], cwd: str) -> bool:
    """Whether ``rule`` answers ``request`` in a session working in ``cwd``."""
    match = rule.get("match")
    match = match if isinstance(match, Mapping) else {}
    tool = _tool(request)
    paths = [relative(p, cwd) for p in _paths(tool)]
    if rule.get("answer") == "allow" and any(p is None for p in paths):
        return False
    kind = match.get("kind")
    if kind is not None and tool.get("kind") != kind:
        return False
    title = match.get("title")
    if title is not None:
        text = request.get("title") or tool.get("title")
        if not isinstance(text, str) or not glob_match(title, text):
            return False
    command = match.get("command")
    if command is not None:
        text = _command(tool)
        if text is None or not glob_match(command, text):
            return False
    path = match.get("path")
    return path is None or (
        bool(paths) and all(p is not None and glob_match(path, p) for p in paths)
    )


def option_for(answer: str, options: Iterable[Any]) -> str | None:
    """The option ``answer`` picks among ``options`` (see the module docstring)."""
    by_kind: dict[str, str] = {}
    for option in options:
        if isinstance(option, Mapping) and isinstance(option.get("optionId"), str):
            by_kind.setdefault(str(option.get("kind")), option["optionId"])
    for kind in _OPTION_KINDS.get(answer, ()):
        if kind in by_kind:
            return by_kind[kind]
    return None


def first_match(
    rules: Iterable[Mapping[str, Any]], request: Mapping[str, Any], cwd: str
) -> tuple[Mapping[str, Any], str] | None:
    """The first rule that answers ``request`` and the option it picks, or ``None``."""
    options = request.get("options")
    for rule in rules:
        if matches(rule, request, cwd):
            option = option_for(
                str(rule.get("answer")), options if isinstance(options, list) else []
            )
            if option is not None:
                return rule, option
    return None


# -- a session's rules ---------------------------------------------------------------------


def session_rules(state: Any) -> list[dict[str, Any]]:
    """The session rules ``state`` (a ``SessionState``) holds: its latest ``_hub_rules``."""
    record = state.extra(RULES_VARIANT)
    rules = record.get("rules") if isinstance(record, Mapping) else None
    return [dict(r) for r in rules if isinstance(r, Mapping)] if isinstance(rules, list) else []


def all_rules(session: Any) -> list[Mapping[str, Any]]:
    """The rules that apply in ``session``, in the order they are consulted: the session's,
    its agent's (an agent process's ``spec``), the hub's."""
    spec = getattr(session.agent, "spec", None)
    agent = config_rules(getattr(spec, "permission_rules", ()), "agent")
    hub = config_rules(session.settings.permission_rules, "hub")
    return [*session_rules(session.state), *agent, *hub]


def add(session: Any, client: Any, match: Any, answer: Any) -> dict[str, Any]:
    """``_hub/rules/add`` on the owner: check, record (``_hub_rules``), answer ``{ruleId}``."""
    session.require(client, "owner", "_hub/rules/add")
    try:
        clean = check_rule(match, answer)
    except ValueError as exc:
        raise SessionFailure(invalid_params(str(exc))) from None
    rules = session_rules(session.state)
    if len(rules) >= MAX_RULES:
        raise SessionFailure(invalid_params(f"a session holds at most {MAX_RULES} rules"))
    rule = new_rule(clean, str(answer), client.principal or client.name)
    session.emit({"sessionUpdate": RULES_VARIANT, "rules": [*rules, rule]})
    session.audit.record("rule_added", sessionId=session.id, principal=client.principal, rule=rule)
    return {"ruleId": rule["ruleId"]}


def remove(session: Any, client: Any, rule_id: Any) -> dict[str, Any]:
    """``_hub/rules/remove`` on the owner."""
    session.require(client, "owner", "_hub/rules/remove")
    rules = session_rules(session.state)
    kept = [r for r in rules if r.get("ruleId") != rule_id]
    if len(kept) == len(rules):
        raise SessionFailure(resource_not_found(f"no rule {rule_id!r} in this session"))
    session.emit({"sessionUpdate": RULES_VARIANT, "rules": kept})
    session.audit.record(
        "rule_removed", sessionId=session.id, principal=client.principal, ruleId=rule_id
    )
    return {"ruleId": rule_id, "removed": True}
