"""The numbers of a checkpoint file are read as Kafka 2.8's CheckpointFile reads them:
Integer.parseInt (the version, the count, a partition, an epoch) and Long.parseLong (an
offset), which take a leading '+' or '-' and then one or more characters
Character.digit(ch, 10) takes, Unicode decimal digits (category Nd) of the Basic
Multilingual Plane (Java reads UTF-16 chars: a digit beyond it is two surrogates, neither
a digit), and nothing else (no '_', no space, no other numeral). Below 0 is refused here
as before (docs: storage/checkpoints.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.checkpoints import read_epoch_checkpoint, read_offset_checkpoint
from storage.errors import CheckpointError

# (text, what parseInt/parseLong make of it: None, NumberFormatException)
JAVA_NUMBERS = [
    ("7", 7),
    ("+7", 7),
    ("-0", 0),
    ("+0", 0),
    ("007", 7),
    ("\u0667", 7),  # ARABIC-INDIC DIGIT SEVEN
    ("\uff17", 7),  # FULLWIDTH DIGIT SEVEN
    ("1\u0660", 10),  # scripts mixed: each char a digit
    ("+\u0967\u0968", 12),  # DEVANAGARI ONE, TWO
    ("0" * 30 + "5", 5),
    ("+", None),
    ("-", None),
    ("++7", None),
    ("+-7", None),
    ("1_0", None),
    ("\u00b2", None),  # SUPERSCRIPT TWO: No, not Nd
    ("\u2167", None),  # ROMAN NUMERAL EIGHT: Nl
    ("\U0001d7d5", None),  # MATHEMATICAL BOLD DIGIT SEVEN: Nd, but beyond the BMP
    ("7\U0001d7ce", None),
    ("0x7", None),
    ("7.0", None),
]
# A line is the number whole (a field is what the line's whitespace leaves between).
JAVA_LINES = [*JAVA_NUMBERS, ("", None), (" 0", None), ("0 ", None), ("\t1", None)]


@pytest.mark.parametrize(("text", "value"), JAVA_NUMBERS)
def test_an_offset_checkpoints_numbers_are_read_as_java_reads_them(
    tmp_path: Path, text: str, value: int | None
) -> None:
    partition = tmp_path / "partition"
    partition.write_text(f"0\n1\nt {text} 5\n", encoding="utf-8")
    offset = tmp_path / "offset"
    offset.write_text(f"0\n1\nt 3 {text}\n", encoding="utf-8")
    if value is None:
        for path in (partition, offset):
            with pytest.raises(CheckpointError, match="malformed"):
                read_offset_checkpoint(path)
    else:
        assert read_offset_checkpoint(partition) == {("t", value): 5}
        assert read_offset_checkpoint(offset) == {("t", 3): value}


@pytest.mark.parametrize(("text", "value"), JAVA_LINES)
def test_a_checkpoints_version_and_count_lines_are_read_as_java_reads_them(
    tmp_path: Path, text: str, value: int | None
) -> None:
    count = tmp_path / "count"
    count.write_text(f"0\n{text}\n" + "t 3 5\n" * (value or 0), encoding="utf-8")
    version = tmp_path / "version"
    version.write_text(f"{text}\n1\nt 3 5\n", encoding="utf-8")
    if value is None:
        with pytest.raises(CheckpointError, match="malformed"):
            read_offset_checkpoint(count)
        with pytest.raises(CheckpointError, match="version"):
            read_offset_checkpoint(version)
        return
    assert len(read_offset_checkpoint(count)) == min(value, 1)
    if value == 0:
        assert read_offset_checkpoint(version) == {("t", 3): 5}
    else:
        with pytest.raises(CheckpointError, match="version"):
            read_offset_checkpoint(version)


@pytest.mark.parametrize(("text", "value"), JAVA_NUMBERS)
def test_an_epoch_checkpoints_numbers_are_read_as_java_reads_them(
    tmp_path: Path, text: str, value: int | None
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(f"0\n1\n{text} {text}\n", encoding="utf-8")
    if value is None:
        with pytest.raises(CheckpointError, match="malformed"):
            read_epoch_checkpoint(path)
    else:
        assert read_epoch_checkpoint(path) == [(value, value)]


@pytest.mark.parametrize(
    ("partition", "offset", "ok"),
    [
        ("+2147483647", "+9223372036854775807", True),
        ("2147483648", "1", False),  # past an Int
        ("1", "9223372036854775808", False),  # past a Long
        ("\uff12147483648", "1", False),  # fullwidth: still past an Int
        ("-1", "1", False),  # below 0: refused here (Kafka takes it)
    ],
)
def test_the_bounds_are_javas_in_every_script(
    tmp_path: Path, partition: str, offset: str, ok: bool
) -> None:
    path = tmp_path / "checkpoint"
    path.write_text(f"0\n1\nt {partition} {offset}\n", encoding="utf-8")
    if ok:
        assert read_offset_checkpoint(path) == {("t", 2**31 - 1): 2**63 - 1}
    else:
        with pytest.raises(CheckpointError, match="malformed"):
            read_offset_checkpoint(path)


# Kafka's CheckpointFile reads lines with BufferedReader.readLine (ended by \n, \r or \r\n)
# and splits each entry line with Pattern.compile("\\s+") (ASCII whitespace only:
# space, \t, \n, \x0b, \f, \r), keeping a leading empty field and dropping trailing ones;
# an entry line that does not give its fields, a blank one included, is malformed.
OFFSET_LINES = [
    ("t 3 5\n", True),
    ("t 3 5", True),  # no newline at the end
    ("t 3 5 \n", True),  # trailing whitespace: trailing empty fields dropped
    ("t\t3  5\t\n", True),
    ("t\x0b3\x0c5\n", True),  # vertical tab and form feed are \s (not line ends)
    ("t 3 5\r\n", True),
    ("t 3 5\n\n", False),  # a blank line after the entry
    ("\nt 3 5\n", False),  # a blank line before it
    ("t 3 5\n \n", False),  # a line of spaces
    (" t 3 5\n", False),  # leading whitespace: a leading empty field
    ("\tt 3 5\n", False),
    ("t 3\xa05\n", False),  # NO-BREAK SPACE is not \s: two fields
    ("t\u20033 5\n", False),  # EM SPACE
    ("t 3 5\x1c\n", False),  # FILE SEPARATOR: neither a line end nor \s
    ("t 3 5\x85\n", False),  # NEXT LINE: neither
]


@pytest.mark.parametrize(("entries", "ok"), OFFSET_LINES, ids=repr)
def test_an_offset_checkpoints_lines_are_split_as_kafka_splits_them(
    tmp_path: Path, entries: str, ok: bool
) -> None:
    path = tmp_path / "checkpoint"
    path.write_text(f"0\n1\n{entries}", encoding="utf-8", newline="")
    if ok:
        assert read_offset_checkpoint(path) == {("t", 3): 5}
    else:
        with pytest.raises(CheckpointError, match=r"malformed|entries"):
            read_offset_checkpoint(path)


@pytest.mark.parametrize(
    ("entries", "ok"),
    [
        ("1 5\n", True),
        ("1 5 \n", True),
        ("1\x0b5\n", True),
        ("1 5\n\n", False),
        (" 1 5\n", False),
        ("1\xa05\n", False),
    ],
    ids=repr,
)
def test_an_epoch_checkpoints_lines_are_split_as_kafka_splits_them(
    tmp_path: Path, entries: str, ok: bool
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(f"0\n1\n{entries}", encoding="utf-8", newline="")
    if ok:
        assert read_epoch_checkpoint(path) == [(1, 5)]
    else:
        with pytest.raises(CheckpointError, match=r"malformed|entries"):
            read_epoch_checkpoint(path)
