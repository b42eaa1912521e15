"""Kafka framing: size prefix, request and response headers, and header version choice.

On the wire every request and response is `int32 size` followed by `size` bytes. The
`encode_*` functions here return whole frames, size prefix included; the `decode_*`
functions take the `size` bytes after the prefix (what a reader gets after reading the
prefix and then that many bytes). `frame_size` reads a prefix.

Header versions, as Kafka chooses them:
  * request header v2 for a flexible request version, else v1; ControlledShutdown v0 uses
    v0 (it predates the client id);
  * response header v1 for a flexible response version, else v0; ApiVersions responses
    always use v0, so a client can read the error in a response to a version the broker
    does not know.

Header dicts (from `wire.schemas`' RequestHeader): `request_api_key`, `request_api_version`,
`correlation_id`, `client_id` ("" in v0, which has none; None if sent as null).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final

from wire.api import ApiKey, request_spec, response_spec
from wire.codec import Body, Codec, get_codec
from wire.errors import DecodeError, UnsupportedVersionError

__all__ = [
    "MAX_FRAME_SIZE",
    "EncodedBody",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_frame",
    "frame_size",
    "request_codec",
    "request_header_version",
    "response_codec",
    "response_header_version",
]

# Kafka's default socket.request.max.bytes; a bigger prefix is garbage, not a request.
MAX_FRAME_SIZE: Final = 100 * 1024 * 1024

_SIZE = struct.Struct(">i")
_KEY_AND_VERSION = struct.Struct(">hh")


class EncodedBody:
    """A request body this codec already encoded for one API key and version: a body sent
    to several brokers is encoded once (see controller.request_batch)."""

    __slots__ = ("api_key", "api_version", "data")

    def __init__(self, api_key: int, api_version: int, data: bytes | bytearray) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.data = data

    def __repr__(self) -> str:
        return f"EncodedBody(api_key={self.api_key}, v{self.api_version}, {len(self.data)} bytes)"


def request_codec(api_key: int, api_version: int) -> Codec:
    """The body codec of a request (KeyError for an unknown API key; UnsupportedVersionError
    for a version outside the schema's valid versions)."""
    return get_codec(request_spec(api_key).name, api_version)


def response_codec(api_key: int, api_version: int) -> Codec:
    """The body codec of a response (errors as for `request_codec`)."""
    return get_codec(response_spec(api_key).name, api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for an API version (any version, even one newer than ours:
    flexibility is open-ended in the schemas). KeyError for an unknown API key."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if request_spec(api_key).flexible_in(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version for an API version. KeyError for an unknown API key."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if response_spec(api_key).flexible_in(api_version) else 0


def frame_size(prefix: bytes | bytearray | memoryview, max_size: int = MAX_FRAME_SIZE) -> int:
    """The size in a 4-byte frame prefix; DecodeError if negative or above `max_size`."""
    if len(prefix) < 4:
        raise DecodeError(f"a frame size needs 4 bytes, got {len(prefix)}")
    (size,) = _SIZE.unpack_from(prefix, 0)
    if size < 0 or size > max_size:
        raise DecodeError(f"frame size {size} is outside 0..{max_size}")
    return int(size)


def _finish(out: bytearray) -> bytearray:
    _SIZE.pack_into(out, 0, len(out) - 4)
    return out


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any] | EncodedBody,
) -> bytes:
    """A size-prefixed request frame. EncodeError or UnsupportedVersionError if the body or
    version cannot be encoded; KeyError for an unknown API key; ValueError for an encoded
    body of another API key or version."""
    codec = request_codec(api_key, api_version)
    header = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    out = bytearray(4)
    get_codec("RequestHeader", request_header_version(api_key, api_version)).encode_into(
        header, out
    )
    if isinstance(body, EncodedBody):
        if (body.api_key, body.api_version) != (api_key, api_version):
            raise ValueError(
                f"a body encoded for api key {body.api_key} v{body.api_version} "
                f"sent as api key {api_key} v{api_version}"
            )
        out += body.data
    else:
        codec.encode_into(body, out)
    return bytes(_finish(out))


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[Body, int]:
    """Decode a request's header; returns it and the offset of the body.

    Works for any version of a known API, a negative one too (as Kafka's
    RequestHeader.parse), so a broker can answer an ApiVersions version it does not support
    with UNSUPPORTED_VERSION; refusing another API's is the caller's. DecodeError for an
    unknown API key or a bad header."""
    if len(frame) < _KEY_AND_VERSION.size:
        raise DecodeError(f"request of {len(frame)} bytes is too short for a header")
    api_key, api_version = _KEY_AND_VERSION.unpack_from(frame, 0)
    try:
        version = request_header_version(api_key, api_version)
    except KeyError:
        raise DecodeError(f"unknown API key {api_key}") from None
    # A client id that is not UTF-8 is read with U+FFFD, as Kafka reads it (the codec
    # decodes every string so), and the request served.
    return get_codec("RequestHeader", version).decode_from(frame, 0)


def decode_request_body(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview, offset: int
) -> Body:
    """Decode the body that starts at `offset` and runs to the end of the frame.
    UnsupportedVersionError if the version is outside the schema's; DecodeError if bad."""
    try:
        codec = request_codec(api_key, api_version)
    except KeyError:
        raise DecodeError(f"unknown API key {api_key}") from None
    return _decode_body(codec, frame, offset)


def _decode_body(codec: Codec, frame: bytes | bytearray | memoryview, offset: int) -> Body:
    body, end = codec.decode_from(frame, offset)
    if end != len(frame):
        raise DecodeError(f"{codec.label}: {len(frame) - end} unexpected bytes after the body")
    return body


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> bytes:
    """A size-prefixed response frame (errors as for `encode_request`)."""
    return bytes(encode_response_frame(api_key, api_version, correlation_id, body))


def encode_response_frame(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> bytearray:
    """`encode_response` without its final copy: the buffer the frame was encoded in, for
    a caller that only sends it (a fetch response's records are most of its bytes)."""
    codec = response_codec(api_key, api_version)
    out = bytearray(4)
    get_codec("ResponseHeader", response_header_version(api_key, api_version)).encode_into(
        {"correlation_id": correlation_id}, out
    )
    codec.encode_into(body, out)
    return _finish(out)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Body]:
    """Decode a response frame (without its size prefix) to (correlation id, body).

    A broker that does not support the ApiVersions version asked for answers in v0 (with
    UNSUPPORTED_VERSION and its own range), so as Kafka's clients do, an ApiVersions
    response that does not parse at the version asked for is read again as v0."""
    header_codec = get_codec("ResponseHeader", response_header_version(api_key, api_version))
    header, offset = header_codec.decode_from(frame, 0)
    try:
        codec = response_codec(api_key, api_version)
    except KeyError:
        raise DecodeError(f"unknown API key {api_key}") from None
    except UnsupportedVersionError as exc:
        raise DecodeError(str(exc)) from None
    try:
        body = _decode_body(codec, frame, offset)
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        body = response_codec(api_key, 0).decode(memoryview(frame)[offset:])
    return int(header["correlation_id"]), body
