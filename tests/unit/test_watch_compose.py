"""compose/ stays in step with the code, although CI has no Docker engine to run it: the
brokers' configs load with the broker's own config loader, the services and the CLI
commands the compose file and the README use exist and parse."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from broker.config import load_broker_config
from cluster.zookeeper import CONTAINER_IMAGE
from zkctl.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose"
COMPOSE_FILE = COMPOSE / "docker-compose.yml"


def compose_text() -> str:
    return COMPOSE_FILE.read_text()


def services() -> dict[str, str]:
    """Service name -> its block of the compose file (two-space indented keys)."""
    text = compose_text()
    body = text.split("\nservices:\n", 1)[1].split("\nvolumes:\n", 1)[0]
    blocks = re.split(r"\n(?=  [a-z0-9-]+:\n)", "\n" + body)
    out = {}
    for block in blocks:
        m = re.match(r"\s*([a-z0-9-]+):\n", block)
        if m:
            out[m.group(1)] = block
    return out


def flow_list(block: str, key: str) -> list[str]:
    m = re.search(rf"^\s+{key}: (\[.*\])$", block, re.MULTILINE)
    assert m, f"no {key} in {block}"
    return list(json.loads(m.group(1)))


def test_zookeeper_is_the_image_the_project_uses_everywhere() -> None:
    assert f"image: {CONTAINER_IMAGE}" in services()["zookeeper"]


@pytest.mark.parametrize("broker_id", [1, 2, 3])
def test_each_broker_config_loads_and_matches_its_service(broker_id: int) -> None:
    service = f"broker{broker_id}"
    block = services()[service]
    assert "<<: *broker" in block
    mount = re.search(r"- \./config/(\S+):/config/server\.properties:ro", block)
    assert mount, block
    config = load_broker_config(COMPOSE / "config" / mount.group(1))
    assert config.broker_id == broker_id
    assert config.zookeeper_connect.split("/")[0] == "zookeeper:2181"
    # The brokers reach each other at the service name; host clients at the published port.
    assert config.inter_broker_listener_name == "INTERNAL"
    advertised = config.advertised_listener()
    assert (advertised.host, advertised.port) == (service, 9092)
    external = config.advertised_listener("EXTERNAL")
    port = 19090 + broker_id
    assert (external.host, external.port) == ("127.0.0.1", port)
    assert config.listener("EXTERNAL").port == port
    assert f'- "127.0.0.1:{port}:{port}"' in block
    assert config.log_dirs == ("/data",)
    assert re.search(rf"- {service}-data:/data$", block, re.MULTILINE)


def test_every_file_in_compose_config_is_one_broker_service() -> None:
    """A broker file added to compose/config (or a broker service added to the compose
    file) is loaded too: every file is mounted by exactly one service built from the
    broker anchor, every such service mounts one, and their broker ids differ."""
    mounted: dict[str, str] = {}
    for name, block in services().items():
        mount = re.search(r"- \./config/(\S+):/config/server\.properties:ro", block)
        assert ("<<: *broker" in block) == (mount is not None), name
        if mount:
            assert mount.group(1) not in mounted, f"{name} and {mounted[mount.group(1)]}"
            mounted[mount.group(1)] = name
    files = sorted(p.name for p in (COMPOSE / "config").glob("*.properties"))
    assert sorted(mounted) == files
    ids = [load_broker_config(COMPOSE / "config" / f).broker_id for f in files]
    assert len(set(ids)) == len(ids), ids
    assert sorted(mounted.values()) == [f"broker{i}" for i in sorted(ids)]


def test_zookeeper_keeps_its_data_in_named_volumes() -> None:
    """The brokers' data outlives a `down` in named volumes: ZooKeeper's must too, or the
    next `up` starts it empty under a new cluster id, which every broker refuses."""
    block = services()["zookeeper"]
    mounts = re.findall(r"^\s+- ([a-z0-9-]+):(/\S+)$", block, re.MULTILINE)
    assert {path for _, path in mounts} == {"/data", "/datalog"}, block
    declared = re.findall(r"^  ([a-z0-9-]+):$", compose_text().split("\nvolumes:\n", 1)[1], re.M)
    for name, _ in mounts:
        assert name in declared


def test_the_image_runs_a_broker_from_the_mounted_config() -> None:
    dockerfile = (COMPOSE / "Dockerfile").read_text()
    assert re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE) == ["python:3.11-slim"]
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.MULTILINE)
    assert entry
    assert json.loads(entry.group(1)) == ["python", "-m", "broker", "/config/server.properties"]
    assert (ROOT / "broker" / "__main__.py").exists()
    assert "uv sync --frozen --no-dev" in dockerfile
    assert "dockerfile: compose/Dockerfile" in compose_text()


def zkctl_argv(args: list[str]) -> None:
    """Parse as the zkctl CLI does; a bad command or option fails the test."""
    try:
        build_parser().parse_args(args)
    except SystemExit as e:
        pytest.fail(f"zkctl {shlex.join(args)}: not a valid command (exit {e.code})")


def test_the_cli_service_runs_valid_zkctl_commands() -> None:
    block = services()["zkctl"]
    entrypoint = flow_list(block, "entrypoint")
    assert entrypoint[0] == "zkctl"
    zkctl_argv([*entrypoint[1:], *flow_list(block, "command")])


def test_the_readme_commands_use_existing_services_and_valid_zkctl_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Running in containers", 1)[1].split("\n## ", 1)[0]
    commands = [
        line.strip().split("#", 1)[0].strip()
        for line in section.splitlines()
        if line.strip().startswith("docker compose")
    ]
    assert len(commands) >= 4, section
    names = set(services())
    entrypoint = flow_list(services()["zkctl"], "entrypoint")
    for command in commands:
        words = shlex.split(command)
        assert words[:4] == ["docker", "compose", "-f", "compose/docker-compose.yml"], command
        action, rest = words[4], words[5:]
        if action == "run":
            assert rest[:2] == ["--rm", "zkctl"], command
            zkctl_argv([*entrypoint[1:], *rest[2:]])
        elif action in ("kill", "stop", "start", "pause", "unpause", "restart"):
            assert rest
            assert set(rest) <= names, command
        else:
            assert action in ("up", "down", "build", "logs"), command
