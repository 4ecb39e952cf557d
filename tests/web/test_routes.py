"""The web routes over real HTTP: pages, widget, static modules, and their security headers."""

from __future__ import annotations

import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest

from hub.server.web import content_security_policy, validate_embed_origin
from tests.web.harness import Embedding, Hub


def _get(url: str | urllib.request.Request) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def _directives(csp: str) -> dict[str, str]:
    return {part.split(" ", 1)[0]: part.split(" ", 1)[1] for part in csp.split("; ")}


@pytest.mark.parametrize("path", ["/", "/s/some-session", "/static/app.css", "/widget.js"])
def test_pages_are_not_frameable_and_allow_only_own_scripts(hub: Hub, path: str) -> None:
    status, headers, _ = _get(hub.url + path)
    assert status == 200
    csp = _directives(headers["content-security-policy"])
    assert csp["script-src"] == "'self'"
    assert csp["frame-ancestors"] == "'none'"
    host = urlsplit(hub.url).netloc
    assert csp["connect-src"] == f"'self' ws://{host} wss://{host}"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"


def test_embed_view_is_frameable_by_the_configured_origins(hub: Hub, embedding: Embedding) -> None:
    status, headers, body = _get(hub.url + "/embed/some-session")
    assert status == 200
    assert b"/static/embed.js" in body
    csp = _directives(headers["content-security-policy"])
    assert csp["frame-ancestors"] == f"'self' {embedding.allowed.origin}"
    assert embedding.refused.origin not in headers["content-security-policy"]
    assert "x-frame-options" not in headers


def test_pages_contain_no_inline_script(hub: Hub) -> None:
    for path in ("/", "/s/x", "/embed/x"):
        _, headers, body = _get(hub.url + path)
        assert headers["content-type"].startswith("text/html")
        text = body.decode()
        assert text.count("<script") == text.count('<script type="module" src="/static/')


def test_static_files_stay_inside_the_static_folder(hub: Hub) -> None:
    status, headers, body = _get(hub.url + "/static/session.js")
    assert status == 200
    assert headers["content-type"].startswith("text/javascript")
    assert b"// @ts-check" in body
    for path in (
        "/static/../index.html",
        "/static/%2e%2e/index.html",
        "/static/nope.js",
        "/static/app.css%00.js",  # an embedded NUL byte: 404, not a 500 with a traceback
        "/static/" + "a" * 5000 + ".js",  # a name too long for the file system
    ):
        assert _get(hub.url + path)[0] == 404, path


def test_hostile_host_header_is_not_echoed_into_the_policy() -> None:
    csp = content_security_policy("evil.test; script-src *")
    assert "evil" not in csp
    assert _directives(csp)["connect-src"] == "'self'"


@pytest.mark.parametrize(
    "origin", ["*", "https://a.test/path", "https://a.test 'unsafe-inline'", "javascript:x"]
)
def test_embedding_origins_must_be_plain_origins(origin: str) -> None:
    with pytest.raises(ValueError, match="embedding origin"):
        validate_embed_origin(origin)


def test_embedding_origin_accepts_scheme_host_port() -> None:
    assert validate_embed_origin("https://app.example.com:8443/") == "https://app.example.com:8443"
    assert validate_embed_origin("https://*.example.com") == "https://*.example.com"


def test_an_unchanged_file_is_answered_304_by_its_etag(hub: Hub) -> None:
    status, headers, body = _get(hub.url + "/static/session.js")
    assert status == 200
    etag = headers["etag"]
    request = urllib.request.Request(
        hub.url + "/static/session.js", headers={"If-None-Match": f'"other", {etag}'}
    )
    status, again, empty = _get(request)
    assert status == 304
    assert again["etag"] == etag
    assert empty == b""
    stale = urllib.request.Request(hub.url + "/static/session.js", headers={"If-None-Match": '"x"'})
    assert _get(stale)[2] == body


@pytest.mark.parametrize("path", ["/static/.hidden.js", "/static/a//b.js", "/static/%5c..%5cx.js"])
def test_odd_static_names_are_not_found(hub: Hub, path: str) -> None:
    assert _get(hub.url + path)[0] == 404
