"""`--logs` arguments and the files they find (pipeline/inputs.py): the edges of
docs/analytics.md's rules, without Spark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline import inputs


def _log(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- arguments ----------------------------------------------------------------------------


def test_an_existing_relative_path_with_an_equals_sign_is_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `k` would be a valid NAME: the path existing is what makes it one path.
    (tmp_path / "k=v").mkdir()
    monkeypatch.chdir(tmp_path)
    [s] = inputs.parse_log_args(["k=v"])
    assert (s.cluster, s.path) == ("k=v", "k=v")
    # Not existing, it is NAME=PATH.
    [s] = inputs.parse_log_args(["k=w"])
    assert (s.cluster, s.path) == ("k", "w")


def test_a_name_with_characters_a_name_cannot_hold_makes_the_whole_argument_a_path() -> None:
    for arg, cluster in (
        ("/nowhere/a=b", "a=b"),
        ("my prod=/logs/jan", "jan"),
    ):
        [s] = inputs.parse_log_args([arg])
        assert (s.cluster, s.path) == (cluster, arg), arg
    [s] = inputs.parse_log_args(["prod-1.eu:x_y=/logs"])
    assert (s.cluster, s.path) == ("prod-1.eu:x_y", "/logs")


@pytest.mark.parametrize("arg", ["prod=", ""])
def test_an_argument_without_a_path_is_refused(arg: str) -> None:
    with pytest.raises(inputs.InputError, match="no path"):
        inputs.parse_log_args([arg])


def test_a_uri_is_named_after_its_last_component() -> None:
    got = inputs.parse_log_args(["hdfs://nn:8020/k/prod/", "s3a://bucket"])
    assert [s.cluster for s in got] == ["prod", "bucket"]


# --- local and remote paths -------------------------------------------------------------------


def test_remote_is_any_scheme_but_file_whatever_its_case() -> None:
    assert inputs.is_remote("hdfs://nn/x")
    assert inputs.is_remote("S3A://b/x")
    assert not inputs.is_remote("file:///x")
    assert not inputs.is_remote("FILE:///x")
    assert not inputs.is_remote("File:/x")
    assert not inputs.is_uri("File:/x")
    assert not inputs.is_remote("/x/hdfs://y")


def test_a_file_uri_is_read_locally_whatever_its_scheme_case(tmp_path: Path) -> None:
    # RFC 3986 3.1: schemes are case-insensitive. FILE:// was taken for a local URI (not
    # remote) but its scheme was not stripped: "no such file or directory: FILE:///...".
    f = _log(tmp_path / "state-change.log")
    for scheme in ("file://", "FILE://", "File://"):
        r = inputs.resolve(inputs.LogSource("c", f"{scheme}{tmp_path}"))
        assert r.files == (str(f),), scheme
        assert not r.remote


# --- what a local path finds ------------------------------------------------------------------


def test_a_file_given_is_that_file_whatever_its_name(tmp_path: Path) -> None:
    f = _log(tmp_path / "copied-from-broker-1.txt", "{}\n{}\n")
    r = inputs.resolve(inputs.LogSource("c", str(f)))
    assert r.files == (str(f),)
    assert r.bytes == 6


def test_a_directory_is_searched_recursively_in_sorted_order_for_files_only(
    tmp_path: Path,
) -> None:
    names = [
        "b/state-change.log",
        "a/state-change.log.2",
        "a/state-change.log",
        "a/state-change.log.1.gz",
        "c/d/e/state-change.log",
    ]
    for n in names:
        _log(tmp_path / n)
    _log(tmp_path / "a" / "server.log")
    # A directory whose name matches is searched, never a file itself.
    _log(tmp_path / "state-change.log.old" / "state-change.log")
    r = inputs.resolve(inputs.LogSource("c", str(tmp_path)))
    expected = sorted(str(tmp_path / n) for n in [*names, "state-change.log.old/state-change.log"])
    assert list(r.files) == expected


def test_a_glob_is_expanded_recursively_sorted_and_skips_what_is_not_a_file(
    tmp_path: Path,
) -> None:
    for n in ("z/state-change.log", "m/state-change.log", "a/x/state-change.log"):
        _log(tmp_path / n)
    # A dangling link the glob matches is neither a file nor a directory: skipped.
    os.symlink(tmp_path / "gone", tmp_path / "m" / "state-change.log.1")
    r = inputs.resolve(inputs.LogSource("c", str(tmp_path / "**" / "state-change.log*")))
    assert list(r.files) == [
        str(tmp_path / "a/x/state-change.log"),
        str(tmp_path / "m/state-change.log"),
        str(tmp_path / "z/state-change.log"),
    ]


def test_an_unreadable_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _log(tmp_path / "state-change.log")
    _log(tmp_path / "state-change.log.1")
    real_access = os.access
    # (root reads any file, so the refusal is simulated.)
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if p == str(f) else real_access(p, mode)
    )
    with pytest.raises(inputs.InputError, match=f"cannot read {f}: permission denied"):
        inputs.resolve(inputs.LogSource("c", str(tmp_path)))


# --- handing files to Spark -------------------------------------------------------------------


def test_glob_escape_escapes_every_hadoop_glob_character() -> None:
    assert inputs.glob_escape("/l/a{b,c}[1]*?\\d-x") == "/l/a\\{b,c\\}\\[1\\]\\*\\?\\\\d-x"
    assert inputs.glob_escape("/plain/logs 10:00/#x") == "/plain/logs 10:00/#x"


@pytest.mark.parametrize("ext", [".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst"])
def test_every_hadoop_codec_suffix_is_compressed(ext: str) -> None:
    # Hadoop's CompressionCodecFactory picks the codec by suffix: such a file is read as
    # one compressed stream and its last bytes say nothing of a torn line.
    assert inputs.is_compressed(f"file:/l/state-change.log.1{ext}")
    assert not inputs.is_compressed(f"file:/l/state-change.log{ext}.1")


def test_a_carriage_return_ends_a_line_as_for_hadoops_line_reader() -> None:
    # Hadoop's LineReader ends a line at \n, \r or \r\n.
    assert inputs.torn_tail(b'{"a":1}\r') is None
    assert inputs.torn_tail(b'{"a":1}\r{"b"') == b'{"b"'
    assert inputs.torn_tail(b'{"a":1}\n{"b":1}\r{"c"') == b'{"c"'
    assert inputs.torn_tail(b'{"a":1}\r{"b":1}\n{"c"') == b'{"c"'
