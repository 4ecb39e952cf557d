"""Git patches: made from v1 diffs, applied back, and rebuilt into v1 diffs for v1 clients."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hub.protocol.agent_v1 import AgentV1Translator
from hub.protocol.patch import git_patch
from tests.protocol.translation import (
    render,
    text,
)


@given(st.text(alphabet=st.sampled_from("ab \n\r\t\\+-@é😀\x0b\x1c"), max_size=60))
def test_v1_added_file_round_trips_through_the_git_patch(new_text: str) -> None:
    translator = AgentV1Translator()
    diff = {"type": "diff", "path": "/p/f", "newText": new_text}
    (v2,) = translator.update(
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "T", "content": [diff]}
    )
    assert render(v2)[0]["content"] == [diff]


def apply_patch(old: str, patch: str) -> str:
    """A minimal unified-diff applier, enough to check the patches the hub generates."""
    src = re.findall(r"[^\n]*\n|[^\n]+\Z", old)
    rows = patch.split("\n")[:-1]
    out: list[str] = []
    pos = 0
    i = 0
    while i < len(rows):
        hunk = re.match(r"@@ -(\d+)(?:,(\d+))? ", rows[i])
        i += 1
        if hunk is None:
            continue
        start = int(hunk.group(1)) - (0 if hunk.group(2) == "0" else 1)
        out += src[pos:start]
        pos = start
        last = ""
        while i < len(rows) and rows[i][:1] in (" ", "-", "+", "\\"):
            tag, body = rows[i][:1], rows[i][1:] + "\n"
            if tag == "\\":
                if last in (" ", "+"):
                    out[-1] = out[-1][:-1]  # "\ No newline at end of file"
            elif tag == "+":
                out.append(body)
            else:
                assert src[pos].rstrip("\n") == body[:-1]
                pos += 1
                if tag == " ":
                    out.append(body)
            last = tag
            i += 1
    return "".join(out + src[pos:])


@given(
    st.text(alphabet=st.sampled_from("ab\n"), max_size=40),
    st.text(alphabet=st.sampled_from("ab\n"), max_size=40),
)
def test_generated_patches_turn_the_old_text_into_the_new(old: str, new: str) -> None:
    patch = git_patch("/p/f", old, new)
    assert patch.startswith("diff --git /p/f /p/f\n")
    assert apply_patch(old, patch) == new


def test_git_patch_of_an_empty_new_file_has_no_hunk() -> None:
    assert git_patch("/p/e", None, "") == "diff --git /p/e /p/e\nnew file mode 100644\n"
    out = render(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c",
            "content": [
                {
                    "type": "diff",
                    "changes": [{"operation": "add", "path": "/p/e"}],
                    "patch": {"format": "git_patch", "text": git_patch("/p/e", None, "")},
                }
            ],
        }
    )
    assert out[0]["content"] == [{"type": "diff", "path": "/p/e", "newText": ""}]


@pytest.mark.parametrize(
    "patch",
    [
        "diff --git /p/b /p/b\nnew file mode 100644\nBinary files /dev/null and /p/b differ\n",
        "diff --git /p/b /p/b\n@@ -1 +1 @@\n-x\n+y\n",
        "diff --git /p/b /p/b\n@@ -0,0 +1 @@\n+x\ndiff --git /p/c /p/c\n@@ -0,0 +1 @@\n+y\n",
    ],
    ids=["binary", "not-pure-add", "two-sections"],
)
def test_add_diffs_that_cannot_be_rebuilt_stay_patch_text(patch: str) -> None:
    item = {
        "type": "diff",
        "changes": [{"operation": "add", "path": "/p/b"}],
        "patch": {"format": "git_patch", "text": patch},
    }
    (v1_item,) = render(
        {"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]}
    )[0]["content"]
    assert v1_item["content"] == text(patch)


def test_add_diff_of_a_binary_file_or_other_format_stays_text() -> None:
    for change, fmt in (({"fileType": "binary"}, "git_patch"), ({}, "_acme_patch")):
        item = {
            "type": "diff",
            "changes": [{"operation": "add", "path": "/p/b", **change}],
            "patch": {"format": fmt, "text": "+x"},
        }
        out = render({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]})
        assert out[0]["content"][0]["type"] == "content"


def test_an_add_patch_without_final_newline_is_still_rebuilt() -> None:
    item = {
        "type": "diff",
        "changes": [{"operation": "add", "path": "/p/b"}],
        "patch": {"format": "git_patch", "text": "diff --git /p/b /p/b\n@@ -0,0 +1 @@\n+x"},
    }
    (out,) = render({"sessionUpdate": "tool_call_update", "toolCallId": "c", "content": [item]})
    assert out["content"] == [{"type": "diff", "path": "/p/b", "newText": "x\n"}]
