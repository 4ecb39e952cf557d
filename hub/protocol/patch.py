"""Git patches: made from a v1 diff, and read back into a new file's text.

A v1 diff carries whole texts (``oldText`` / ``newText``); a v2 diff carries a list of
changes and, optionally, a ``git_patch``
(https://agentclientprotocol.com/protocol/v2/migration#diff-content). ``git_patch`` turns
the first into the second; ``added_text`` recovers the new text from a patch that only adds
one file, the one v2 diff a v1 client can be shown as a v1 diff.
"""

from __future__ import annotations

import difflib
import re
from typing import Final

__all__ = ["added_text", "git_patch"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def _lines(text: str) -> list[str]:
    # str.splitlines would also split on \r, \v, \f, \x1c...; patches split on \n only.
    return _LINE.findall(text)


def git_patch(path: str, old_text: str | None, new_text: str) -> str:
    """A ``git_patch`` (``diff --git`` section) turning ``old_text`` into ``new_text``.

    ``old_text=None`` is a new file. Paths are absolute and used as they are, as in the
    v2 ``tool-calls`` example; a missing final newline is marked the way git marks it.
    """
    head = [f"diff --git {path} {path}\n"]
    if old_text is None:
        head.append("new file mode 100644\n")
    old = [] if old_text is None else _lines(old_text)
    body = difflib.unified_diff(
        old, _lines(new_text), "/dev/null" if old_text is None else path, path
    )
    return "".join(
        head
        + [
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
            for line in body
        ]
    )


_PATCH_HEADERS: Final = ("diff --git ", "new file mode ", "index ", "--- ", "+++ ")


def added_text(patch: str) -> str | None:
    """The new file's text if ``patch`` is one section that only adds lines, else None."""
    lines = patch.split("\n")
    if patch.endswith("\n"):
        lines.pop()
    if sum(line.startswith("diff --git ") for line in lines) > 1:
        return None
    out: list[str] = []
    in_hunk = False
    for line in lines:
        if line.startswith("@@"):
            in_hunk = True
        elif not in_hunk:
            if line and not line.startswith(_PATCH_HEADERS):
                return None  # e.g. "Binary files differ" or "GIT binary patch"
        elif line.startswith("+"):
            out.append(line[1:] + "\n")
        elif line.startswith("\\") and out:
            out[-1] = out[-1][:-1]
        else:
            return None
    return "".join(out)
