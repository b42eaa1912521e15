#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: the Python environment from the lock file, a
# ZooKeeper to run against, and kcat for the client tests. Safe to run again and again.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[setup] %s\n' "$*" >&2; }

# 1. uv, from PyPI into a private tools venv unless it is already on PATH.
if command -v uv >/dev/null 2>&1; then
  UV=$(command -v uv)
else
  UV=.tools/bin/uv
  if [ ! -x "$UV" ]; then
    say "installing uv into .tools/"
    python3 -m venv .tools
    .tools/bin/pip install --quiet --disable-pip-version-check uv
  fi
fi

# 2. The project's environment, exactly as locked. A .venv made in another directory (the
# checkout moved, or the .venv copied in) keeps console scripts that name that directory's
# interpreter: pytest and mypy then fail with "No such file or directory" (or "not found"),
# and uv sync rewrites only the project's own (zkctl). Such a .venv is made again. uv names
# the interpreter on the '#!' line or, when its path has a space or is longer than a '#!'
# line may be, in a /bin/sh trampoline: '#!/bin/sh', then '''exec' <quoted path> "$0" "$@".

# The word a shell-quoted path stands for: '...' parts, between them "'" or \' for a quote.
unquote() {
  local rest=$1 out=
  while [ -n "$rest" ]; do
    case "$rest" in
      "'"*)
        rest=${rest#"'"}
        case "$rest" in *"'"*) ;; *) return 1 ;; esac
        out+=${rest%%"'"*}
        rest=${rest#*"'"}
        ;;
      "\"'\""*) out+="'"; rest=${rest#"\"'\""} ;;
      "\\'"*) out+="'"; rest=${rest#"\\'"} ;;
      *) out+=${rest:0:1}; rest=${rest:1} ;;
    esac
  done
  printf '%s' "$out"
}
# The interpreter a .venv/bin script runs, from its first two lines; nothing if none.
script_interpreter() {
  local first="" second="" word
  { IFS= read -r -n 256 first; IFS= read -r -n 8192 second; } < "$1" 2>/dev/null || true
  case "$first" in
    '#!'/*python*) printf '%s' "${first#\#!}" ;;
    '#!/bin/sh')
      case "$second" in
        "'''exec' "*' "$0" "$@"')
          word=${second#"'''exec' "}
          unquote "${word%' "$0" "$@"'}" || true
          ;;
      esac
      ;;
  esac
}
stale_interpreter() {
  local script python
  for script in .venv/bin/*; do
    [ -f "$script" ] || continue
    python=$(script_interpreter "$script")
    case "$python" in
      *python*)
        if [ ! -x "$python" ]; then
          printf '%s' "$python"
          return 0
        fi
        ;;
    esac
  done
  return 1
}
if old=$(stale_interpreter); then
  say ".venv was made for another directory (its scripts name $old); making it again"
  rm -rf .venv
fi
say "syncing .venv from uv.lock"
"$UV" sync --frozen --quiet

# 3. ZooKeeper. Provisioning (cluster/zookeeper.py) tries, in order: a connect string
# (--zookeeper / ZKCTL_ZOOKEEPER), a testcontainers zookeeper:3.8 when a Docker engine
# answers, a local install (ZOOKEEPER_HOME or Debian's package). The tests also start local
# servers of their own whatever the first two give (three-server ensembles, servers they
# kill and pause), so the local install is made in any case where set-up can: as root on
# Debian.
is_debian_root() { [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null; }
# The package lists are marked fresh only once an update succeeded, and an install that fails
# updates them first and tries again: a failed or old update never stays in the way.
apt_updated_now=
apt_update() {
  if DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null; then
    mkdir -p .tools && touch .tools/.apt-updated
    apt_updated_now=1
  else
    say "apt-get update failed"
    return 1
  fi
}
apt_install() {
  if [ ! -f .tools/.apt-updated ]; then
    apt_update || true
  fi
  if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
    return 0
  fi
  if [ -n "$apt_updated_now" ]; then
    return 1
  fi
  say "apt-get install $* failed; updating the package lists and trying again"
  apt_update && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# Whether provisioning will use a container: the project's own probe (docker-py, as
# DOCKER_HOST or /var/run/docker.sock say), not the docker CLI, whose context may name
# another engine.
docker_answers() {
  local probe=(.venv/bin/python -c 'import sys; from cluster.zookeeper import docker_available; sys.exit(0 if docker_available() else 1)')
  [ -x .venv/bin/python ] || return 1
  if command -v timeout >/dev/null 2>&1; then
    probe=(timeout 30 "${probe[@]}")
  fi
  "${probe[@]}" >/dev/null 2>&1
}
has_java() { command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ]; }

if [ -n "${ZKCTL_ZOOKEEPER:-}" ]; then
  say "ZooKeeper: using ZKCTL_ZOOKEEPER=$ZKCTL_ZOOKEEPER"
  given=1
elif docker_answers; then
  say "ZooKeeper: a Docker engine answers; tests will use a testcontainers zookeeper:3.8"
  given=1
else
  given=
fi
if [ -n "${ZOOKEEPER_HOME:-}" ]; then
  say "local ZooKeeper: using ZOOKEEPER_HOME=$ZOOKEEPER_HOME"
elif [ -f /usr/share/java/zookeeper.jar ] && has_java; then
  say "local ZooKeeper: Debian's zookeeper package is installed"
elif is_debian_root; then
  say "local ZooKeeper: installing Debian's zookeeper package (and a Java runtime)"
  apt_install zookeeper default-jre-headless
elif [ -n "$given" ]; then
  say "local ZooKeeper: none found; the tests that start servers of their own (ensembles)"
  say "need one: set ZOOKEEPER_HOME to an Apache ZooKeeper 3.8 install, or run this as root on Debian."
else
  say "ZooKeeper: none found. Set ZKCTL_ZOOKEEPER=host:port, start a Docker engine,"
  say "set ZOOKEEPER_HOME to an Apache ZooKeeper 3.8 install, or run this as root on Debian."
fi

# 4. kcat, which the client tests use beside confluent-kafka.
if ! command -v kcat >/dev/null 2>&1 && is_debian_root; then
  say "installing kcat"
  apt_install kcat
fi

# 5. Java 17+, which Spark (pyspark, for `zkctl report`) runs on. Debian's zookeeper
# package brings one, which may be older than Spark needs.
java_major() { java -version 2>&1 | sed -n 's/.* version "\([0-9]*\).*/\1/p' | head -n 1; }
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ] && is_debian_root; then
  say "installing a Java runtime for Spark (zkctl report)"
  apt_install default-jre-headless
fi
if command -v java >/dev/null 2>&1; then
  major=$(java_major)
  if [ -n "$major" ] && [ "$major" -lt 17 ]; then
    say "Java $major found; Spark (zkctl report and its tests) needs Java 17 or newer"
  fi
else
  say "no Java runtime: zkctl report (Spark) needs Java 17+; install one or set JAVA_HOME"
fi

# 6. tmux, in which the terminal tests run `zkctl watch` and `zkctl demo` and read the screen.
if ! command -v tmux >/dev/null 2>&1 && is_debian_root; then
  say "installing tmux"
  apt_install tmux
fi
