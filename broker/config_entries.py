"""Configs as Kafka's admin APIs describe them (DescribeConfigs, CreateTopics v5+): each key
with its value, where the value comes from, the values beneath it (synonyms), its type
and its documentation. Pure functions over broker/config.py's tables."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from broker.config import (
    BROKER_CONFIG_DEFS,
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigDef,
    ConfigType,
    parse_broker_value,
    parse_topic_value,
    topic_config_defaults,
)

# ConfigSource, as DescribeConfigs numbers them.
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6
# The root logger's name, as Kafka's Log4jController (and Python's logging) call it.
ROOT_LOGGER = "root"

# DescribeConfigs v3+'s ConfigType.
_TYPES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
}

# Broker keys that set one value, the first given winning (broker/config.py resolves
# them): Kafka 2.8's DynamicBrokerConfig.brokerConfigSynonyms gives any key of a group the
# whole group. log.flush.scheduler.interval.ms is only log.flush.interval.ms' default:
# it is matched on log.flush.interval.ms alone.
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_FLUSH_SYNONYMS = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")

# Keys Kafka 2.8's KafkaConfig defines with a null default that have one here:
# PLAINTEXT://:9092 is what Kafka makes of listeners unset (from port), not its default.
_NULL_IN_KAFKA = frozenset({"listeners"})


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    # The values beneath this one, most specific first: (name, value, source).
    synonyms: tuple[tuple[str, str | None, int], ...]
    type: int
    doc: str | None

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


def config_text(value: Any) -> str | None:
    """A typed value as Kafka shows it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        # listener.security.protocol.map, a STRING in Kafka: NAME:PROTOCOL,...
        return ",".join(f"{k}:{v}" for k, v in value.items())
    if isinstance(value, tuple | list):
        # a LIST, or listeners (Listener's str is NAME://host:port)
        return ",".join(map(str, value))
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """Java's Double.toString (ConfigDef.convertToString of a DOUBLE): plain from 10^-3 to
    10^7, else d.dddE<exponent>."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # "0.5", "-0.0", "1234.0": Python's shortest digits, as Java's
    shortest = Decimal(repr(value))
    digits = "".join(map(str, shortest.as_tuple().digits)).rstrip("0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{shortest.adjusted()}"


def _override_text(key: str, stored: str) -> str:
    """A topic override as Kafka 2.8's createTopicConfigEntry answers it: convertToString
    of the value LogConfig parsed ("TRUE" is "true", "0.50" is "0.5", "delete, compact" is
    "delete,compact"). One that does not parse (stored by another tool; Kafka would fail
    the whole resource) is answered as stored."""
    try:
        text = config_text(parse_topic_value(key, stored))
    except ValueError:
        return stored
    return stored if text is None else text


def _sensitive(name: str) -> bool:
    return "password" in name


def topic_entries(broker: BrokerConfig | None, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """A topic's configs: its own overrides, else the broker's value of each key's
    synonym (from the broker's file, or Kafka's default). Each lists the values beneath
    it, as Kafka's synonyms do: the topic's, then ``_broker_synonyms``."""
    originals = broker.originals if broker is not None else {}
    entries: list[ConfigEntry] = []
    for key, resolved in topic_config_defaults(broker).items():
        definition = TOPIC_CONFIGS[key]
        synonym = definition.synonym
        below = [] if synonym is None else _broker_synonyms(synonym, originals)
        value: str | None
        if key in overrides:
            value, source = _override_text(key, overrides[key]), TOPIC_CONFIG
            below = [(key, value, TOPIC_CONFIG), *below]
        else:
            # The synonym as the broker resolved it (log.retention.hours -> retention.ms),
            # whatever source is answered (Kafka's LogConfig value).
            value = config_text(resolved)
            source = below[0][2] if below else DEFAULT_CONFIG
        entries.append(_entry(definition, value, source, tuple(below), read_only=False))
    return entries


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys whose values a broker key's synonyms list, in Kafka 2.8's order
    (DynamicBrokerConfig.brokerConfigSynonyms)."""
    if name == _FLUSH_SYNONYMS[0]:
        return _FLUSH_SYNONYMS
    return next((group for group in _SYNONYM_GROUPS if name in group), (name,))


def kafka_default(name: str) -> Any:
    """A broker key's default as Kafka 2.8 defines it; None for null (or required)."""
    definition = BROKER_CONFIGS[name]
    return None if definition.required or name in _NULL_IN_KAFKA else definition.default


def _broker_synonyms(name: str, originals: Mapping[str, str]) -> list[tuple[str, str | None, int]]:
    """The broker values beneath a broker key (or a topic key's broker synonym), as Kafka
    2.8's ConfigHelper.configSynonyms lists them: each of broker_config_synonyms' keys set
    in the broker's file, then each one's default (staticDefaultConfigs has none of a key
    whose default is null), then dropWhile(_ != name). A key of the file is listed above
    its default; the fallback-only keys (log.retention.ms, log.roll.ms, ...) have no
    default, so unless the key itself is set the whole list goes: retention.ms is
    DEFAULT_CONFIG (kafka-topics.sh does not show it as an override) even when
    log.retention.hours is in the broker's file."""
    chain = broker_config_synonyms(name)
    found: list[tuple[str, str | None, int]] = [
        (k, originals[k], STATIC_BROKER_CONFIG) for k in chain if k in originals
    ]
    found += [
        (k, config_text(kafka_default(k)), DEFAULT_CONFIG)
        for k in chain
        if kafka_default(k) is not None
    ]
    names = [n for n, _v, _s in found]
    return found[names.index(name) :] if name in names else []


def broker_entries(broker: BrokerConfig) -> list[ConfigEntry]:
    """A broker's own configs (Kafka 2.8's createBrokerConfigEntry), read-only here:
    there are no dynamic broker configs. A key's value is its own (nonInternalValues), not
    the one resolved through its fallbacks: null unless it is in the file or has a
    default."""
    entries: list[ConfigEntry] = []
    for definition in BROKER_CONFIG_DEFS:
        key = definition.name
        given = key in broker.originals
        if definition.internal and not given:
            continue  # Kafka's allConfigs: originals and nonInternalValues only
        value = (
            config_text(_own_value(broker, key))
            if given or kafka_default(key) is not None
            else None
        )
        below = tuple(_broker_synonyms(key, broker.originals))
        source = below[0][2] if below else DEFAULT_CONFIG
        entries.append(_entry(definition, value, source, below, read_only=True))
    return entries


def logger_entries(levels: Mapping[str, str]) -> list[ConfigEntry]:
    """A broker's loggers as Kafka 2.8's ConfigHelper describes a BROKER_LOGGER resource
    (Log4jController.loggers): each logger's level, DYNAMIC_BROKER_LOGGER_CONFIG, not
    read-only, with no synonyms, type or documentation. ``levels``: logger -> level."""
    return [
        ConfigEntry(name, level, DYNAMIC_BROKER_LOGGER_CONFIG, False, False, (), 0, None)
        for name, level in levels.items()
    ]


def _own_value(broker: BrokerConfig, key: str) -> Any:
    """A broker key's own value (Kafka's nonInternalValues): log.retention.ms as given,
    where the broker resolves a negative one to -1 (KafkaConfig.logRetentionTimeMillis,
    which its logs follow)."""
    if key == "log.retention.ms" and key in broker.originals:
        return parse_broker_value(key, broker.originals[key])
    return broker.get(key)


def _entry(
    definition: ConfigDef,
    value: str | None,
    source: int,
    synonyms: tuple[tuple[str, str | None, int], ...],
    *,
    read_only: bool,
) -> ConfigEntry:
    sensitive = _sensitive(definition.name)
    if sensitive:
        value = None
        synonyms = tuple((n, None, s) for n, _v, s in synonyms)
    return ConfigEntry(
        definition.name,
        value,
        source,
        read_only,
        sensitive,
        synonyms,
        _TYPES.get(definition.type, 0),
        definition.doc,
    )


def describe_configs_row(
    entry: ConfigEntry, version: int, *, synonyms: bool, documentation: bool
) -> dict[str, Any]:
    """One config of a DescribeConfigs result, in the fields of ``version``."""
    row: dict[str, Any] = {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_sensitive": entry.sensitive,
    }
    if version == 0:
        row["is_default"] = entry.is_default
    else:
        row["config_source"] = entry.source
        row["synonyms"] = (
            [{"name": n, "value": v, "source": s} for n, v, s in entry.synonyms] if synonyms else []
        )
    if version >= 3:
        row["config_type"] = entry.type
        row["documentation"] = entry.doc if documentation else None
    return row


def create_topics_row(entry: ConfigEntry) -> dict[str, Any]:
    """One config of a CreateTopics v5+ result."""
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": entry.sensitive,
    }
