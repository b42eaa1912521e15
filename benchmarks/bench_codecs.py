"""Decoding and encoding snappy, lz4 and zstd record bodies (pure Python,
``storage.codecs``), against gzip (zlib, in C) and against reading the records out of the
decoded body, in the same run.

What a compacted topic's cleaner and key check pay for a batch in these codecs. The body
is records as a producer lays them out (keys, values with repeats), 8 MB by default,
compressed by the greedy compressor the codec tests use (real matches: literal runs,
overlapping copies); gzip is zlib's. zstd's decoding figures are the batches librdkafka
wrote in tests/unit/data/zstd, each file's (``text``: words, the Huffman-coded literals
and FSE-coded sequences of the common case; ``runs``: long matches), against zlib on the
same bytes. ``compress``: what the cleaner's rewrite pays (``codecs.compress``), the
whole body and the body cut into 16 KB batches, against zlib's default level on the same
bytes, with the ratio each reaches. Prints one JSON object; times are the best of
--repeat runs, in seconds.

    .venv/bin/python benchmarks/bench_codecs.py [--mb 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import at_least, best_of, emit

from storage import codecs
from storage.compaction import keyed_records
from storage.records import RecordSpec, build_batch, iter_batches, read_header
from tests.unit.test_codecs import lz4_frame, snappy_raw


def records_body(megabytes: int) -> tuple[bytes, bytearray]:
    """An uncompressed batch of records ``megabytes`` long, and its records body."""
    rng = random.Random(7)
    words = [rng.randbytes(rng.randint(3, 12)).hex().encode() for _ in range(2000)]
    specs: list[RecordSpec] = []
    size = 0
    while size < megabytes * 1_000_000:
        value = b" ".join(rng.choice(words) for _ in range(rng.randint(2, 12)))
        key = b"user-%06d" % rng.randrange(100_000)
        specs.append(RecordSpec(value, key=key))
        size += len(key) + len(value) + 8
    batch = build_batch(specs)
    return bytes(batch[61:]), batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=8)
    parser.add_argument("--repeat", type=at_least(1), default=5)
    args = parser.parse_args()
    body, batch = records_body(args.mb)
    streams = {
        "lz4": (codecs.LZ4, lz4_frame(body)),
        "snappy": (codecs.SNAPPY, snappy_raw(body)),
        "gzip": (codecs.GZIP, codecs.compress(codecs.GZIP, body)),
    }
    result: dict[str, object] = {
        "benchmark": "codecs",
        "what": "decompressing (and compressing) a records body (s), MB/s of the uncompressed body",
        "python": platform.python_version(),
        "body_mb": round(len(body) / 1e6, 2),
    }
    for name, (codec, stream) in streams.items():
        seconds, out = best_of(args.repeat, lambda c=codec, s=stream: codecs.decompress(c, s))
        assert out == body
        result[name] = {
            "compressed_mb": round(len(stream) / 1e6, 2),
            "decompress_s": round(seconds, 4),
            "mb_per_s": round(len(body) / seconds / 1e6, 1),
        }
    fixtures = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data" / "zstd"
    zstd_results = {}
    for path in sorted(fixtures.glob("*.batches")):
        data = path.read_bytes()
        bodies = [
            data[h.position + 61 : h.position + h.size]
            for h in iter_batches(data)
            if h.compression == codecs.ZSTD
        ]
        seconds, decoded = best_of(
            args.repeat, lambda b=bodies: [codecs.decompress(codecs.ZSTD, x) for x in b]
        )
        size = sum(len(d) for d in decoded)
        gzipped = [codecs.compress(codecs.GZIP, d) for d in decoded]
        gzip_s, _ = best_of(
            args.repeat, lambda g=gzipped: [codecs.decompress(codecs.GZIP, x) for x in g]
        )
        zstd_results[path.stem] = {
            "batches": len(bodies),
            "compressed_kb": round(sum(len(b) for b in bodies) / 1e3, 1),
            "decoded_kb": round(size / 1e3, 1),
            "decompress_s": round(seconds, 4),
            "mb_per_s": round(size / seconds / 1e6, 1),
            "gzip_same_bytes_s": round(gzip_s, 5),
            "vs_gzip": round(seconds / gzip_s, 1),
        }
    result["zstd_librdkafka_batches"] = zstd_results
    header = read_header(batch)
    seconds, (_, records) = best_of(args.repeat, lambda: keyed_records(batch, header))
    result["baseline_reading_the_records_s"] = round(seconds, 4)
    result["records"] = len(records)
    for name in ("lz4", "snappy"):
        decode = result[name]["decompress_s"]  # type: ignore[index]
        result[f"{name}_vs_gzip"] = round(decode / result["gzip"]["decompress_s"], 1)  # type: ignore[index]
        result[f"{name}_vs_reading_the_records"] = round(decode / seconds, 2)
    pieces = [body[i : i + 16384] for i in range(0, len(body), 16384)]
    compressed: dict[str, object] = {}
    for name, codec in (
        ("lz4", codecs.LZ4),
        ("snappy", codecs.SNAPPY),
        ("zstd", codecs.ZSTD),
        ("gzip", codecs.GZIP),
    ):
        whole_s, whole = best_of(args.repeat, lambda c=codec: codecs.compress(c, body))
        assert codecs.decompress(codec, whole) == body
        cut_s, cut = best_of(
            args.repeat, lambda c=codec: [codecs.compress(c, piece) for piece in pieces]
        )
        compressed[name] = {
            "compress_s": round(whole_s, 4),
            "mb_per_s": round(len(body) / whole_s / 1e6, 1),
            "ratio": round(len(body) / len(whole), 2),
            "batches_16kb_compress_s": round(cut_s, 4),
            "batches_16kb_mb_per_s": round(len(body) / cut_s / 1e6, 1),
            "batches_16kb_ratio": round(len(body) / sum(len(c) for c in cut), 2),
        }
    gzip_s = compressed["gzip"]["compress_s"]  # type: ignore[index]
    for name in ("lz4", "snappy", "zstd"):
        compressed[f"{name}_vs_gzip"] = round(compressed[name]["compress_s"] / gzip_s, 1)  # type: ignore[index]
    result["compress"] = compressed
    emit(result)


if __name__ == "__main__":
    main()
