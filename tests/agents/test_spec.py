"""Agent definitions: ``--agent NAME=COMMAND`` and the TOML config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.agents.spec import AgentSpec, ConfigError, load_config, parse_agent_arg


def test_parse_agent_arg_uses_shell_quoting() -> None:
    spec = parse_agent_arg("claude=npx -y '@zed/claude code' --flag=\"a b\"")
    assert spec == AgentSpec("claude", "npx", ("-y", "@zed/claude code", "--flag=a b"))
    assert spec.argv == ["npx", "-y", "@zed/claude code", "--flag=a b"]
    assert spec.protocol == "auto"
    assert dict(spec.env) == {}


@pytest.mark.parametrize(
    ("arg", "problem"),
    [
        ("claude", "expected NAME=COMMAND"),
        ("claude=", "the command is missing"),
        ("=npx", "agent name"),
        ("bad name=npx", "agent name"),
        ("x=npx 'unclosed", "No closing quotation"),
    ],
)
def test_parse_agent_arg_errors(arg: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_agent_arg(arg)


def test_spec_is_frozen_and_normalizes() -> None:
    env = {"A": "1"}
    spec = AgentSpec("a", "cmd", ["x"], env, protocol="2")  # type: ignore[arg-type]
    env["A"] = "changed"
    assert spec.args == ("x",)
    assert spec.env["A"] == "1"
    assert spec.protocol == 2
    with pytest.raises(AttributeError):
        spec.name = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.env["B"] = "2"  # type: ignore[index]


CONFIG = """
default_agent = "two"

[hub]
port = 9000
origins = ["https://example.com"]

[agents.one]
command = "agent-one"

[agents.two]
command = "agent-two"
args = ["--acp", "--verbose"]
env = { TOKEN = "secret" }
cwd = "work"
protocol = 1
"""


def test_load_config(tmp_path: Path) -> None:
    path = tmp_path / "acp-hub.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    assert list(config.agents) == ["one", "two"]
    assert config.default_agent == "two"
    assert config.hub == {"port": 9000, "origins": ["https://example.com"]}
    two = config.agents["two"]
    assert two.argv == ["agent-two", "--acp", "--verbose"]
    assert dict(two.env) == {"TOKEN": "secret"}
    assert two.cwd == str((tmp_path / "work").resolve())  # relative to the file
    assert two.protocol == 1
    assert config.agents["one"].protocol == "auto"


def test_default_agent_is_the_first_one(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[agents.b]\ncommand = "b"\n[agents.a]\ncommand = "a"\n')
    assert load_config(path).default_agent == "b"
    path.write_text("[hub]\nport = 1\n")
    empty = load_config(path)
    assert empty.default_agent is None
    assert dict(empty.agents) == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[agents.a]\nargs = ["x"]\n', r"\[agents\.a\]: command must be a non-empty string"),
        ('[agents.a]\ncommand = "a"\nargs = "x"\n', "args must be a list of strings"),
        ('[agents.a]\ncommand = "a"\nenv = { A = 1 }\n', "env must be a table of string"),
        ('[agents.a]\ncommand = "a"\nprotocol = 3\n', 'protocol must be "auto", 1 or 2'),
        ('[agents.a]\ncommand = "a"\nprotcol = 1\n', r"unknown key\(s\) protcol"),
        ('default_agent = "b"\n[agents.a]\ncommand = "a"\n', "default_agent 'b' is not a"),
        ("[agents]\na = 1\n", r"\[agents\.a\] must be a table"),
        ("hub = 3\n", r"\[hub\] must be a table"),
        ("[agents.a\n", "invalid TOML"),
        ('[agents.a]\ncommand = "a"\nauth_method = ""\n', "auth_method must be a non-empty"),
        ('[agents.a]\ncommand = "a"\nauth_meta = 1\n', "auth_meta must be a table"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem) as error:
        load_config(path)
    assert str(path) in str(error.value)


def test_login_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[agents.codex]\ncommand = "codex-acp"\nauth_method = "openai-api-key"\n'
        'auth_meta = { team = "blue" }\n[agents.plain]\ncommand = "p"\n'
    )
    agents = load_config(path).agents
    assert agents["codex"].auth_method == "openai-api-key"
    assert dict(agents["codex"].auth_meta or {}) == {"team": "blue"}
    assert (agents["plain"].auth_method, agents["plain"].auth_meta) == (None, None)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.toml")
