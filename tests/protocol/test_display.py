"""``hub.protocol.display``: titles clamped, and whether a user message says the prompt."""

from __future__ import annotations

from hub.protocol.display import TITLE_MAX_CHARS, clamp_title, extends_prompt, matches_prompt


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def test_a_title_is_clamped_and_a_short_one_left_alone() -> None:
    update = {"sessionUpdate": "session_info_update", "title": "x" * 10_000}
    clamped = clamp_title(update)
    assert len(clamped["title"]) == TITLE_MAX_CHARS
    assert clamped["title"].endswith("\u2026")
    short = {"sessionUpdate": "session_info_update", "title": "ok"}
    assert clamp_title(short) is short
    assert clamp_title({"sessionUpdate": "session_info_update", "title": None})["title"] is None


def test_a_message_matches_the_prompt_by_what_it_says() -> None:
    sent = [
        text("hello "),
        text("world"),
        {"type": "resource_link", "uri": "file:///a", "name": "a"},
    ]
    same = [
        text("hello world"),
        {"type": "resource_link", "uri": "file:///a", "name": "a", "_meta": {"x": 1}},
    ]
    assert matches_prompt(same, sent)
    assert not matches_prompt([text("hello world; and deploy")], [text("hello world")])
    image = {"type": "image", "mimeType": "image/png", "data": ""}
    assert not matches_prompt([text("hello")], [text("hello"), image])


def test_a_streamed_echo_extends_the_prompt_only_while_it_is_its_start() -> None:
    sent = [text("hello world")]
    assert extends_prompt([], sent)
    assert extends_prompt([text("hel")], sent)
    assert extends_prompt([text("hel"), text("lo world")], sent)
    assert not extends_prompt([text("hello world!")], sent)
    assert not extends_prompt([text("help")], sent)
    assert not extends_prompt([text("hello world"), text("x")], [text("hello world")])
