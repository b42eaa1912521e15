"""The set-up command (scripts/setup.sh), run for real on a copy of this checkout: a .venv
made in another directory is made again, and one made here is kept."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The console scripts the two commands run (scripts/test.sh, the Makefile's demo).
SCRIPTS = ("zkctl", "pytest", "mypy")


def copy_checkout(to: Path) -> None:
    """The checkout's files as they are now (tracked, and not yet committed changes)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if source.is_file():
            target = to / os.fsdecode(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def setup(checkout: Path) -> str:
    """Run the set-up script there; its messages. The uv the suite's own set-up used is
    put on PATH (else the script would install one for the copy, from the network)."""
    uv = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
    env = {**os.environ, "PATH": f"{Path(uv).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    done = subprocess.run(
        ["scripts/setup.sh"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def runs(checkout: Path, script: str) -> bool:
    """Whether the .venv's console script runs (``--help``)."""
    try:
        done = subprocess.run(
            [str(checkout / ".venv" / "bin" / script), "--help"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except FileNotFoundError:  # the script's interpreter is not there
        return False
    return done.returncode == 0


def test_a_venv_made_in_another_directory_is_made_again(tmp_path: Path) -> None:
    first = tmp_path / "first"
    copy_checkout(first)
    setup(first)
    assert all(runs(first, script) for script in SCRIPTS)
    moved = first.rename(tmp_path / "moved")
    # The console scripts still name the first directory's interpreter.
    assert not any(runs(moved, script) for script in SCRIPTS)
    said = setup(moved)
    # uv sync alone rewrites zkctl (the project moved), not the others.
    assert [script for script in SCRIPTS if not runs(moved, script)] == []
    assert "made for another directory" in said, said
    # Made here, it is kept.
    assert "made for another directory" not in setup(moved)
