"""Small real disks for the log directory failure tests (KIP-112): a tmpfs of a given
size mounted at a directory, and ``fill``, which takes its every free page, so that the
next write needing a page fails with ENOSPC, as a full disk's does.

Mounting needs root (or CAP_SYS_ADMIN); a test that cannot mount one fails and says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tmpfs(mount_point: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` (mount's syntax: "256k", "4m") at ``mount_point``, made if
    missing; unmounted lazily afterwards (a process killed moments ago may still hold
    files there)."""
    mount_point.mkdir(parents=True, exist_ok=True)
    options = ("ro," if read_only else "") + f"size={size}"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", os.fspath(mount_point)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,  # generous bounds that only catch a hang
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"this test needs a real small disk: mounting a tmpfs ({options}) at"
            f" {mount_point} was refused (exit {mounted.returncode}:"
            f" {mounted.stderr.strip()}); run the tests as root, where mount is allowed"
        )
    try:
        yield mount_point
    finally:
        subprocess.run(
            ["umount", "-l", os.fspath(mount_point)], capture_output=True, check=False, timeout=60
        )


def fill(directory: Path) -> None:
    """Take every free page of the file system holding ``directory``, and any a broker
    frees meanwhile (a log deleted there as the filler grows)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    chunk = b"\0" * 4096
    try:
        for _ in range(100):
            try:
                while True:
                    os.write(fd, chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
            if os.statvfs(directory).f_bavail == 0:
                return
    finally:
        os.close(fd)
    raise AssertionError(f"{directory}: pages were still freed after 100 fills")
