"""The agent supervisor: runs ACP agents over stdio and gives the hub a v2-shaped API.

See ``docs/agents.md`` for definitions, the config file, the lifecycle and the restart and
shutdown rules. One module per concept: ``spec`` (definitions and config), ``process``
(process groups, stderr, shutdown), ``connection`` (JSON-RPC over stdio), ``lifecycle``
(an agent's states and their transition table), ``restart`` (the backoff and timeouts of
starts and shutdowns), ``dialect`` (what differs between ACP v1 and v2), ``agent`` (one
agent's lifecycle and operations), ``session_table`` (the agent sessions and their sinks),
``inbound`` (what an agent sends), ``login`` (agents that require login),
``terminal_login`` (``acp-hub agent-login``), ``supervisor`` (all agents), ``sink`` (what the
session layer implements), ``errors`` (``AgentError``).
"""

from __future__ import annotations

from hub.agents.agent import Agent, NewSessionResult, PromptAck
from hub.agents.errors import AgentError
from hub.agents.lifecycle import AgentState
from hub.agents.process import ShutdownTimings
from hub.agents.restart import RestartPolicy
from hub.agents.sink import SessionSink
from hub.agents.spec import AgentSpec, ConfigError, HubConfig, load_config, parse_agent_arg
from hub.agents.supervisor import Supervisor, UnknownAgent

__all__ = [
    "Agent",
    "AgentError",
    "AgentSpec",
    "AgentState",
    "ConfigError",
    "HubConfig",
    "NewSessionResult",
    "PromptAck",
    "RestartPolicy",
    "SessionSink",
    "ShutdownTimings",
    "Supervisor",
    "UnknownAgent",
    "load_config",
    "parse_agent_arg",
]
