"""The checks on what a client may hand an agent: ``cwd`` under the workspace roots, MCP servers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hub.sessions.workspace import (
    MAX_CWD_BYTES,
    WorkspaceRefusal,
    check_cwd,
    check_mcp_servers,
    resolve_roots,
)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    (root / "proj" / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    return root, outside


def refusal(cwd: object, roots: tuple[Path, ...]) -> WorkspaceRefusal:
    with pytest.raises(WorkspaceRefusal) as caught:
        check_cwd(cwd, roots)
    return caught.value


def test_a_cwd_under_a_root_is_resolved(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    roots = resolve_roots([str(root)])
    assert check_cwd(str(root / "proj" / "sub"), roots) == str((root / "proj" / "sub").resolve())
    assert check_cwd(str(root), roots) == str(root.resolve())
    # ".." that stays inside is fine, and comes back resolved.
    assert check_cwd(str(root / "proj" / ".." / "proj"), roots) == str((root / "proj").resolve())


def test_paths_outside_the_roots_are_forbidden(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    roots = resolve_roots([str(root)])
    for cwd in (str(outside), "/etc", str(root / ".." / "outside"), "/"):
        assert refusal(cwd, roots).kind == "forbidden", cwd


def test_a_symlink_out_of_the_root_is_forbidden(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    (root / "escape").symlink_to(outside)
    assert refusal(str(root / "escape"), resolve_roots([str(root)])).kind == "forbidden"


def test_a_sibling_with_a_common_prefix_is_not_under_the_root(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work-evil").mkdir()
    roots = resolve_roots([str(tmp_path / "work")])
    assert refusal(str(tmp_path / "work-evil"), roots).kind == "forbidden"


@pytest.mark.parametrize(
    "cwd",
    [1, None, "", "relative/path", "/tmp/a\nb", "/tmp/\x00", "/" + "a" * MAX_CWD_BYTES, ["/"]],
)
def test_malformed_cwds_are_invalid(cwd: object, tree: tuple[Path, Path]) -> None:
    assert refusal(cwd, resolve_roots([str(tree[0])])).kind == "invalid"


def test_missing_paths_and_files_are_invalid(tree: tuple[Path, Path]) -> None:
    root, _ = tree
    (root / "file").write_text("x")
    roots = resolve_roots([str(root)])
    assert "does not exist" in refusal(str(root / "nope"), roots).message
    assert "not a directory" in refusal(str(root / "file"), roots).message


def test_no_roots_refuses_everything(tree: tuple[Path, Path]) -> None:
    assert refusal(str(tree[0]), ()).kind == "forbidden"


def test_roots_must_exist_and_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="absolute"):
        resolve_roots(["relative"])
    with pytest.raises(ValueError, match="not a directory"):
        resolve_roots([str(tmp_path / "missing")])


STDIO = {"name": "sh", "command": "/bin/sh", "args": ["-c", "id"], "env": []}
HTTP = {"type": "http", "name": "web", "url": "https://example.com/mcp", "headers": []}


def mcp_refusal(servers: object, **kwargs: object) -> WorkspaceRefusal:
    with pytest.raises(WorkspaceRefusal) as caught:
        check_mcp_servers(servers, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_an_empty_list_is_always_allowed() -> None:
    assert check_mcp_servers([], policy="none", commands=(), is_owner=False) == []


def test_policy_none_refuses_every_entry() -> None:
    assert mcp_refusal([HTTP], policy="none", commands=(), is_owner=True).kind == "forbidden"


def test_policy_owner_lets_only_owners_pass_servers() -> None:
    assert check_mcp_servers([STDIO], policy="owner", commands=(), is_owner=True) == [STDIO]
    refused = mcp_refusal([STDIO], policy="owner", commands=(), is_owner=False)
    assert refused.kind == "forbidden"
    assert "owners" in refused.message


def test_policy_any_lets_everyone_pass_servers() -> None:
    assert check_mcp_servers([STDIO, HTTP], policy="any", commands=(), is_owner=False)


def test_the_command_allow_list_applies_to_stdio_entries_only() -> None:
    sh = shutil.which("sh")
    assert sh is not None
    allowed = check_mcp_servers(
        [{**STDIO, "command": "sh"}, HTTP], policy="any", commands=("sh",), is_owner=False
    )
    assert len(allowed) == 2
    # The same binary by its resolved path is the same command.
    assert check_mcp_servers(
        [{**STDIO, "command": os.path.realpath(sh)}], policy="any", commands=("sh",), is_owner=False
    )
    refused = mcp_refusal(
        [{**STDIO, "command": "python3"}], policy="any", commands=("sh",), is_owner=True
    )
    assert refused.kind == "forbidden"
    assert "python3" in refused.message


def test_malformed_mcp_lists_are_invalid() -> None:
    assert mcp_refusal({"a": 1}, policy="any", commands=(), is_owner=True).kind == "invalid"
    assert mcp_refusal(["x"], policy="any", commands=("sh",), is_owner=True).kind == "invalid"
    refused = mcp_refusal(
        [{"name": "x", "command": ["sh"]}], policy="any", commands=("sh",), is_owner=True
    )
    assert refused.kind == "forbidden"


def stdio(command: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "type": "stdio",
        "name": "x",
        "command": command,
        "args": args,
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }


def mcp_check(servers: list[dict[str, object]], commands: tuple[str, ...], **kw: object) -> str:
    """``ok``, or the refusal's kind and message."""
    try:
        check_mcp_servers(servers, policy="any", commands=commands, is_owner=True, **kw)  # type: ignore[arg-type]
    except WorkspaceRefusal as refusal:
        return f"{refusal.kind}: {refusal.message}"
    return "ok"


def test_mcp_commands_entries_may_pin_the_arguments() -> None:
    git = ("uvx mcp-server-git",)
    assert mcp_check([stdio("uvx", ["mcp-server-git"])], git) == "ok"
    assert mcp_check([stdio("uvx", ["evil-package"])], git).startswith("forbidden: the arguments")
    assert mcp_check([stdio("uvx", ["mcp-server-git", "--x"])], git).startswith("forbidden")
    assert mcp_check([stdio("uvx", [])], git).startswith("forbidden")
    # Globs per word, and `**` for any further arguments.
    fs = ("npx -y '@modelcontextprotocol/server-*' **",)
    assert mcp_check([stdio("npx", ["-y", "@modelcontextprotocol/server-fs", "/srv"])], fs) == "ok"
    assert mcp_check([stdio("npx", ["-y", "@modelcontextprotocol/server-fs"])], fs) == "ok"
    assert mcp_check([stdio("npx", ["-y", "evil"])], fs).startswith("forbidden")
    assert mcp_check([stdio("npx", ["-e", "process.exit()"])], fs).startswith("forbidden")
    # A command alone admits any arguments (its own business), as before.
    assert mcp_check([stdio("sh", ["-c", "id"])], ("sh",)) == "ok"
    # Several entries for one command: any of them may admit.
    both = ("uvx mcp-server-git", "uvx mcp-server-time")
    assert mcp_check([stdio("uvx", ["mcp-server-time"])], both) == "ok"


def test_mcp_commands_refuse_environment_variables_that_change_what_runs() -> None:
    sh = ("sh",)
    for name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS"):
        assert mcp_check([stdio("sh", [], {name: "/tmp/x"})], sh).startswith("forbidden"), name
    for name in ("PATH", "PYTHONPATH", "PYTHONSTARTUP", "BASH_ENV", "ld_preload", "HOME"):
        assert mcp_check([stdio("sh", [], {name: "/tmp/x"})], sh).startswith("forbidden"), name
    assert mcp_check([stdio("sh", [], {"GITHUB_TOKEN": "t", "LOG_LEVEL": "debug"})], sh) == "ok"
    # Unless the operator allows them by name or glob.
    allowed = mcp_check([stdio("sh", [], {"PATH": "/opt/bin"})], sh, allowed_env=("PATH",))
    assert allowed == "ok"
    allowed = mcp_check([stdio("sh", [], {"PYTHONPATH": "/x"})], sh, allowed_env=("PYTHON*",))
    assert allowed == "ok"
    # A name that is no variable name is malformed.
    assert mcp_check([stdio("sh", [], {"A=B": "c"})], sh).startswith("invalid")
    # Without mcp_commands any command may run anyway: the environment is not checked.
    assert mcp_check([stdio("sh", [], {"LD_PRELOAD": "/tmp/x"})], ()) == "ok"


def test_mcp_commands_entries_must_be_shell_words() -> None:
    from hub.settings import Settings

    assert Settings().merged({"mcp_commands": ["npx -y pkg **"]}).mcp_commands == ("npx -y pkg **",)
    with pytest.raises(ValueError, match="mcp_commands entry"):
        Settings().merged({"mcp_commands": ["npx 'unclosed"]})
    with pytest.raises(ValueError, match="must name a command"):
        Settings().merged({"mcp_commands": ["  "]})
