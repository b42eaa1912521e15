"""Where the logs are: `--logs [NAME=]PATH` arguments resolved to clusters and files.

Each argument is one cluster (controller epochs are per cluster, so two clusters' logs must
never be analysed as one); several arguments may name the same cluster (`prod=/logs/jan
prod=/logs/feb`). A local PATH is a directory searched recursively for `state-change.log*`
files, a file, or a glob; a URI with a scheme Spark reads (hdfs://, s3a://, ...) is handed
to Spark, which searches it recursively for the same file names.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

FILE_GLOB = "state-change.log*"
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_GLOB_CHAR = re.compile(r"([{}\[\]*?\\])")
_COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")


class InputError(Exception):
    """The logs cannot be found or read (a clear message for the user)."""


@dataclass(frozen=True)
class LogSource:
    cluster: str
    path: str


@dataclass(frozen=True)
class ResolvedSource:
    cluster: str
    path: str
    files: tuple[str, ...]  # local files; empty for a remote URI (Spark lists it)
    remote: bool
    bytes: int


def parse_log_args(args: list[str]) -> list[LogSource]:
    """`[NAME=]PATH` arguments; a PATH alone names its cluster after its last component.

    Explicit NAMEs are taken first and a default name never joins one of them (nor one
    given to another path by default: it gets a -2, -3, ... suffix), so the clusters do
    not depend on the arguments' order.
    """
    parsed: list[tuple[str, str]] = []
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep or not _NAME.match(name) or os.path.exists(arg):
            name, path = "", arg
        if not path:
            raise InputError(f"--logs {arg!r}: no path")
        parsed.append((name, path))
    explicit = {name for name, _ in parsed if name}
    by_default: dict[str, str] = {}
    out: list[LogSource] = []
    for given, path in parsed:
        name = given
        if not name:
            stripped = path.rstrip("/") or path
            base = os.path.basename(stripped.split("://", 1)[-1]) or stripped
            name, n = base, 2
            while name in explicit or by_default.get(name, path) != path:
                name = f"{base}-{n}"
                n += 1
            by_default[name] = path
        out.append(LogSource(name, path))
    return out


def is_uri(path: str) -> bool:
    """A URI with a scheme (file:// included), not a plain path."""
    return _SCHEME.match(path) is not None


def is_remote(path: str) -> bool:
    m = _SCHEME.match(path)
    return m is not None and m.group(1).lower() != "file"


def local_path(path: str) -> str:
    return re.sub(r"^file://", "", path, flags=re.IGNORECASE)  # as is_remote: any case


def resolve(source: LogSource) -> ResolvedSource:
    if is_remote(source.path):
        return ResolvedSource(source.cluster, source.path, (), True, 0)
    path = local_path(source.path)
    p = Path(path)
    if p.is_dir():
        files = sorted(str(f) for f in p.rglob(FILE_GLOB) if f.is_file())
        if not files:
            raise InputError(f"no state-change logs ({FILE_GLOB} files) under {source.path}")
    elif p.is_file():
        files = [str(p)]
    elif glob.has_magic(path):
        matched = sorted(glob.glob(path, recursive=True))
        files = []
        for m in matched:
            mp = Path(m)
            if mp.is_dir():
                files.extend(str(f) for f in mp.rglob(FILE_GLOB) if f.is_file())
            elif mp.is_file():
                files.append(m)
        if not files:
            raise InputError(f"no state-change logs match {source.path}")
    else:
        raise InputError(f"no such file or directory: {source.path}")
    for f in files:
        if not os.access(f, os.R_OK):
            raise InputError(f"cannot read {f}: permission denied")
    size = sum(os.path.getsize(f) for f in files)
    return ResolvedSource(source.cluster, source.path, tuple(files), False, size)


def glob_escape(path: str) -> str:
    """`path` as a Hadoop glob matching only itself (the characters Spark's
    SparkHadoopUtil.isGlobPath looks for, backslash-escaped)."""
    return _GLOB_CHAR.sub(r"\\\1", path)


def is_compressed(path: str) -> bool:
    return path.endswith(_COMPRESSED)


def torn_tail(data: bytes) -> bytes | None:
    """The bytes after a file's last line break, if the file does not end with one."""
    if not data or data.endswith((b"\n", b"\r")):
        return None
    cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
    return data[cut + 1 :]


def normalize_uri(uri: str) -> str:
    """One spelling for a file's URI (Spark writes file:/x in some places, file:///x in
    others)."""
    return re.sub(r"^file:/+", "file:/", uri)
