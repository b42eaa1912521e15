"""The generated schema module: up to date with the JSON schemas, complete, consistent."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from wire.api import VERSION_RANGES, ApiKey, request_spec, response_spec
from wire.schema_types import FieldSpec, parse_versions, snake_case
from wire.schemas import MESSAGES

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / ".." / "shared" / "reference" / "kafka-protocol"
GENERATOR = ROOT / "tools" / "gen_wire_schemas.py"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_wire_schemas", GENERATOR)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_committed_module_is_current_or_at_least_complete(tmp_path: Path) -> None:
    committed = (ROOT / "wire" / "schemas.py").read_text(encoding="utf-8")
    if SOURCE.is_dir():
        out = tmp_path / "schemas.py"
        result = subprocess.run(
            [sys.executable, str(GENERATOR), "--output", str(out)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,  # only catches a hang
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr
        assert out.read_text(encoding="utf-8") == committed, (
            "wire/schemas.py is stale: run .venv/bin/python tools/gen_wire_schemas.py"
        )
        assert len(MESSAGES) == len(list(SOURCE.glob("*.json")))
    # Without the schema sources, the committed module must still describe every API.
    for key in ApiKey:
        assert request_spec(key).api_key == key
        assert response_spec(key).api_key == key
        assert request_spec(key).valid_versions == response_spec(key).valid_versions
    assert {"RequestHeader", "ResponseHeader"} <= set(MESSAGES)


def test_every_api_key_in_the_schemas_is_in_the_enum() -> None:
    keys = {spec.api_key for spec in MESSAGES.values() if spec.api_key is not None}
    assert keys == {int(key) for key in ApiKey}
    for spec in MESSAGES.values():
        if spec.api_key is not None:
            assert ApiKey(spec.api_key).name.replace("_", "") + spec.type.upper() == (
                spec.name.upper()
            )


def test_version_ranges() -> None:
    assert VERSION_RANGES[ApiKey.LEADER_AND_ISR] == (0, 7)
    assert VERSION_RANGES[ApiKey.UPDATE_METADATA] == (0, 8)
    assert VERSION_RANGES[ApiKey.API_VERSIONS] == (0, 3)
    assert VERSION_RANGES[ApiKey.FETCH] == (0, 16)
    assert set(VERSION_RANGES) == set(ApiKey)


def test_common_structs_are_resolved() -> None:
    spec = MESSAGES["LeaderAndIsrRequest"]
    assert spec.common_structs == ("LeaderAndIsrPartitionState",)
    by_name = {f.name: f for f in spec.fields}
    ungrouped = by_name["UngroupedPartitionStates"]
    grouped = {f.name: f for f in by_name["TopicStates"].fields}["PartitionStates"]
    assert ungrouped.fields is grouped.fields
    assert [f.name for f in grouped.fields][:3] == [
        "TopicName",
        "PartitionIndex",
        "ControllerEpoch",
    ]


def test_field_attributes_survive() -> None:
    fetch = {f.name: f for f in MESSAGES["FetchRequest"].fields}
    cluster = fetch["ClusterId"]
    assert (cluster.tag, cluster.tagged_versions, cluster.nullable_versions) == (0, "12+", "12+")
    assert cluster.default == "null"
    assert cluster.ignorable
    assert fetch["MaxBytes"].default == "0x7fffffff"
    assert fetch["ReplicaId"].entity_type == "brokerId"
    client_id = {f.name: f for f in MESSAGES["RequestHeader"].fields}["ClientId"]
    assert client_id.flexible_versions == "none"
    assert MESSAGES["FetchRequest"].deprecated_versions == "0-3"
    assert MESSAGES["ApiVersionsResponse"].fields[1].fields[0].map_key


def test_version_syntax() -> None:
    assert 5 in parse_versions("3+")
    assert 2 not in parse_versions("3+")
    assert 7 in parse_versions("3-7")
    assert 8 not in parse_versions("3-7")
    assert 0 in parse_versions("0")
    assert 1 not in parse_versions("0")
    assert parse_versions("none").empty
    assert 0 not in parse_versions("none")
    assert [str(parse_versions(s)) for s in ("3+", "3-7", "0", "none")] == [
        "3+",
        "3-7",
        "0",
        "none",
    ]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("ControllerEpoch", "controller_epoch"),
        ("TopicId", "topic_id"),
        ("Isr", "isr"),
        ("ISR", "isr"),
        ("isKRaftController", "is_kraft_controller"),
        ("V0Host", "v0_host"),
        ("timeoutMs", "timeout_ms"),
        ("HTTPServer", "http_server"),
        ("ThrottleTimeMs", "throttle_time_ms"),
    ],
)
def test_snake_case(name: str, key: str) -> None:
    assert snake_case(name) == key


def test_keys_are_unique_in_every_struct() -> None:
    def check(fields: tuple[FieldSpec, ...], where: str) -> None:
        keys = [f.key for f in fields]
        assert len(keys) == len(set(keys)), where
        for f in fields:
            if f.fields:
                check(f.fields, f"{where}.{f.name}")

    for spec in MESSAGES.values():
        check(spec.fields, spec.name)


def test_generator_strips_comments_but_not_urls_in_strings() -> None:
    gen = load_generator()
    text = '{\n  // a comment\n  "about": "see http://x//y", // trailing\n  "q": "a\\"//b"\n}'
    assert gen.strip_comments(text) == (
        '{\n  \n  "about": "see http://x//y", \n  "q": "a\\"//b"\n}'
    )


def test_generator_rejects_unknown_keys(tmp_path: Path) -> None:
    gen = load_generator()
    bad = tmp_path / "BadRequest.json"
    bad.write_text(
        '{"apiKey": 99, "type": "request", "name": "BadRequest", "validVersions": "0",'
        ' "flexibleVersions": "none", "fields": [{"name": "X", "type": "int8",'
        ' "versions": "0+", "surprise": 1}]}'
    )
    with pytest.raises(gen.SchemaError, match="surprise"):
        gen.generate(tmp_path, "x")
