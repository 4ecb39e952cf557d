"""The pure parts of access: hosts and origins, where a token travels, the hub's key, share
links and the audit log on a real file system, log redaction, the settings' refusals."""

from __future__ import annotations

import json
import stat
from functools import partial
from pathlib import Path

import anyio
import pytest

from hub.access.audit import JsonlAuditLog
from hub.access.carriers import carried_tokens, offered_subprotocols
from hub.access.gate import Gate
from hub.access.hosts import effective_allowed_hosts, host_allowed, is_loopback, origin_matches
from hub.access.keys import HubKeyError, load_hub_key
from hub.access.links import FileLinkStore
from hub.access.principal import Refusal
from hub.server.logs import redact
from hub.settings import Settings

SECRET = "s" * 40


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_hosts() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.2")
    loopback = effective_allowed_hosts("127.0.0.1", ())
    assert host_allowed("127.0.0.1:8765", loopback)
    assert host_allowed("localhost", loopback)
    assert host_allowed("[::1]:8765", loopback)
    assert not host_allowed("attacker.example", loopback)  # DNS rebinding
    assert not host_allowed("attacker.example:8765", loopback)
    assert not host_allowed(None, loopback)
    assert not host_allowed("", loopback)
    assert effective_allowed_hosts("0.0.0.0", ()) == ()
    named = effective_allowed_hosts("0.0.0.0", ("hub.example.com", "*.team.example"))
    assert host_allowed("HUB.example.com:443", named)
    assert host_allowed("a.team.example", named)
    assert not host_allowed("team.example", named)
    assert not host_allowed("evilteam.example", named)


def test_origins() -> None:
    assert origin_matches("https://app.example/", ["https://app.example"])
    assert origin_matches("https://a.app.example", ["https://*.app.example"])
    assert not origin_matches("http://a.app.example", ["https://*.app.example"])
    assert not origin_matches("https://app.example.evil", ["https://app.example"])


def test_where_a_token_travels() -> None:
    both = carried_tokens(
        "Bearer from-header", ["acp", "acp-hub.token.from-protocol"], "token=from-query"
    )
    assert both.tokens == (
        ("from-header", "header"),
        ("from-protocol", "subprotocol"),
        ("from-query", "query"),
    )
    # The subprotocol selected is never the token entry.
    assert both.subprotocol == "acp"
    only = carried_tokens(None, offered_subprotocols("acp-hub.token.x"), "")
    assert only.tokens == (("x", "subprotocol"),)
    assert only.subprotocol is None
    assert carried_tokens("Basic abc", [], "a=1&" * 50).tokens == ()


def test_the_key_is_generated_once_private_and_reused(tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path / "state"))
    first = load_hub_key(settings, environ={})
    path = tmp_path / "state" / "secret"
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert load_hub_key(settings, environ={}).secret == first.secret
    assert first.secret.decode() not in repr(first)
    env = load_hub_key(settings, environ={"ACP_HUB_SECRET": SECRET})
    assert env.secret == SECRET.encode()
    assert env.kid != first.kid
    with pytest.raises(HubKeyError, match="at least 32 bytes"):
        load_hub_key(settings, environ={"ACP_HUB_SECRET": "short"})
    with pytest.raises(HubKeyError, match="secret_file"):
        load_hub_key(Settings(secret_file=str(tmp_path / "absent")), environ={})


def test_share_links_and_revocations_survive_a_restart(tmp_path: Path) -> None:
    settings = Settings(state_dir=str(tmp_path))
    gate = Gate.from_settings(settings, environ={"ACP_HUB_SECRET": SECRET})
    link, token = gate.create_link(session_id="s-1", role="viewer", ttl=600, created_by="owner")
    other, other_token = gate.create_link(
        session_id="s-1", role="approver", ttl=600, created_by="owner", max_uses=1
    )
    assert gate.authenticate(token).link_id == link.link_id
    gate.links.revoke(link.link_id, "owner")
    assert mode(tmp_path / "links.json") == 0o600
    assert token not in (tmp_path / "links.json").read_text()  # tokens are never stored
    again = Gate.from_settings(settings, environ={"ACP_HUB_SECRET": SECRET})
    with pytest.raises(Refusal) as info:
        again.authenticate(token)
    assert info.value.code == "revoked"
    admitted = anyio.run(
        partial(
            again.admit,
            host="127.0.0.1:1",
            origin=None,
            authorization=None,
            subprotocols=None,
            query_string=f"token={other_token}",
        )
    )
    assert admitted.principal.role == "approver"
    assert admitted.principal.sub.startswith("link:")
    with pytest.raises(Refusal) as info:
        again.authenticate(other_token)
    assert info.value.code == "used_up"
    assert [x.link_id for x in again.links.for_session("s-1")] == [link.link_id, other.link_id]
    (tmp_path / "links.json").write_text("{damaged")
    with pytest.raises(ValueError, match="share links"):
        FileLinkStore(tmp_path / "links.json")


def test_the_audit_log_appends_json_lines(tmp_path: Path) -> None:
    audit = JsonlAuditLog(tmp_path / "audit.jsonl")
    audit.record("share_created", principal="owner", linkId="l-1")
    audit.record("session_closed", principal="owner", sessionId="s-1")
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["share_created", "session_closed"]
    assert all("ts" in x for x in lines)
    assert mode(tmp_path / "audit.jsonl") == 0o600


def test_the_settings_refuse_unsafe_exposure() -> None:
    with pytest.raises(ValueError, match="loopback"):
        Settings().merged({"auth": "none", "host": "0.0.0.0", "allowed_hosts": ["x"]})
    with pytest.raises(ValueError, match="allowed_hosts is required"):
        Settings().merged({"host": "0.0.0.0"})
    assert Settings().merged({"host": "0.0.0.0", "allowed_hosts": ["hub.example"]}).auth == "token"
    assert Settings().merged({"auth": "none"}).auth == "none"


def test_redaction_scrubs_every_form_of_token() -> None:
    jwt_like = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"
    text = (
        f'"GET /acp?token={jwt_like}&x=1" Authorization: Bearer {jwt_like} '
        f"protocols acp, acp-hub.token.{jwt_like} and #token=opaque-value and {jwt_like}"
    )
    cleaned = redact(text)
    assert jwt_like not in cleaned
    assert "opaque-value" not in cleaned
    assert "x=1" in cleaned
    assert "acp-hub.token.[redacted]" in cleaned
