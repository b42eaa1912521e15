"""The set-up command (scripts/setup.sh), run for real on a copy of this checkout: a .venv
made in another directory is made again, and one made here is kept; and on a machine faked
on PATH: what it installs, and how it recovers from a failed apt-get."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import os
import shutil
import socketserver
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster import zookeeper as zkp

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


# --- a machine faked on PATH: root or not, apt-get, the docker CLI --------------------------
#
# The set-up script runs from a copy of itself (and of cluster/, for its Docker probe) with a
# PATH of shims and the few tools it needs: nothing is installed, nothing asks the network.

# apt-get is only ever run where /etc/debian_version says Debian, as root.
debian_only = pytest.mark.skipif(
    not Path("/etc/debian_version").is_file(), reason="set-up uses apt-get on Debian only"
)
TOOLS = ("dirname", "mkdir", "touch", "sed", "head", "cat", "timeout", "rm")


def shim(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


class FakeMachine:
    """A checkout (``checkout``, else one in ``tmp_path``) holding scripts/setup.sh, cluster/
    and (unless ``venv`` is false) this suite's .venv, and a PATH where `id` says root
    (unless told otherwise), `uv` does nothing and `apt-get` logs its calls to ``calls``
    (and fails an install while ``lists`` is missing, an update while ``offline`` exists)."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        root: bool = True,
        checkout: Path | None = None,
        venv: bool = True,
    ) -> None:
        self.checkout = tmp_path / "checkout" if checkout is None else checkout
        (self.checkout / "scripts").mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "scripts" / "setup.sh", self.checkout / "scripts" / "setup.sh")
        shutil.copytree(
            ROOT / "cluster",
            self.checkout / "cluster",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        if venv:
            (self.checkout / ".venv").symlink_to(sys.prefix)
        self.state = tmp_path / "state"
        self.state.mkdir()
        self.calls = self.state / "calls"
        self.lists = self.state / "lists"
        self.offline = self.state / "offline"
        self.lists.touch()
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool)
            assert found, f"{tool} is needed to run the set-up script"
            (self.bin / tool).symlink_to(found)
        shim(self.bin, "id", f"echo {0 if root else 1000}\n")
        shim(self.bin, "uv", "exit 0\n")  # the Python environment is not what is tested here
        shim(
            self.bin,
            "apt-get",
            f'echo "$*" >> {self.calls}\n'
            'case "$1" in\n'
            f"  update) if [ -e {self.offline} ]; then\n"
            "    echo 'E: network unreachable' >&2; exit 100\n"
            "  fi\n"
            f"  touch {self.lists}; exit 0;;\n"
            f"  install) if [ ! -e {self.lists} ]; then\n"
            "    echo 'E: Unable to locate package' >&2; exit 100\n"
            "  fi\n"
            "  exit 0;;\n"
            "esac\n",
        )
        self.env = {
            "PATH": str(self.bin),
            "HOME": str(tmp_path),
            "DOCKER_HOST": "unix:///nonexistent",
        }

    def setup(self, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/bash", "scripts/setup.sh"],
            cwd=self.checkout,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def apt_calls(self) -> list[str]:
        return self.calls.read_text().splitlines() if self.calls.exists() else []


@debian_only
def test_a_failed_apt_update_is_tried_again_by_the_next_set_up(tmp_path: Path) -> None:
    machine = FakeMachine(tmp_path)
    machine.lists.unlink()  # a fresh machine: no package lists yet
    machine.offline.touch()  # and the network blinks during its first set-up
    first = machine.setup()
    assert first.returncode != 0  # it fails, as it should
    machine.offline.unlink()  # the network is back: set-up again now works
    second = machine.setup()
    assert second.returncode == 0, (machine.apt_calls(), second.stderr)
    assert "apt-get update failed" in first.stderr
    assert machine.apt_calls().count("update -qq") == 3  # twice in the first run, once now
    assert (machine.checkout / ".tools" / ".apt-updated").is_file()


@debian_only
def test_old_package_lists_are_updated_when_an_install_fails(tmp_path: Path) -> None:
    """Lists updated by an earlier set-up have gone stale (the mirror dropped the versions
    they name): the failing install updates them and tries again."""
    machine = FakeMachine(tmp_path)
    (machine.checkout / ".tools").mkdir()
    (machine.checkout / ".tools" / ".apt-updated").touch()
    machine.lists.unlink()
    done = machine.setup()
    assert done.returncode == 0, (machine.apt_calls(), done.stderr)
    calls = machine.apt_calls()
    assert calls[:3] == [
        "install -y -qq --no-install-recommends zookeeper default-jre-headless",
        "update -qq",
        "install -y -qq --no-install-recommends zookeeper default-jre-headless",
    ]
    assert calls.count("update -qq") == 1  # once per run is enough
    assert "updating the package lists and trying again" in done.stderr


def console_script_wheel(directory: Path, script: str) -> Path:
    """A wheel of standin-tool, whose console script ``script`` exits 0 (to --help too)."""
    module = "standin_tool"
    info = f"{module}-1.0.dist-info"
    files = {
        f"{module}.py": "def main() -> int:\n    return 0\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: standin-tool\nVersion: 1.0\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": f"[console_scripts]\n{script} = {module}:main\n",
    }
    record = []
    for name, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={encoded},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = directory / f"{module}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest.mark.parametrize("where", ["my projects", "it's mine", "x" * 130])
def test_a_moved_venv_whose_scripts_start_with_uvs_sh_trampoline_is_made_again(
    tmp_path: Path, where: str
) -> None:
    """When the interpreter's path has a space or is longer than 127 bytes, uv starts a
    console script with '#!/bin/sh' and an exec of the quoted interpreter, not '#!<python>'."""
    uv = shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")
    first = tmp_path / where / "first"
    first.mkdir(parents=True)
    subprocess.run(
        [uv, "venv", "-q", str(first / ".venv"), "--python", sys.executable],
        check=True,
        timeout=120,
    )
    # A console script named pytest, from a wheel made here: nothing to fetch, and nothing
    # to find in uv's cache (the set-up's `uv sync` installs from the lock and leaves no
    # index page of pytest there, so `--offline pytest` found nothing on a cold cache).
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    console_script_wheel(wheels, "pytest")
    offline = ["--offline", "--no-index", "--find-links", str(wheels)]
    subprocess.run(
        [uv, "pip", "install", "-q", *offline, "standin-tool"],
        env={**os.environ, "VIRTUAL_ENV": str(first / ".venv")},
        check=True,
        timeout=300,
    )
    trampoline = "#!/bin/sh\n" + "'" * 3 + "exec' "
    assert (first / ".venv" / "bin" / "pytest").read_text().startswith(trampoline)
    moved = first.rename(tmp_path / where / "moved")  # the checkout moved
    assert not runs(moved, "pytest")  # its scripts still name the first directory's python
    machine = FakeMachine(tmp_path, root=False, checkout=moved, venv=False)
    sync = tmp_path / "sync"  # `uv sync` says whether the .venv was still there
    shim(machine.bin, "uv", f"if [ -e .venv ]; then echo kept; else echo made; fi > {sync}\n")
    done = machine.setup()
    assert done.returncode == 0, done.stderr
    assert sync.read_text() == "made\n", done.stderr
    assert f"its scripts name {first}/.venv/bin/python" in done.stderr


class _Engine(http.server.BaseHTTPRequestHandler):
    """Enough of Docker's API for docker-py's from_env() and ping()."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b'{"ApiVersion": "1.44", "Version": "27.0.0"}' if "version" in self.path else b"OK"
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if body != b"OK" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def docker_engine(path: Path) -> Iterator[str]:
    """A Docker engine that answers on the unix socket ``path``; its DOCKER_HOST."""

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    server = Server(str(path), _Engine)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@debian_only
@pytest.mark.parametrize("given", ["docker", "connect string"])
def test_the_local_zookeeper_is_installed_whatever_else_is_there(
    tmp_path: Path, given: str
) -> None:
    """A Docker engine or ZKCTL_ZOOKEEPER serves provision(), but the tests' ensembles
    (and the servers tests kill and pause) are local processes whatever they give."""
    machine = FakeMachine(tmp_path)
    with docker_engine(tmp_path / "docker.sock") as docker_host:
        env = {"DOCKER_HOST": docker_host}
        if given == "connect string":
            env["ZKCTL_ZOOKEEPER"] = "127.0.0.1:2181"
        done = machine.setup(**env)
    assert done.returncode == 0, done.stderr
    said = "a Docker engine answers" if given == "docker" else "using ZKCTL_ZOOKEEPER"
    assert said in done.stderr
    assert (
        "install -y -qq --no-install-recommends zookeeper default-jre-headless"
        in machine.apt_calls()
    ), done.stderr


def test_set_up_asks_for_docker_as_provisioning_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docker CLI follows its own context (Docker Desktop's, rootless Docker's socket);
    provision() asks docker-py, which reads DOCKER_HOST or /var/run/docker.sock. Set-up says
    a Docker engine answers exactly when provision() will use one."""
    machine = FakeMachine(tmp_path, root=False)
    shim(machine.bin, "docker", "exit 0\n")  # `docker info` answers, through its context
    monkeypatch.delenv(zkp.ENV_DISABLE, raising=False)
    monkeypatch.setenv("DOCKER_HOST", machine.env["DOCKER_HOST"])
    done = machine.setup()
    assert done.returncode == 0, done.stderr
    assert not zkp.docker_available()
    assert "a Docker engine answers" not in done.stderr

    (machine.bin / "docker").unlink()  # no CLI at all, and an engine on DOCKER_HOST
    with docker_engine(tmp_path / "docker.sock") as docker_host:
        monkeypatch.setenv("DOCKER_HOST", docker_host)
        assert zkp.docker_available()
        done = machine.setup(DOCKER_HOST=docker_host)
    assert done.returncode == 0, done.stderr
    assert "a Docker engine answers" in done.stderr
