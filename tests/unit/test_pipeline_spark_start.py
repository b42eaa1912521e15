"""A Spark start whose JVM never answers (a real hung process: a `java` that sleeps) fails
within its timeout with a clear error, leaves no process behind, and a start after it
launches a JVM afresh. Each runs in a Python of its own: the suite's shared session
would otherwise be reused by PySpark instead of started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster import processes
from pipeline import job

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)


def real_java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        pytest.skip("no Java runtime")  # setup installs one; Spark's own tests need it too
    return os.path.realpath(found)


def fake_java_home(tmp_path: Path, hangs: int) -> Path:
    """A JAVA_HOME whose `java` hangs (sleeps) its first `hangs` times, then is the real one."""
    home = tmp_path / "java-home"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(
        "#!/bin/sh\n"
        f'count="{tmp_path}/calls"\n'
        'echo $$ >> "$count"\n'
        f'if [ "$(wc -l < "$count")" -le {hangs} ]; then exec sleep 600; fi\n'
        f'exec "{real_java()}" "$@"\n'
    )
    java.chmod(0o755)
    return home


def run(tmp_path: Path, hangs: int, code: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "JAVA_HOME": str(fake_java_home(tmp_path, hangs)), "PYTHONPATH": str(ROOT)}
    begun = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    return done, time.monotonic() - begun


def hung_pids(tmp_path: Path, hangs: int) -> list[int]:
    return [int(x) for x in (tmp_path / "calls").read_text().split()[:hangs]]


def timing_out(start: str) -> str:
    """Code that runs `start`, which must raise SparkStartTimeout: its message is printed
    (as JSON) and the exit is 0; a start that answered exits 1."""
    return (
        "import json, sys\n"
        "from pipeline import job, testing\n"
        "try:\n"
        f"    {start}\n"
        "except job.SparkStartTimeout as e:\n"
        "    print(json.dumps(str(e)))\n"
        "    sys.exit(0)\n"
        "sys.exit('started')\n"
    )


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        assert processes.wait_gone(pid, None, 10), (pid, processes.state(pid))


def test_a_jvm_that_never_answers_fails_the_start_within_its_timeout(tmp_path: Path) -> None:
    done, took = run(
        tmp_path,
        hangs=99,
        code=timing_out("job.start_session('local[1]', start_timeout_s=3)"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    message = json.loads(done.stdout.strip().splitlines()[-1])
    assert message.startswith(
        "could not start Spark (master local[1]): its JVM did not answer within 3 s (killed: pids "
    )
    hung = hung_pids(tmp_path, 1)
    assert str(hung[0]) in message
    assert_gone(hung)
    assert took < 120  # 3 s and the launch; only a hang would take this long


def test_a_start_after_a_jvm_hung_past_its_launch_launches_one_afresh(tmp_path: Path) -> None:
    """pipeline.testing's start: the first JVM is stopped (SIGSTOP) as the context is made,
    after PySpark has its gateway; the second start answers (PySpark must not go back to
    the gateway of the JVM killed)."""
    done, _took = run(
        tmp_path,
        hangs=0,
        code=(
            "import os, signal\n"
            "from pyspark import SparkContext\n"
            "from pipeline import job, testing\n"
            "original = SparkContext._initialize_context\n"
            "stopped = []\n"
            "def stop_then_initialize(self, jconf):\n"
            "    if not stopped:\n"
            "        stopped.append(SparkContext._gateway.proc.pid)\n"
            "        os.kill(stopped[0], signal.SIGSTOP)\n"
            "    return original(self, jconf)\n"
            "SparkContext._initialize_context = stop_then_initialize\n"
            "spark = testing.start_session(timeout_s=20, attempts=2)\n"
            "print('rows', spark.range(5).count())\n"
            "print('stopped', stopped[0])\n"
            "job.stop_session(spark)\n"
        ),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rows 5" in done.stdout
    stopped = int(done.stdout.split("stopped ")[1].split()[0])
    assert f"did not answer within 20 s (killed: pids {stopped}" in done.stderr
    assert "starting it again" in done.stderr
    assert_gone([stopped])


def test_a_start_that_keeps_hanging_gives_up_after_its_attempts(tmp_path: Path) -> None:
    done, _took = run(
        tmp_path,
        hangs=99,
        code=timing_out("testing.start_session(timeout_s=2, attempts=2)"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.count("starting it again") == 1
    assert_gone(hung_pids(tmp_path, 2))


def test_a_cluster_master_gives_its_start_longer() -> None:
    for local in ("local", "local[1]", "local[*]", "local-cluster[2,1,1024]"):
        assert job.start_timeout_for(local) == job.SPARK_START_TIMEOUT_S == 180
    for cluster in ("spark://h:7077", "yarn", "k8s://https://h:443"):
        assert job.start_timeout_for(cluster) == job.SPARK_CLUSTER_START_TIMEOUT_S == 600
