"""A response frame is sent without a final copy of the encoded bytes."""

from __future__ import annotations

from wire.api import ApiKey
from wire.protocol import encode_response, encode_response_frame


def test_the_response_frame_is_the_response_without_a_copy() -> None:
    body = {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}
    frame = encode_response_frame(ApiKey.API_VERSIONS, 3, 7, body)
    assert isinstance(frame, bytearray)
    assert frame == encode_response(ApiKey.API_VERSIONS, 3, 7, body)
