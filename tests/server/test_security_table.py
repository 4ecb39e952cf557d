"""The table of every method and route in ``docs/security.md``, checked row by row on a real hub.

The table is read from the document itself. It must name every method the hub dispatches and
every route it serves, and agree with the role and scope tables the connection checks
(``hub.sessions.arbiter``). Then each row is tried on a running hub (real uvicorn, the scripted
agent, real WebSocket and HTTP clients) with the credentials its columns speak of:

- the credential the row permits (a share link of the row's role for methods of one session,
  a token scoped to the session for link management, an owner of the whole hub for the rest)
  is not refused: answered, or refused on the merits of its params, never ``-32040`` or an
  unknown session;
- a share link where the row says links may not call it gets ``-32040``;
- a role below the row's, with the same scope, gets ``-32040``;
- a credential for another session gets ``-32002`` (as if the session did not exist), and one
  for a single session ``-32040`` where the row needs the whole hub; a whole-hub owner whose
  ``agents`` claim does not name the agent ``-32040`` where the row needs it;
- a route is served (or refused 401) with no credential, a link, a hub token, the metrics token
  as its scope says.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from hub.server.app import create_app
from hub.server.methods import ASYNC_METHODS, SYNC_METHODS
from hub.sessions import arbiter
from hub.settings import ROLES, Role, Settings
from tests.credentials import token
from tests.server.harness import AcpClient, HubHandle, acp_client, running_hub, scripted_agent

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SECTION = "## Every method and route"
NOTIFICATIONS = {"session/cancel", "$/cancel_request"}
"""Methods a client sends as notifications (the rest are requests)."""
METRICS_TOKEN = "metrics-token-for-the-security-table-test"
FORBIDDEN = -32040
NOT_FOUND = -32002
_subs = itertools.count()


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    role: Role
    scope: str
    link: bool

    @property
    def route(self) -> bool:
        return self.name.startswith("GET /")


def table() -> list[Row]:
    """The rows of the table in ``docs/security.md``."""
    text = DOC.read_text()
    assert SECTION in text, f"{DOC} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        role = cells[1]
        assert role in ROLES, line
        assert cells[3] in ("yes", "no"), line
        rows.append(Row(cells[0].strip("`"), role, cells[2], cells[3] == "yes"))
    return rows


def served_routes(state: Path) -> set[str]:
    """``GET /path`` for every route the hub serves, with ``{id}`` / ``{path}`` parameters."""
    settings = Settings(auth="none", audit_log="off", state_dir=str(state))
    app, _ = create_app(settings, {"scripted": scripted_agent()})
    paths = set()
    for route in app.routes:
        path = getattr(route, "path", "")
        path = path.replace("{session_id}", "{id}").replace("{path:path}", "{path}")
        paths.add(f"GET {path}")
    return paths


def test_the_table_names_every_method_and_route_as_the_hub_checks_them(tmp_path: Path) -> None:
    rows = table()
    names = [row.name for row in rows]
    assert len(names) == len(set(names)), "a row appears twice"
    methods = {row.name for row in rows if not row.route}
    assert methods == {*SYNC_METHODS, *ASYNC_METHODS, *NOTIFICATIONS}
    assert {row.name for row in rows if row.route} == served_routes(tmp_path)
    for row in rows:
        if row.route:
            assert row.scope in ("public", "credential", "metrics token"), row
            continue
        assert row.role == arbiter.required_role(row.name), row
        assert row.scope in ("open", "session", "session, not a link", "hub", "hub + agents"), row
        assert (row.scope.startswith("hub")) == (row.name in arbiter.HUB_METHODS), row
        assert (row.scope == "session, not a link") == (row.name in arbiter.LINK_METHODS), row
        # A share link reaches what one session's guest may reach, no more.
        assert row.link == (row.scope in ("open", "session")), row


# -- trying a row on the hub -------------------------------------------------------------------

Outcome = str
"""``ok`` (answered, or refused for its params: access was granted), ``forbidden`` (-32040),
``hidden`` (-32002: the session or link is out of the credential's sight), ``refused NNN``
(a route or an upgrade refused with that status)."""


def outcome_of(error: dict[str, Any] | None) -> Outcome:
    if error is None:
        return "ok"
    if error["code"] == FORBIDDEN:
        return "forbidden"
    detail = str(error.get("data", ""))
    if error["code"] == NOT_FOUND and ("no session" in detail or "no share link" in detail):
        return "hidden"
    return "ok"


def params_of(method: str, sid: str, link_id: str) -> dict[str, Any]:
    """Params that the permitted caller's request succeeds with (or fails on its merits)."""
    by_session: dict[str, Any] = {"sessionId": sid}
    known: dict[str, dict[str, Any]] = {
        "session/resume": {**by_session, "cwd": "/"},
        "session/load": {**by_session, "cwd": "/"},
        "session/prompt": {**by_session, "prompt": [{"type": "text", "text": "hello"}]},
        "session/set_config_option": {**by_session, "configId": "none", "value": "x"},
        "session/set_mode": {**by_session, "modeId": "none"},
        "_hub/queue/withdraw": {**by_session, "queueId": "q-none"},
        "_hub/set_policy": {**by_session, "prompt": "queue"},
        "_hub/share/create": {**by_session, "role": "viewer", "expiresIn": 60},
        "_hub/share/revoke": {"linkId": link_id},
        "session/new": {"cwd": "/tmp", "mcpServers": []},
        "_hub/agent_login": {"agent": "scripted", "methodId": "scripted-login"},
        "_hub/agent_logout": {"agent": "scripted"},
        "authenticate": {"methodId": "scripted-login"},
        "auth/login": {"methodId": "scripted-login"},
        "$/cancel_request": {"requestId": 99999},
        "initialize": {},
        "session/list": {},
        "_hub/subscribe_sessions": {},
        "_hub/unsubscribe_sessions": {},
        "_hub/agent_stderr": {},
        "logout": {},
        "auth/logout": {},
        "_hub/audit/list": {},
    }
    return known.get(method, by_session)


def refusals_of(client: AcpClient, method: str) -> list[dict[str, Any]]:
    return [
        n["params"]["error"]
        for n in client.notifications
        if n["method"] == "_hub/refused" and n["params"]["method"] == method
    ]


async def try_method(hub: HubHandle, credential: str, row: Row, sid: str, link_id: str) -> Outcome:
    """What ``row``'s method does for ``credential``, on session ``sid``."""
    try:
        async with acp_client(hub.url_with(credential)) as client:
            if row.name == "initialize":
                return "ok"
            if row.scope == "session" and row.name not in ("session/resume", "session/load"):
                # Attached first, as a client would be (a refusal here is the call's too).
                await client.start("session/resume", {"sessionId": sid, "cwd": "/"})
            params = params_of(row.name, sid, link_id)
            if row.name in NOTIFICATIONS:
                await client.notify(row.name, params)
                # Handled in order: once a later request is answered, a refusal was sent.
                await client.call("session/list", {})
                refused = refusals_of(client, row.name)
                return outcome_of(refused[0] if refused else None)
            answer = await client.response(await client.start(row.name, params))
            return outcome_of(answer.get("error"))
    except InvalidStatus as refused:
        return f"refused {refused.response.status_code}"


def below(role: Role) -> Role | None:
    index = ROLES.index(role)
    return ROLES[index - 1] if index > 0 else None


def sub() -> str:
    return f"table-{next(_subs)}"


async def link_for(owner: AcpClient, sid: str, role: Role) -> dict[str, Any]:
    link: dict[str, Any] = await owner.call(
        "_hub/share/create", {"sessionId": sid, "role": role, "expiresIn": 600}
    )
    return link


async def method_cases(
    owner: AcpClient, row: Row, sid: str, other_sid: str
) -> list[tuple[str, str, Outcome]]:
    """(what, credential, expected outcome) for ``row``; the permitted credential last (the
    call may end the session)."""
    cases: list[tuple[str, str, Outcome]] = []
    lower = below(row.role)
    if row.scope in ("open", "session"):
        permitted = (await link_for(owner, sid, row.role))["token"]
        if lower is not None:
            low = (await link_for(owner, sid, lower))["token"]
            cases.append((f"a {lower} link", low, "forbidden"))
    elif row.scope == "session, not a link":
        permitted = token(row.role, sub=sub(), sessions=[sid])
        if lower is not None:
            low = token(lower, sub=sub(), sessions=[sid])
            cases.append((f"a {lower} token for the session", low, "forbidden"))
    else:
        permitted = token(row.role, sub=sub(), agents=["scripted"])
        if lower is not None:
            low = token(lower, sub=sub(), agents=["scripted"])
            cases.append((f"a whole-hub {lower} token", low, "forbidden"))
        scoped = token(row.role, sub=sub(), sessions=[sid], agents=["scripted"])
        cases.append(("an owner token for one session", scoped, "forbidden"))
    if not row.link:
        owner_link = (await link_for(owner, sid, "owner"))["token"]
        cases.append(("an owner link", owner_link, "forbidden"))
    if row.scope.startswith("session"):
        elsewhere = token("owner", sub=sub(), sessions=[other_sid], agents=["scripted"])
        cases.append(("an owner token for another session", elsewhere, "hidden"))
    if row.scope == "hub + agents":
        others = token("owner", sub=sub(), agents=["other"])
        cases.append(("a whole-hub owner of other agents", others, "forbidden"))
    cases.append(("the permitted credential", permitted, "ok"))
    return cases


async def get(hub: HubHandle, path: str, credential: str | None) -> int:
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{hub.http}{path}", headers=headers)).status_code


async def acp_status(hub: HubHandle, credential: str | None) -> tuple[int, int]:
    """The WebSocket upgrade's status (101 when admitted) and a Streamable HTTP initialize's."""
    url = hub.url_with(credential) if credential else hub.bare_url
    try:
        async with connect(url):
            upgrade = 101
    except InvalidStatus as refused:
        upgrade = refused.response.status_code
    headers = {"Accept": "application/json, text/event-stream"}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}}
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{hub.http}/acp", json=body, headers=headers)
        connection = answer.headers.get("acp-connection-id")
        if connection:
            await http.delete(
                f"{hub.http}/acp", headers={**headers, "Acp-Connection-Id": connection}
            )
    return upgrade, answer.status_code


def route_path(row: Row, sid: str) -> str:
    return row.name.removeprefix("GET ").replace("{id}", sid).replace("{path}", "app.css")


async def route_failures(hub: HubHandle, row: Row, sid: str, link: str) -> list[str]:
    owner = token("owner", sub=sub())
    path = route_path(row, sid)
    seen: list[str] = []

    def expect(what: str, got: Any, want: Any) -> None:
        if got != want:
            seen.append(f"{row.name} with {what}: {got}, the table says {want}")

    if path == "/acp":
        expect("no credential", await acp_status(hub, None), (401, 401))
        expect("a viewer link", await acp_status(hub, link), (101, 200))
    elif row.scope == "public":
        expect("no credential", await get(hub, path, None), 200)
    elif row.scope == "credential":
        expect("no credential", await get(hub, path, None), 401)
        expect("a viewer link", await get(hub, path, link), 200 if row.link else 401)
    else:  # the metrics token
        expect("no credential", await get(hub, path, None), 401)
        expect("a viewer link", await get(hub, path, link), 401)
        expect("an owner token", await get(hub, path, owner), 401)
        expect("the metrics token", await get(hub, path, METRICS_TOKEN), 200)
    return seen


SHARDS = 4
"""The rows are tried in this many shares, each on a hub of its own (in parallel under
``pytest-xdist``: one hub trying every row took a minute)."""


@pytest.mark.parametrize("shard", range(SHARDS))
async def test_every_row_holds_on_a_running_hub(shard: int) -> None:
    rows = table()[shard::SHARDS]
    assert rows
    settings = Settings(metrics_token=METRICS_TOKEN)
    failures: list[str] = []
    async with running_hub([scripted_agent()], settings) as hub, acp_client(hub.url) as owner:
        other_sid = await owner.new_session()
        for row in rows:
            sid = await owner.new_session()
            if row.route:
                viewer_link = (await link_for(owner, sid, "viewer"))["token"]
                failures += await route_failures(hub, row, sid, viewer_link)
                continue
            for what, credential, want in await method_cases(owner, row, sid, other_sid):
                # A fresh link of the session for each try: revoking it is the permitted call.
                target = (await link_for(owner, sid, "viewer"))["linkId"]
                got = await try_method(hub, credential, row, sid, target)
                if got != want:
                    failures.append(f"{row.name} with {what}: {got}, the table says {want}")
    assert not failures, "\n".join(failures)
