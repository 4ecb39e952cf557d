"""The multi-node deployment files run: hubs started from them as compose and Kubernetes start them.

No Docker daemon or cluster runs here, so each container is a plain process given what its
container would get: the command line of ``docker-compose.yml`` (or the pod's ``args``), the
environment it sets, and its mounts mapped to directories of the test. The shipped config file
is read with its container paths (the mounted key, the workspace volume) mapped to those
directories and its port to a free one (each container has its own network); nothing else of
it changes. The Redis topology is the same (one ``redis-server`` with the append-only file, as
the files run it), and the service names the hubs use for it resolve to its port.

For compose, the shipped ``deploy/cluster/nginx.conf`` itself runs in front of the two nodes
(an ``nginx`` binary, as Debian's ``nginx-light`` installs it; ``.ci/run`` installs it), with
its upstream addresses rewritten to the nodes' ports: a client through the proxy starts a
session on one node, a second client through the proxy lands on the other node and watches
the turn the first one plays with the demo agent. For Kubernetes (no kube-proxy here), the two
replicas of ``deploy/k8s`` answer their readiness probe and one watches a turn run on the other.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
import yaml
from anyio.streams.text import TextReceiveStream
from websockets.asyncio.client import connect

from tests.hubproc import stop
from tests.redis_server import RedisServer, free_port
from tests.server.harness import AcpClient, acp_client
from tests.support import ROOT, require_binary

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DEPLOY = ROOT / "deploy"
ACP_HUB = Path(sys.executable).parent / "acp-hub"
LISTENING = re.compile(r"^acp-hub: listening on http://[^:]+:(\d+)$", re.M)
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
MINT = ("--role", "owner", "--agent", "*", "--name", "ops")
IMAGE_HOME = "/home/acp-hub"
"""The image user's home (``deploy/Dockerfile``): its working directory and state."""


@dataclass
class Container:
    """One container of the topology, as a plain process."""

    name: str
    # A container's handle: alike in shape to tests/hubproc.py's HubProcess only.
    process: anyio.abc.Process
    port: int
    log: Path

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _mapped(text: str, paths: Mapping[str, Path]) -> str:
    """``text`` with each container path of ``paths`` replaced by its directory here (longest
    first, so that a mount inside another one wins)."""
    for inside in sorted(paths, key=len, reverse=True):
        text = text.replace(inside, str(paths[inside]))
    return text


def _hub_config(text: str, paths: Mapping[str, Path], port: int) -> str:
    """The shipped hub config file as this container reads it: its mounted paths mapped, its
    port (the container's own) a free one."""
    text, count = re.subn(r"^port = 8765$", f"port = {port}", _mapped(text, paths), flags=re.M)
    assert count == 1, "the config file sets the port the manifests expose"
    return text


def _env(environment: Mapping[str, str], home: Path, hosts: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: the image's (its user's home, an unbuffered Python on
    PATH) and the service's own, with the service names of ``hosts`` resolved. The demo agent
    skips its pauses (``ACP_HUB_DEMO_FAST``) so that the turn is quick."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACP_HUB_")}
    env.update(
        HOME=str(home),
        PYTHONUNBUFFERED="1",
        # The image has the package installed; here the checkout is the package.
        PYTHONPATH=str(ROOT),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        ACP_HUB_DEMO_FAST="1",
    )
    for key, value in environment.items():
        for name, address in hosts.items():
            value = value.replace(f"//{name}/", f"//{address}/")
        env[key] = value
    return env


@asynccontextmanager
async def container(
    name: str, argv: list[str], env: dict[str, str], cwd: Path, port: int
) -> AsyncIterator[Container]:
    """Start ``argv`` (``acp-hub`` as the image's PATH finds it) and wait until it listens and
    its ``/readyz`` answers 200, as the readiness probe waits; killed if still running."""
    log = cwd.parent / f"{name}.log"
    command = [str(ACP_HUB) if argv[0] == "acp-hub" else argv[0], *argv[1:]]
    with log.open("ab") as out:
        process = await anyio.open_process(
            command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stderr=out
        )
    try:
        assert process.stdout is not None
        seen = ""
        with anyio.fail_after(START_TIMEOUT):
            async for text in TextReceiveStream(process.stdout):
                seen += text
                if LISTENING.search(seen):
                    break
        match = LISTENING.search(seen)
        assert match is not None, f"{name} did not start: {seen!r} {log.read_text()}"
        assert int(match.group(1)) == port
        handle = Container(name, process, port, log)
        await _until_ok(f"{handle.http}/readyz")
        yield handle
    finally:
        await stop(process, signal.SIGTERM, STOP_TIMEOUT)  # docker stop, a pod's termination


async def _until_ok(url: str) -> None:
    """Wait until ``GET url`` answers 200 (a probe: retried every 50 ms)."""
    async with httpx.AsyncClient(timeout=5.0) as http:
        with anyio.fail_after(START_TIMEOUT):
            while True:
                try:
                    if (await http.get(url)).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await anyio.sleep(0.05)


async def _upstreams(access_log: Path, count: int) -> list[str]:
    """The upstream of each of the first ``count`` ``/acp`` requests of the proxy's access log
    (nginx writes a WebSocket's line when it closes: polled until they are all there)."""
    with anyio.fail_after(START_TIMEOUT):
        while True:
            lines = [
                line.split()[0]
                for line in (await anyio.Path(access_log).read_text(errors="replace")).splitlines()
                if " /acp" in line
            ]
            if len(lines) >= count:
                return lines[:count]
            await anyio.sleep(0.05)


async def _owner_token(config: Path, env: dict[str, str], cwd: Path) -> str:
    """``acp-hub token --role owner --agent *`` run in a hub's container with its config file."""
    with anyio.fail_after(START_TIMEOUT):
        done = await anyio.run_process(
            [str(ACP_HUB), "token", "--config", str(config), *MINT],
            env=env,
            cwd=cwd,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


async def _play_turn(driver: AcpClient, watcher: AcpClient, cwd: Path) -> None:
    """``driver`` starts a demo session in ``cwd`` and prompts; ``watcher`` follows it
    from the start, and both see the turn end with the edit allowed."""
    session_id = await driver.new_session(cwd=str(cwd))
    await watcher.call(
        "session/resume", {"sessionId": session_id, "cwd": "/", "replayFrom": {"type": "start"}}
    )
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "sort names"}]}
    prompt_id = await driver.start("session/prompt", prompt)
    await driver.wait_for(lambda: bool(driver.requests))
    request = driver.requests[-1]
    assert request["method"] == "session/request_permission"
    allow = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    await driver.answer(request["id"], allow)
    await driver.result(prompt_id)
    for client in (driver, watcher):
        await _turn_ended(client, session_id)
        answer = client.fold(session_id).snapshot()
        assert "I applied the edit" in str(answer), answer


async def _turn_ended(client: AcpClient, session_id: str) -> None:
    await client.wait_for(lambda: client.idle_count(session_id) >= 1)


@asynccontextmanager
async def ingress_client(port: int, host: str, token: str) -> AsyncIterator[AcpClient]:
    """A client reaching a replica at ``127.0.0.1:port`` by the Ingress' host name ``host``
    (its ``Host`` header), initialized; closed on exit."""
    url = f"ws://{host}:{port}/acp?token={token}"
    options: dict[str, Any] = {"host": "127.0.0.1", "port": port}
    async with connect(url, max_size=None, compression=None, ping_interval=None, **options) as ws:
        client = AcpClient(ws, 2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.reader)
            try:
                await client.initialize()
                yield client
            finally:
                await ws.close()
                tg.cancel_scope.cancel()


def _nginx() -> str:
    """nginx (Debian's nginx-light, which `.ci/run` installs), in the PATH or in /usr/sbin."""
    return shutil.which("nginx", path="/usr/sbin") or require_binary("nginx")


@asynccontextmanager
async def nginx(site: str, directory: Path, port: int) -> AsyncIterator[str]:
    """The shipped site config in nginx's ``http`` block, as the nginx image includes
    ``conf.d/default.conf``; the proxy's base URL once it answers."""
    binary = _nginx()
    config = _nginx_config(site, directory)
    process = await anyio.open_process(
        [binary, "-p", str(directory), "-c", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        await _until_ok(f"{base}/healthz")
        yield base
    finally:
        await stop(process, signal.SIGQUIT, STOP_TIMEOUT)  # nginx's graceful stop
        assert "[emerg]" not in (directory / "error.log").read_text(errors="replace")


def _nginx_config(site: str, directory: Path) -> Path:
    """nginx's main config in ``directory``, including ``site`` in its ``http`` block."""
    directory.mkdir()
    (directory / "default.conf").write_text(site)
    main = f"""
        daemon off;
        worker_processes 1;
        user root;
        pid {directory}/nginx.pid;
        error_log {directory}/error.log info;
        events {{ worker_connections 256; }}
        http {{
            log_format upstreams '$upstream_addr "$request" $status';
            access_log {directory}/access.log upstreams;
            client_body_temp_path {directory}/body;
            proxy_temp_path {directory}/proxy;
            include {directory}/default.conf;
        }}
    """
    (directory / "nginx.conf").write_text(main)
    return directory / "nginx.conf"


# -- docker compose -------------------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


async def test_compose_up_serves_a_turn_through_the_proxy(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    compose = _compose()
    services = compose["services"]
    hubs = [name for name, service in services.items() if "acp-hub" in service.get("command", ())]
    assert hubs == ["hub-a", "hub-b"]
    # The operator creates the signing key (the compose file's comment says how).
    key = tmp_path / "signing-key"
    key.write_text(secrets.token_urlsafe(48))
    secret_files = {name: ROOT / s["file"] for name, s in compose["secrets"].items()}
    assert secret_files == {"acp-hub-key": ROOT / "deploy/cluster/signing-key"}
    workspace = tmp_path / "volume-workspace"  # a named volume: the same for both nodes
    workspace.mkdir()
    redis_host = f"127.0.0.1:{redis_server.port}"
    redis_name = "redis:6379"  # the service name and its port, as the nodes' store URL has it
    assert services["redis"]["command"][:3] == ["redis-server", "--appendonly", "yes"]

    ports = {name: free_port() for name in hubs}
    configs: dict[str, Path] = {}
    async with AsyncExitStack() as stack:
        nodes: dict[str, Container] = {}
        envs: dict[str, dict[str, str]] = {}
        for name in hubs:
            service = services[name]
            root = tmp_path / name
            home = root / "home"
            home.mkdir(parents=True)
            paths: dict[str, Path] = {IMAGE_HOME: home}
            files: dict[str, Path] = {}
            for volume in service["volumes"]:
                source, inside = volume.split(":")[:2]
                if source.startswith("./"):
                    files[inside] = ROOT / source
                else:
                    assert compose["volumes"][source] is None, source
                    paths[inside] = workspace
            for secret in service["secrets"]:
                paths[f"/run/secrets/{secret}"] = key
            config = root / "acp-hub.toml"
            (inside_config,) = files
            config.write_text(_hub_config(files[inside_config].read_text(), paths, ports[name]))
            paths[inside_config] = config
            configs[name] = config
            argv = [_mapped(arg, paths) for arg in service["command"]]
            envs[name] = _env(service["environment"], home, {redis_name: redis_host})
            nodes[name] = await stack.enter_async_context(
                container(name, argv, envs[name], home, ports[name])
            )

        proxy = services["proxy"]
        (published,) = proxy["ports"]
        assert published == "127.0.0.1:8765:8765"
        (mount,) = proxy["volumes"]
        site_file = ROOT / mount.split(":")[0]
        site = site_file.read_text()
        proxy_port = free_port()
        for name in hubs:
            site, count = re.subn(
                rf"\bserver {name}:8765;", f"server 127.0.0.1:{ports[name]};", site
            )
            assert count == 1, name
        site, count = re.subn(r"\blisten 8765;", f"listen 127.0.0.1:{proxy_port};", site)
        assert count == 1
        base = await stack.enter_async_context(nginx(site, tmp_path / "nginx", proxy_port))

        token = await _owner_token(configs["hub-a"], envs["hub-a"], tmp_path / "hub-a" / "home")
        url = f"{base.replace('http', 'ws', 1)}/acp?token={token}"
        async with acp_client(url) as driver, acp_client(url) as watcher:
            project = workspace / "project"
            project.mkdir()
            await _play_turn(driver, watcher, project)
        # No stickiness: the proxy spread the two clients over the two nodes.
        served = await _upstreams(tmp_path / "nginx" / "access.log", 2)
        assert sorted(served) == sorted(f"127.0.0.1:{ports[name]}" for name in hubs), served

        for node in nodes.values():
            assert "Traceback" not in node.output(), node.output()


# -- Kubernetes -----------------------------------------------------------------------------------


def _manifests() -> dict[tuple[str, str], dict[str, Any]]:
    """Every resource ``kubectl apply -k deploy/k8s`` creates, by (kind, name)."""
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / "k8s" / resource).read_text()):
            if doc:
                found[(doc["kind"], doc["metadata"]["name"])] = doc
    return found


async def test_kubectl_apply_runs_two_ready_replicas_on_one_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    found = _manifests()
    deployment = found[("Deployment", "acp-hub")]
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (hub,) = pod["containers"]
    env = {e["name"]: e["value"] for e in hub["env"]}
    redis_service = found[("Service", "acp-hub-redis")]
    assert redis_service["spec"]["ports"][0]["port"] == 6379
    redis_name = f"{redis_service['metadata']['name']}:6379"
    hosts = {redis_name: f"127.0.0.1:{redis_server.port}"}
    probe = hub["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz"
    assert probe["port"] == "http"
    (container_port,) = hub["ports"]
    assert container_port["containerPort"] == 8765
    volumes = {v["name"]: v for v in pod["volumes"]}

    async with AsyncExitStack() as stack:
        replicas: list[Container] = []
        configs: list[Path] = []
        envs: list[dict[str, str]] = []
        for index in range(spec["replicas"]):
            root = tmp_path / f"pod-{index}"
            home = root / "home"
            home.mkdir(parents=True)
            paths: dict[str, Path] = {IMAGE_HOME: home}
            port = free_port()
            config_text: tuple[str, str] | None = None
            for mount in hub["volumeMounts"]:
                volume = volumes[mount["name"]]
                inside = mount["mountPath"]
                if "configMap" in volume:
                    data = found[("ConfigMap", volume["configMap"]["name"])]["data"]
                    config_text = (inside, data[mount["subPath"]])
                elif "secret" in volume:
                    secret = found[("Secret", volume["secret"]["secretName"])]
                    directory = root / mount["name"]
                    directory.mkdir()
                    for file, value in secret["stringData"].items():
                        (directory / file).write_text(value)
                        (directory / file).chmod(volume["secret"]["defaultMode"])
                    paths[inside] = directory
                else:
                    assert volume["emptyDir"] == {}, volume
                    directory = root / mount["name"]
                    directory.mkdir()
                    paths[inside] = directory
            assert config_text is not None
            config = root / "acp-hub.toml"
            config.write_text(_hub_config(config_text[1], paths, port))
            paths[config_text[0]] = config
            configs.append(config)
            argv = [_mapped(arg, paths) for arg in hub["args"]]
            envs.append(_env(env, home, hosts))
            replicas.append(
                await stack.enter_async_context(
                    container(f"pod-{index}", argv, envs[-1], home, port)
                )
            )
        assert len(replicas) == 2

        token = await _owner_token(configs[0], envs[0], tmp_path / "pod-0" / "home")
        # The Ingress' Host: the name allowed_hosts lists.
        config = yaml.safe_load((DEPLOY / "k8s" / "configmap.yaml").read_text())
        assert 'allowed_hosts = ["acp-hub.example.com"]' in config["data"]["acp-hub.toml"]
        host = "acp-hub.example.com"
        a, b = replicas
        driver = await stack.enter_async_context(ingress_client(a.port, host, token))
        watcher = await stack.enter_async_context(ingress_client(b.port, host, token))
        project = tmp_path / "pod-0" / "workspace" / "project"
        project.mkdir()
        await _play_turn(driver, watcher, project)
        for replica in replicas:
            assert "Traceback" not in replica.output(), replica.output()
