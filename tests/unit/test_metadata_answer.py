"""The Metadata answer (KafkaApis over the metadata cache), against Kafka 2.8's
KafkaApis.handleTopicMetadataRequest."""

from __future__ import annotations

from typing import Any, cast

import pytest

from broker.apis import KafkaApis
from broker.metadata_cache import MetadataCache
from broker.state_change_log import StateChangeLog
from tests.unit.test_metadata_cache import request, state
from wire.api import ApiKey
from wire.errors import ErrorCode
from wire.protocol import request_codec, response_codec


def apis(*, informed: bool = True) -> KafkaApis:
    cache = MetadataCache(1)
    if informed:
        cache.update(request(("t", [state(0, 1)])))
    none = cast(Any, None)
    return KafkaApis(1, cache, none, none, StateChangeLog(None, 1), lambda: 10, metadata_wait_s=0)


def metadata(a: KafkaApis, version: int, body: dict[str, Any]) -> dict[str, Any]:
    """The answer to ``body`` at ``version``, both through the wire's codecs."""
    codec = request_codec(ApiKey.METADATA, version)
    answer = a.handle(ApiKey.METADATA, version, {}, codec.decode(bytes(codec.encode(body))))
    assert answer is not None
    out = response_codec(ApiKey.METADATA, version)
    decoded: dict[str, Any] = out.decode(bytes(out.encode(answer)))
    return decoded


INVALID = ["", ".", "..", "bad name!", "x" * 250, "caf\u00e9"]


@pytest.mark.parametrize("informed", [True, False])
@pytest.mark.parametrize("version", [1, 4, 9, 12])
def test_a_topic_name_no_topic_can_have_is_invalid_topic_exception(
    version: int, informed: bool
) -> None:
    """Kafka's getTopicMetadata answers a missing topic that Topic.validate refuses
    INVALID_TOPIC_EXCEPTION (the Java producer fails at once; UNKNOWN_TOPIC_OR_PARTITION
    makes it wait max.block.ms), an empty name included (it was dropped from the answer),
    whatever the broker knows yet."""
    body: dict[str, Any] = {"topics": [{"name": n} for n in [*INVALID, "t", "valid-but-absent"]]}
    if version >= 4:
        body["allow_auto_topic_creation"] = False
    answer = metadata(apis(informed=informed), version, body)
    codes = {t["name"]: t["error_code"] for t in answer["topics"]}
    missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if informed else ErrorCode.LEADER_NOT_AVAILABLE
    assert codes == {
        **dict.fromkeys(INVALID, ErrorCode.INVALID_TOPIC_EXCEPTION),
        "t": ErrorCode.NONE if informed else ErrorCode.LEADER_NOT_AVAILABLE,
        "valid-but-absent": missing,
    }
