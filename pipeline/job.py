"""`zkctl report` on Spark: read the logs, classify every line, analyse, write tables and
the HTML report.

The heavy steps stay distributed: lines are parsed and classified by Spark's JSON reader
(native code); each partition's rows are shuffled to one task, sorted by epoch there, and
walked by `pipeline.partitions` on the executors; aggregations are Spark's. Only results
come back to the driver: per-cluster control-plane results (a few rows per failover),
per-incident aggregates, totals, percentiles, and the top of sorted tables.

Outputs in DIR: Parquet tables `tenures`, `controller_gaps`, `incidents`,
`partition_windows`, `partition_stats`, `fencing`, `leader_balance`, `rejected_lines`;
`summary.json`; `report.html`. docs/analytics.md describes every column.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cluster import processes
from pipeline import control, html, inputs, partitions, schema, stats

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

Progress = Callable[[str], None]

DEFAULT_MASTER = "local[*]"
_MASTER = re.compile(
    r"^(local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]"
    r"|spark://[^\s/]+|yarn|k8s://\S+|mesos://\S+)$"
)
TOP_PARTITIONS = 30
# A local JVM answers in 5-20 s on two busy cores; PySpark waits for one that never does
# for ever. A cluster's start also waits for its manager (YARN's queue, say): longer.
SPARK_START_TIMEOUT_S = 180.0
SPARK_CLUSTER_START_TIMEOUT_S = 600.0


class ReportError(Exception):
    """The report could not be made (a message for the user, not a bug)."""


class SparkStartTimeout(ReportError):
    """Spark's JVM did not answer within the start's timeout (and was killed)."""


@dataclass
class ReportOptions:
    sources: list[inputs.LogSource]
    out: str
    master: str = DEFAULT_MASTER
    tol_ms: int = 100
    buckets: int = 200
    conf: dict[str, str] = field(default_factory=dict)
    title: str = "Failover report"


def valid_master(master: str) -> bool:
    return bool(_MASTER.match(master))


# --- the Spark session ----------------------------------------------------------------


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def session_config(master: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Small and quiet: no UI, few shuffle partitions in local mode, errors only in the log."""
    local = master.startswith("local")
    cores = os.cpu_count() or 2
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile="
        + str(Path(__file__).with_name("log4j2.properties")),
        "spark.executor.extraJavaOptions": "-Dlog4j2.configurationFile="
        + str(Path(__file__).with_name("log4j2.properties")),
        "spark.python.worker.reuse": "true",
    }
    if local:
        conf.update(
            {
                "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
                "spark.default.parallelism": str(max(2, 2 * cores)),
                "spark.driver.memory": "2g",
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    conf.update(extra or {})
    return conf


def start_timeout_for(master: str) -> float:
    """How long a start with this master may take before its JVM is taken for hung."""
    return SPARK_START_TIMEOUT_S if master.startswith("local") else SPARK_CLUSTER_START_TIMEOUT_S


def start_session(
    master: str,
    extra: dict[str, str] | None = None,
    start_timeout_s: float | None = None,
) -> SparkSession:
    """A new Spark session (the caller stops it with `stop_session`). A JVM that has not
    answered within `start_timeout_s` (default: `SPARK_START_TIMEOUT_S` for a local master,
    else `SPARK_CLUSTER_START_TIMEOUT_S`) is killed, with what it started, and the start
    fails: PySpark itself would wait for it for ever."""
    if not valid_master(master):
        raise ReportError(f"bad --master {master!r}")
    if _java() is None:
        raise ReportError(
            "Spark needs a Java runtime (17 or newer) and none was found: install one"
            " (Debian: apt-get install default-jre-headless) or set JAVA_HOME"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName("zkctl-report")
    for k, v in session_config(master, extra).items():
        builder = builder.config(k, v)
    if start_timeout_s is None:
        start_timeout_s = start_timeout_for(master)
    watchdog = _StartWatchdog(start_timeout_s)
    try:
        with watchdog:
            spark = builder.getOrCreate()
    except Exception as e:  # the JVM did not start, or the master is unreachable
        if watchdog.fired:
            _forget_gateway()
            raise SparkStartTimeout(watchdog.message(master)) from e
        raise ReportError(f"could not start Spark (master {master}): {e}") from e
    if watchdog.fired:  # it answered as it was being killed
        with contextlib.suppress(Exception):
            stop_session(spark)
        _forget_gateway()
        raise SparkStartTimeout(watchdog.message(master))
    spark.sparkContext.setLogLevel("ERROR")
    if not master.startswith("local"):
        spark.sparkContext.addPyFile(_package_zip())
    return spark


class _StartWatchdog:
    """Kills the processes started while it is on (Spark's launcher, its JVM) once
    `timeout_s` has passed: the start waiting on them then fails."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.fired = False
        self.killed: list[int] = []
        self._before: set[int] = set()
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _StartWatchdog:
        self._before = set(processes.descendants(os.getpid()))
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._timer.join()

    def _fire(self) -> None:
        self.fired = True
        for pid in processes.descendants(os.getpid()):
            if pid not in self._before:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)

    def message(self, master: str) -> str:
        return (
            f"could not start Spark (master {master}): its JVM did not answer within"
            f" {self.timeout_s:g} s (killed: pids {', '.join(map(str, self.killed)) or 'none'})"
        )


def _forget_gateway() -> None:
    """Drop PySpark's gateway to a JVM that is gone, so that the next start launches one
    (PySpark keeps it on the class and would call the dead one)."""
    from pyspark import SparkContext

    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None


def stop_session(spark: SparkSession) -> None:
    """Stop the session and end its JVM (the process PySpark started for it)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    spark.stop()
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway = None
        SparkContext._jvm = None
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()  # the JVM exits when its stdin closes
        try:
            proc.wait(30)
        except Exception:
            proc.kill()
            proc.wait(30)


def _package_zip() -> str:
    """This package as a zip for executors of a real cluster (they import its pure parts)."""
    root = Path(__file__).resolve().parent
    target = Path(tempfile.mkdtemp(prefix="zkctl-report-")) / "pipeline.zip"
    with zipfile.ZipFile(target, "w") as z:
        for f in sorted(root.glob("*.py")):
            z.write(f, f"pipeline/{f.name}")
    return str(target)


# --- reading and classifying lines -----------------------------------------------------


def _spark_type(kind: str) -> Any:
    from pyspark.sql import types as T

    return {
        "long": T.LongType(),
        "int": T.IntegerType(),
        "str": T.StringType(),
        "double": T.DoubleType(),
        "ints": T.ArrayType(T.IntegerType()),
    }[kind]


def line_schema() -> Any:
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(name, _spark_type(kind)) for name, kind in schema.FIELDS.items()]
        + [T.StructField("_corrupt", T.StringType())]
    )


def _hadoop_tail(spark: SparkSession, uri: str, limit: int = 1 << 20) -> bytes | None:
    """The last bytes of a file (through Hadoop's file system API: any URI Spark reads)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    # `uri` is as Spark lists it, percent-encoded (`kafka%20logs`): parsed as a URI, not
    # taken as a path string, which Hadoop would encode again (`kafka%2520logs`).
    path = jvm.org.apache.hadoop.fs.Path(jvm.java.net.URI(uri))
    fs = path.getFileSystem(conf)
    length = int(fs.getFileStatus(path).getLen())
    if length == 0:
        return None
    start = max(0, length - limit)
    stream = fs.open(path)
    try:
        stream.seek(start)
        data = bytes(stream.readNBytes(length - start))
    finally:
        stream.close()
    return data


def torn_lines(spark: SparkSession, files: Iterable[str]) -> list[tuple[str, str]]:
    """(file URI, text) of every last line without its newline."""
    from py4j.protocol import Py4JError

    out = []
    for uri in files:
        if inputs.is_compressed(uri):
            continue
        try:
            data = _hadoop_tail(spark, uri)
        except Py4JError as e:
            raise ReportError(f"cannot read {uri}: {_java_message(e)}") from e
        tail = inputs.torn_tail(data or b"")
        if tail is not None:
            out.append((inputs.normalize_uri(uri), tail.decode("utf-8", errors="replace")))
    return out


def read_lines(spark: SparkSession, sources: list[inputs.ResolvedSource]) -> DataFrame:
    """(cluster, file, value): every line of every source (file as Spark names it)."""
    from pyspark.sql import functions as F

    frames = []
    for s in sources:
        reader = spark.read
        if s.remote:
            reader = reader.option("recursiveFileLookup", "true").option(
                "pathGlobFilter", inputs.FILE_GLOB
            )
            paths = [s.path]
        else:
            # Files already found (a --logs glob expanded by inputs.resolve): Spark globs
            # every path it is handed, so their own `[`, `{`, `*`, `?` and `\` are escaped;
            # and absolute, as Hadoop takes `logs-10:` of `logs-10:00/...` for a scheme.
            paths = [inputs.glob_escape(os.path.abspath(f)) for f in s.files]
        try:
            df = reader.text(paths)
        except Exception as e:
            raise ReportError(f"cannot read {s.path}: {_java_message(e)}") from e
        frames.append(
            df.select(
                F.lit(s.cluster).alias("cluster"),
                F.col("_metadata.file_path").alias("file"),
                F.col("value"),
            )
        )
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _java_message(e: BaseException) -> str:
    """What a Java exception raised through Py4J says (its class and message), not
    Py4J's "An error occurred while calling o123.getFileStatus" and the stack trace."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return _first_line(Exception(str(java.toString())))
        except Exception:  # the JVM may be gone
            pass
    return _first_line(e)


def _java_line(text: str) -> str:
    """A Java exception's text as one line: its first, or for a Python task's traceback
    (Spark's PythonException) the exception that ends it."""
    lines = [x.strip() for x in text.strip().splitlines() if x.strip()]
    if lines and lines[0].endswith("Traceback (most recent call last):"):
        lines = [x for x in lines if not x.startswith("SQLSTATE:")][-1:]
    return lines[0] if lines else ""


def _spark_failure(spark: SparkSession, e: BaseException) -> str:
    """One line for a Spark job that failed (docs/analytics.md: errors are one line): the
    file it could not read and why (a compressed file cut short, one gone since it was
    listed), else the first line of the Java exception at the bottom of the chain (the
    cause, not Spark's "Job aborted due to stage failure" around it). Needs the JVM."""
    from py4j.java_gateway import is_instance_of

    # Py4J's error holds the Java exception; PySpark's own (AnalysisException, ...) keep it
    # as `_origin`.
    java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
    try:
        chain: list[Any] = []
        while java is not None and len(chain) < 32:
            chain.append(java)
            java = java.getCause()
        gateway = spark.sparkContext._gateway
        for j in chain:
            if not is_instance_of(gateway, j, "org.apache.spark.SparkThrowable"):
                continue
            condition = str(j.getCondition() or "")
            path = j.getMessageParameters().get("path")
            if condition.startswith("FAILED_READ_FILE") and path:
                cause = _java_line(str(chain[-1].toString()))
                return f"cannot read {inputs.normalize_uri(str(path))}: {cause}"
        if chain:
            return f"Spark failed: {_java_line(str(chain[-1].toString()))}"
    except Exception:  # a Java exception without those methods, or the JVM gone
        pass
    return f"Spark failed: {_java_message(e)}"


# A line with text after its object, maybe (schema.classify_line finds it no JSON), when
# it ends in `}`: a `}` followed by what cannot follow one inside an object (another
# object, a word), a `}}` or `],[` (no writer's line has one).
_AFTER_OBJECT = r"\}\s*[^\s,}\]]|\}\s*\}\s*$|\]\s*,\s*\["


def classify(lines: DataFrame, torn: list[tuple[str, str]]) -> DataFrame:
    """Every line with its status (pipeline.schema), typed fields, and two hashes of its
    text (the identity used to drop repeated lines). The text and file are kept only for
    lines that are not ok.

    Kept cheap per line: one CASE on the event for what it lacks, and the file name and
    the torn-line test evaluated only for the few lines that need them."""
    from pyspark.sql import functions as F

    col = F.col
    j = F.from_json(
        col("value"),
        line_schema(),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"},
    )

    def field_(name: str) -> Column:
        return col(name)

    # What an event lacks (as schema.missing_field): its required fields, then arrays
    # holding a null (only lines whose text could hold one are looked at closely).
    required: Column | None = None
    for event, names in schema.REQUIRED.items():
        if not names:
            continue
        lacks = F.coalesce(*[F.when(field_(n).isNull(), F.lit(n)) for n in names])
        cond = field_("event") == event
        required = F.when(cond, lacks) if required is None else required.when(cond, lacks)
    assert required is not None
    holes = F.when(
        col("value").rlike(r"[\[,]\s*null"),
        F.coalesce(
            *[
                F.when(F.size(F.array_compact(field_(n))) < F.size(field_(n)), F.lit(n))
                for n in schema.INT_ARRAYS
            ]
        ),
    )
    # A stamp out of schema.TS_RANGE is as unusable as none (ts is the first common field).
    ts_out = F.when(~field_("ts").between(*schema.TS_RANGE), F.lit("ts"))
    common = F.coalesce(ts_out, *[F.when(field_(n).isNull(), F.lit(n)) for n in schema.COMMON])
    file_uri = F.regexp_replace(col("file"), "^file:/+", "file:/")
    is_torn: Column = F.lit(False)
    if torn:
        keys = [f"{f}\u0000{t}" for f, t in torn]
        is_torn = F.concat(file_uri, F.lit("\u0000"), col("value")).isin(keys)
    # Flat columns first (the parsed struct is not copied from step to step).
    # Parsed once in a step of its own (each field taken from the parsed struct after it:
    # taking them from the expression would parse once per field).
    flat = lines.select("cluster", "file", "value", j.alias("j")).select(
        "cluster",
        "file",
        "value",
        *[col(f"j.{name}").alias(name) for name in schema.FIELDS],
        col("j._corrupt").alias("_corrupt"),
    )
    staged = flat.select(
        "*", F.coalesce(required, holes).alias("missing"), common.alias("missing_common")
    )
    missing, missing_common, v = col("missing"), col("missing_common"), field_("v")

    # Spark's JSON reader takes a line's first value and ignores what follows it (two
    # lines run together, garbage), where json.loads, and so schema.classify_line, finds
    # the line no JSON. Only a line ending in another character than `}`, or with text
    # after a `}` that cannot end an object, is checked, by parsing it as an array's
    # element: a single value is the second of `[0,line]` and the first of `[line,0]`.
    def one_of_two(text: Column) -> Column:
        return F.coalesce(F.json_array_length(text) == 2, F.lit(False))

    value = col("value")
    trailing = (~F.rtrim(value).endswith("}") | value.rlike(_AFTER_OBJECT)) & ~(
        one_of_two(F.concat(F.lit("[0,"), value, F.lit("]")))
        & one_of_two(F.concat(F.lit("["), value, F.lit(",0]")))
    )
    corrupt = field_("_corrupt").isNotNull() | trailing
    blank = F.trim(col("value")) == ""
    known = field_("event").isin(*schema.EVENTS)
    status = (
        F.when(blank, "blank")
        .when(trailing, F.when(is_torn, "torn").otherwise("malformed"))
        .when(v > schema.SCHEMA_VERSION, "newer_version")
        .when(corrupt, F.when(is_torn, "torn").otherwise("malformed"))
        .when(v < 1, "invalid")
        .when(missing_common.isNotNull(), "invalid")
        .when(~known, "unknown_event")
        .when(missing.isNotNull(), "invalid")
        .otherwise("ok")
    )
    detail = (
        F.when(blank | corrupt, F.lit(None))
        .when(v > schema.SCHEMA_VERSION, F.concat(F.lit("v="), v.cast("string")))
        .when(v < 1, F.lit("v"))
        .when(missing_common.isNotNull(), missing_common)
        .when(~known, field_("event"))
        .otherwise(missing)
    )
    classified = staged.select("*", status.alias("status"), detail.alias("detail"))
    not_ok = col("status") != "ok"
    return classified.select(
        "cluster",
        F.when(not_ok, file_uri).alias("file"),
        "status",
        "detail",
        F.when(not_ok, col("value")).alias("line"),
        F.xxhash64(col("value")).alias("h1"),
        F.hash(col("value")).alias("h2"),
        *schema.FIELDS,
    )


# --- the pipeline -----------------------------------------------------------------------


def _analyse_cluster(
    tol_ms: int, item: tuple[str, Iterable[dict[str, Any]]]
) -> tuple[str, control.ControlResult]:
    cluster, events = item
    return cluster, control.analyse(events, tol_ms)


def _walk(ctx_b: Any, rows: Iterable[Any]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    return partitions.walk(rows, ctx_b.value)


_STATS_TYPES = {
    "cluster": "str",
    "topic": "str",
    "partition": "int",
    "open_unavailable": "bool",
    "final_isr": "ints",
    "replicas": "ints",
    "first_ts": "long",
    "last_ts": "long",
    "unavailable_ms": "long",
    "under_replicated_ms": "long",
    "final_leader": "int",
    "final_leader_epoch": "int",
}
_WINDOW_TYPES = {
    "cluster": "str",
    "topic": "str",
    "partition": "int",
    "kind": "str",
    "start_ts": "long",
    "end_ts": "long",
    "duration_ms": "long",
    "open": "bool",
    "incident_id": "int",
    "lost_leader": "int",
    "recovered_leader": "int",
    "recovered_reason": "str",
}


def _struct(fields: Iterable[str], types: dict[str, str], default: str = "int") -> Any:
    from pyspark.sql import types as T

    kinds = {
        "str": T.StringType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "bool": T.BooleanType(),
        "double": T.DoubleType(),
        "ints": T.ArrayType(T.IntegerType()),
    }
    return T.StructType([T.StructField(f, kinds[types.get(f, default)]) for f in fields])


TENURE_TYPES = {
    "cluster": "str",
    "start_ts": "long",
    "end_ts": "long",
    "end_reason": "str",
    "resigned_ts": "long",
    "resign_reason": "str",
    "failover_done_ts": "long",
    "failover_ms": "double",
    "overlap_ms": "long",
    "duration_ms": "long",
    "open": "bool",
}
TENURE_FIELDS = (
    "cluster",
    "epoch",
    "broker",
    "start_ts",
    "end_ts",
    "duration_ms",
    "open",
    "end_reason",
    "resigned_ts",
    "resign_reason",
    "failover_done_ts",
    "failover_ms",
    "overlap_ms",
)
GAP_FIELDS = ("cluster", "after_epoch", "before_epoch", "start_ts", "end_ts", "duration_ms")
GAP_TYPES = {"cluster": "str", "start_ts": "long", "end_ts": "long", "duration_ms": "long"}
INCIDENT_TYPES = {
    "cluster": "str",
    "kind": "str",
    "cause": "str",
    "lost_ts": "long",
    "back_ts": "long",
    "new_controller_ts": "long",
    "failover_done_ts": "long",
    "all_leaders_ts": "long",
    "unrecovered": "bool",
    "time_to_controller_ms": "long",
    "time_to_failover_done_ms": "long",
    "time_to_leaders_ms": "long",
    "partition_unavailable_ms": "long",
}
BALANCE_TYPES = {
    "cluster": "str",
    "ts": "long",
    "imbalance_pct": "double",
}
# The errors of a refusal for a stale epoch, the fencing (Kafka 2.8's): a request from an
# older controller epoch, or meant for the broker's previous incarnation, and a partition
# state whose leader epoch is older than the one held (ReplicaManager.becomeLeaderOrFollower
# answers that STALE_CONTROLLER_EPOCH too). A broker refuses a partition state for other
# reasons as well (not a replica, a failed log directory, no log to lead from).
STALE_EPOCH_ERRORS = ("STALE_CONTROLLER_EPOCH", "STALE_BROKER_EPOCH")
FENCING_COLUMNS = (
    "cluster",
    "ts",
    "broker",
    "event",
    "api",
    "controller_id",
    "controller_epoch",
    "broker_epoch",
    "error",
    "topic",
    "partition",
    "leader_epoch",
)


@dataclass
class Report:
    out: str
    summary: dict[str, Any]
    seconds: float


def check_out(master: str, out: str) -> None:
    """With a cluster master, executors write the tables: `out` must name storage they all
    reach, so a URI (hdfs://, s3a://, file:// on a shared mount), not a local path. A local
    `out` must not be, or lie under, a file."""
    if not master.startswith("local") and not inputs.is_uri(out):
        raise ReportError(
            "with a cluster --master, --out must be a URI every executor can write"
            " (hdfs://..., s3a://..., file:// on a shared mount)"
        )
    if inputs.is_remote(out):
        return
    # Under a file, Spark would fail only at the first table written, after the whole job.
    path = Path(inputs.local_path(out)).absolute()
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise ReportError(f"cannot write the report to {out}: {p} is not a directory")
            return


def run(options: ReportOptions, progress: Progress, spark: SparkSession | None = None) -> Report:
    """Make the report. With `spark` given, use that session (and leave it running)."""
    sources = [inputs.resolve(s) for s in options.sources]
    local_files = sum(len(s.files) for s in sources)
    size = sum(s.bytes for s in sources)
    clusters = sorted({s.cluster for s in sources})
    progress(
        f"{len(clusters)} cluster(s), "
        + (f"{local_files} local file(s), {size / 1e6:.1f} MB" if local_files else "")
        + (" + remote paths" if any(s.remote for s in sources) else "")
    )
    check_out(options.master, options.out)
    own = spark is None
    started = time.monotonic()
    if spark is None:
        progress(f"starting Spark ({options.master})")
        spark = start_session(options.master, options.conf)
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    try:
        summary = _run(spark, options, sources, progress)
    except (Py4JError, PySparkException) as e:
        # Said here, while the session lives: the text of a Java exception is fetched from
        # the JVM, which `stop_session` ends.
        raise ReportError(_spark_failure(spark, e)) from e
    finally:
        if own:
            stop_session(spark)
    return Report(options.out, summary, time.monotonic() - started)


def _run(
    spark: SparkSession,
    options: ReportOptions,
    sources: list[inputs.ResolvedSource],
    progress: Progress,
) -> dict[str, Any]:
    from py4j.protocol import Py4JError
    from pyspark import StorageLevel
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    tol = options.tol_ms
    out = options.out.rstrip("/")
    if not inputs.is_uri(out):
        out = os.path.abspath(out)  # `report-10:00` is no URI scheme (read_lines)
    lines = read_lines(spark, sources)
    try:
        listed = lines.inputFiles()
    except (Py4JError, PySparkException) as e:  # a remote listing that failed
        raise ReportError(f"cannot list the log files: {_java_message(e)}") from e
    # As `_metadata.file_path` spells them (percent-encoded URIs), so torn lines match.
    files = [inputs.normalize_uri(f) for f in listed]
    torn = torn_lines(spark, files)
    # Deserialized: Spark then sizes the cached column batches as it goes and keeps on disk
    # what does not fit (a serialized cache unrolls a whole block in the heap first, which
    # ran a 2 GB driver out of memory on 10M lines).
    parsed = classify(lines, torn).persist(StorageLevel.MEMORY_AND_DISK_DESER)
    ok = F.col("status") == "ok"
    try:
        progress(f"reading and classifying lines of {len(files)} file(s)")
        counts = parsed.groupBy("cluster", "status").agg(
            F.count(F.lit(1)).alias("n"),
            F.min(F.when(ok, F.col("ts"))).alias("first_ts"),
            F.max(F.when(ok, F.col("ts"))).alias("last_ts"),
        )
        by_cluster: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"lines": {s: 0 for s in schema.STATUSES}, "first_ts": None, "last_ts": None}
        )
        for r in counts.collect():
            c = by_cluster[r["cluster"]]
            c["lines"][r["status"]] = int(r["n"])
            if r["status"] == "ok":
                c["first_ts"], c["last_ts"] = r["first_ts"], r["last_ts"]
        total = sum(sum(c["lines"].values()) for c in by_cluster.values())
        valid = sum(c["lines"]["ok"] for c in by_cluster.values())
        progress(f"{total:,} lines, {valid:,} usable ({time.monotonic() - t0:.1f} s)")
        if valid == 0:
            raise ReportError(
                f"no usable state-change log lines in {len(files)} file(s)"
                f" ({total:,} lines: {_status_text(by_cluster)})"
            )
        distinct = (
            parsed.filter(ok)
            .select("cluster", "h1", "h2")
            .distinct()
            .groupBy("cluster")
            .count()
            .collect()
        )
        for r in distinct:
            c = by_cluster[r["cluster"]]
            c["lines"]["duplicate"] = c["lines"]["ok"] - int(r["count"])
        log_end = {k: int(v["last_ts"]) for k, v in by_cluster.items() if v["last_ts"] is not None}
        buckets = {
            k: stats.bucket_plan(int(v["first_ts"]), int(v["last_ts"]), options.buckets)
            for k, v in by_cluster.items()
            if v["first_ts"] is not None
        }

        # Control plane: one pure analysis per cluster, on the executors.
        progress("analysing controller tenures and broker losses")
        control_cols = [
            "ts",
            "broker",
            "event",
            "controller",
            "controller_epoch",
            "reason",
            "total_ms",
            "new",
            "dead",
            "bounced",
            "state",
            "topic",
            "remaining",
        ]
        ctl_rows = parsed.filter(ok & F.col("event").isin(*schema.CONTROL_EVENTS)).select(
            "cluster", *control_cols
        )
        results: dict[str, control.ControlResult] = dict(
            ctl_rows.rdd.map(lambda r: (r[0], dict(zip(control_cols, r[1:], strict=True))))
            .groupByKey()
            .map(functools.partial(_analyse_cluster, tol))
            .collect()
        )

        # Partitions: every partition's rows to one task, sorted by epoch, walked.
        progress("walking partition histories")
        ctx = partitions.WalkContext(
            deaths={c: _deaths_by_broker(r.deaths) for c, r in results.items()},
            log_end=log_end,
            deletions={c: r.deletions for c, r in results.items()},
            buckets=buckets,
            tol_ms=tol,
        )
        walk_out = _walk_partitions(spark, parsed, ctx).persist(StorageLevel.MEMORY_AND_DISK)
        stats_df = spark.createDataFrame(
            walk_out.filter(lambda t: t[0] == "stats").map(lambda t: t[1]),
            _struct(partitions.STATS_FIELDS, _STATS_TYPES),
            verifySchema=False,
        )
        windows_df = spark.createDataFrame(
            walk_out.filter(lambda t: t[0] == "window").map(lambda t: t[1]),
            _struct(partitions.WINDOW_FIELDS, _WINDOW_TYPES),
            verifySchema=False,
        )
        balance_sums = walk_out.filter(lambda t: t[0] == "balance").map(lambda t: t[1]).collect()
        # Written once (the walk's Python output crosses into the JVM once per table), then
        # aggregated from the columnar files.
        progress(f"writing partition tables to {out}")
        windows_df.write.mode("overwrite").parquet(f"{out}/partition_windows")
        stats_df.write.mode("overwrite").parquet(f"{out}/partition_stats")
        walk_out.unpersist()
        # Spark globs every path it reads: --out names a directory, never a pattern, so
        # its own `[`, `{`, `*`, `?` and `\` are escaped (writing takes the path as it is).
        windows_df = spark.read.parquet(inputs.glob_escape(f"{out}/partition_windows"))
        stats_df = spark.read.parquet(inputs.glob_escape(f"{out}/partition_stats"))

        progress("aggregating")
        per_incident = {
            (r["cluster"], r["incident_id"]): stats.IncidentWindows(
                int(r["n"]), int(r["last_end"]), bool(r["any_open"]), int(r["ms"])
            )
            for r in windows_df.filter(
                (F.col("kind") == partitions.UNAVAILABLE) & F.col("incident_id").isNotNull()
            )
            .groupBy("cluster", "incident_id")
            .agg(
                F.countDistinct("topic", "partition").alias("n"),
                F.max("end_ts").alias("last_end"),
                F.max(F.col("open").cast("int")).alias("any_open"),
                F.sum("duration_ms").alias("ms"),
            )
            .collect()
        }
        incidents = [
            stats.complete_incident(
                {"cluster": c, **asdict(i)}, per_incident.get((c, i.incident_id))
            )
            for c, r in sorted(results.items())
            for i in r.incidents
        ]
        window_summary = _window_summary(windows_df)
        totals = {
            r["cluster"]: r.asDict()
            for r in stats_df.groupBy("cluster")
            .agg(
                F.count(F.lit(1)).alias("partitions"),
                F.sum("leader_changes").alias("leader_changes"),
                F.sum("isr_shrinks").alias("isr_shrinks"),
                F.sum("isr_expands").alias("isr_expands"),
                F.sum("unclean_elections").alias("unclean_elections"),
                F.sum("unavailable_ms").alias("unavailable_ms"),
                F.sum("unavailable_windows").alias("unavailable_windows"),
                F.sum(F.col("open_unavailable").cast("int")).alias("open_unavailable"),
                # By windows, not milliseconds: a window can last 0 ms, but it happened.
                F.sum(F.when(F.col("unavailable_windows") > 0, 1).otherwise(0)).alias(
                    "partitions_unavailable"
                ),
                F.sum("under_replicated_ms").alias("under_replicated_ms"),
                F.sum("under_replicated_windows").alias("under_replicated_windows"),
                F.sum("duplicates").alias("duplicates"),
                F.sum("orphan_applied").alias("orphan_applied"),
            )
            .collect()
        }
        top = [
            r.asDict()
            # The partitions partitions_unavailable counts (a 0 ms window happened too):
            # the longest first, then those with more windows, ties by name.
            for r in stats_df.filter(F.col("unavailable_windows") > 0)
            .orderBy(
                F.desc("unavailable_ms"),
                F.desc("unavailable_windows"),
                "cluster",
                "topic",
                "partition",
            )
            .select("cluster", "topic", "partition", "unavailable_ms", "unavailable_windows")
            .limit(TOP_PARTITIONS)
            .collect()
        ]
        fencing = (
            parsed.filter(
                ok
                & (
                    (F.col("event") == "request_rejected")
                    | ((F.col("event") == "leader_and_isr") & (F.col("result") == "rejected"))
                )
            )
            .dropDuplicates(["cluster", "h1", "h2"])
            .select(*FENCING_COLUMNS)
        )
        fencing_counts = [
            r.asDict()
            for r in fencing.groupBy("cluster", "event", "api", "error")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.min("controller_epoch").alias("min_epoch"),
                F.max("controller_epoch").alias("max_epoch"),
            )
            .collect()
        ]
        balance = stats.leader_balance(balance_sums, buckets)

        progress(f"writing the other tables to {out}")
        _write(spark, _tenure_rows(results), TENURE_FIELDS, TENURE_TYPES, f"{out}/tenures")
        _write(spark, _gap_rows(results), GAP_FIELDS, GAP_TYPES, f"{out}/controller_gaps")
        _write(
            spark,
            [tuple(i[k] for k in stats.INCIDENT_FIELDS) for i in incidents],
            stats.INCIDENT_FIELDS,
            INCIDENT_TYPES,
            f"{out}/incidents",
        )
        _write(spark, balance, stats.BALANCE_FIELDS, BALANCE_TYPES, f"{out}/leader_balance")
        fencing.coalesce(1).write.mode("overwrite").parquet(f"{out}/fencing")
        parsed.filter(~F.col("status").isin("ok", "blank")).select(
            "cluster", "file", "status", "detail", "line"
        ).write.mode("overwrite").parquet(f"{out}/rejected_lines")

        summary = build_summary(
            options,
            sources,
            by_cluster,
            results,
            incidents,
            totals,
            window_summary,
            fencing_counts,
            time.monotonic() - t0,
        )
        plots = {
            "tenures": {
                c: [
                    (t.epoch, t.broker, t.start_ts, t.end_ts or log_end.get(c, t.start_ts))
                    for t in r.tenures
                ]
                for c, r in results.items()
            },
            "gaps": {c: [(g.start_ts, g.end_ts) for g in r.gaps] for c, r in results.items()},
            "incidents": incidents,
            "top_partitions": top,
            "balance": balance,
        }
        _write_text(spark, f"{out}/summary.json", json.dumps(summary, indent=1, default=str))
        _write_text(spark, f"{out}/report.html", html.render(summary, plots))
        return summary
    finally:
        parsed.unpersist()


def _status_text(by_cluster: dict[str, dict[str, Any]]) -> str:
    agg: dict[str, int] = defaultdict(int)
    for c in by_cluster.values():
        for k, v in c["lines"].items():
            agg[k] += v
    return ", ".join(f"{v:,} {k}" for k, v in agg.items() if v)


def _deaths_by_broker(deaths: list[control.Death]) -> dict[int, list[control.Death]]:
    out: dict[int, list[control.Death]] = defaultdict(list)
    for d in deaths:
        out[d.broker].append(d)
    for v in out.values():
        v.sort(key=lambda d: d.lost_ts)
    return dict(out)


def _walk_partitions(spark: SparkSession, parsed: DataFrame, ctx: partitions.WalkContext) -> Any:
    """The walker's tagged outputs (an RDD), from every partition's sorted rows."""
    from pyspark.sql import functions as F

    col = F.col
    ok = col("status") == "ok"
    event = col("event")
    rows = parsed.filter(
        ok
        & (
            event.isin("partition_state", "isr_change")
            | (
                (event == "leader_and_isr")
                & (
                    (col("result") == "applied")
                    | (
                        (col("result") == "rejected")
                        & ~F.coalesce(col("error"), F.lit("")).isin(*STALE_EPOCH_ERRORS)
                    )
                )
                & (col("broker") == col("leader"))
            )
        )
    ).select(
        "cluster",
        "topic",
        "partition",
        "leader_epoch",
        F.when(event == "partition_state", partitions.RANK_STATE)
        .when(event == "leader_and_isr", partitions.RANK_APPLIED)
        .otherwise(partitions.RANK_ISR)
        .alias("rank"),
        F.when(event != "leader_and_isr", col("zk_version")).alias("zk_version"),
        "ts",
        "broker",
        "leader",
        "isr",
        F.when(event != "isr_change", col("replicas")).alias("replicas"),
        F.when(event == "partition_state", col("controller_epoch")).alias("controller_epoch"),
        # A leader's refusal of its state (partitions.REFUSED), not as fencing of a stale
        # request: it did not take over.
        F.when(event == "partition_state", col("reason"))
        .when(col("result") == "rejected", F.lit(partitions.REFUSED))
        .alias("reason"),
        "h1",
        "h2",
        F.coalesce(col("why").endswith(partitions.FOUND_WRITTEN), F.lit(False)).alias("found"),
    )
    # A topic deleted and created again starts its leader epochs again: the walker splits
    # a partition's rows into its topic's incarnations (partitions.generations_of).
    keys = ["cluster", "topic", "partition"]
    n = int(spark.conf.get("spark.sql.shuffle.partitions") or "8")
    ordered = (
        rows.select(*partitions.ROW_FIELDS)
        .repartition(n, *keys)
        .sortWithinPartitions(*keys, "leader_epoch", "rank", "zk_version", "ts", "broker", "h1")
    )
    ctx_b = spark.sparkContext.broadcast(ctx)
    return ordered.rdd.mapPartitions(functools.partial(_walk, ctx_b))


def _window_summary(windows_df: DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    from pyspark.sql import functions as F

    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    rows = (
        windows_df.groupBy("cluster", "kind")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.percentile_approx("duration_ms", [0.5, 0.9, 0.99], 100_000).alias("p"),
            F.max("duration_ms").alias("max"),
            F.sum("duration_ms").alias("total"),
            F.sum(F.col("open").cast("int")).alias("open"),
        )
        .collect()
    )
    for r in rows:
        p = r["p"] or [None, None, None]
        out[r["cluster"]][r["kind"]] = {
            "count": int(r["count"]),
            "p50": p[0],
            "p90": p[1],
            "p99": p[2],
            "max": r["max"],
            "total_ms": int(r["total"] or 0),
            "open": int(r["open"] or 0),
        }
    return out


def _tenure_rows(results: dict[str, control.ControlResult]) -> list[tuple[Any, ...]]:
    rows = []
    for c, r in sorted(results.items()):
        for t in r.tenures:
            rows.append(
                (
                    c,
                    t.epoch,
                    t.broker,
                    t.start_ts,
                    t.end_ts,
                    None if t.end_ts is None else t.end_ts - t.start_ts,
                    t.end_ts is None,
                    t.end_reason,
                    t.resigned_ts,
                    t.resign_reason,
                    t.failover_done_ts,
                    t.failover_ms,
                    t.overlap_ms,
                )
            )
    return rows


def _gap_rows(results: dict[str, control.ControlResult]) -> list[tuple[Any, ...]]:
    return [
        (c, g.after_epoch, g.before_epoch, g.start_ts, g.end_ts, g.duration_ms)
        for c, r in sorted(results.items())
        for g in r.gaps
    ]


def _write(
    spark: SparkSession,
    rows: list[tuple[Any, ...]],
    fields: Iterable[str],
    types: dict[str, str],
    path: str,
) -> None:
    df = spark.createDataFrame(rows, _struct(fields, types), verifySchema=False)
    df.coalesce(1).write.mode("overwrite").parquet(path)


def _write_text(spark: SparkSession, uri: str, text: str) -> None:
    if not inputs.is_remote(uri):
        path = Path(inputs.local_path(uri))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(uri)
    stream = path.getFileSystem(conf).create(path, True)
    try:
        stream.write(bytearray(text.encode("utf-8")))
    finally:
        stream.close()


# --- the summary ------------------------------------------------------------------------


def build_summary(
    options: ReportOptions,
    sources: list[inputs.ResolvedSource],
    by_cluster: dict[str, dict[str, Any]],
    results: dict[str, control.ControlResult],
    incidents: list[dict[str, Any]],
    totals: dict[str, dict[str, Any]],
    windows: dict[str, dict[str, dict[str, Any]]],
    fencing_counts: list[dict[str, Any]],
    seconds: float,
) -> dict[str, Any]:
    lines_total: dict[str, int] = defaultdict(int)
    clusters: dict[str, Any] = {}
    for name in sorted(by_cluster):
        c = by_cluster[name]
        for k, v in c["lines"].items():
            lines_total[k] += v
        r = results.get(name, control.ControlResult())
        inc = [i for i in incidents if i["cluster"] == name]
        t = totals.get(name, {})
        gaps = [g.duration_ms for g in r.gaps]
        fence = [f for f in fencing_counts if f["cluster"] == name]
        first, last = c["first_ts"], c["last_ts"]
        clusters[name] = {
            "lines": dict(c["lines"]),
            "first_ts": first,
            "last_ts": last,
            "span_s": None if first is None else round((last - first) / 1000, 3),
            "controller": {
                "tenures": len(r.tenures),
                "epochs": [r.tenures[0].epoch, r.tenures[-1].epoch] if r.tenures else None,
                "end_reasons": _count(t_.end_reason for t_ in r.tenures),
                "no_controller_ms": {
                    "total": sum(gaps),
                    **stats.summarize(gaps),
                },
                "zombies": sum(1 for t_ in r.tenures if t_.overlap_ms is not None),
                "anomalies": r.anomalies,
            },
            "incidents": {
                "total": len(inc),
                "controller": sum(1 for i in inc if i["kind"] == "controller"),
                "broker": sum(1 for i in inc if i["kind"] == "broker"),
                "with_leaderless_partitions": sum(1 for i in inc if i["affected_partitions"]),
                "unrecovered": sum(1 for i in inc if i["unrecovered"]),
                "causes": _count(i["cause"] for i in inc),
            },
            "failover_latency_ms": {
                "to_new_controller": stats.summarize(i["time_to_controller_ms"] for i in inc),
                "to_failover_done": stats.summarize(i["time_to_failover_done_ms"] for i in inc),
                "to_all_leaders": stats.summarize(i["time_to_leaders_ms"] for i in inc),
            },
            "partitions": {
                "count": int(t.get("partitions") or 0),
                "leader_changes": int(t.get("leader_changes") or 0),
                "isr_shrinks": int(t.get("isr_shrinks") or 0),
                "isr_expands": int(t.get("isr_expands") or 0),
                "unclean_elections": int(t.get("unclean_elections") or 0),
                "partitions_unavailable": int(t.get("partitions_unavailable") or 0),
                "unavailable_ms": int(t.get("unavailable_ms") or 0),
                "under_replicated_ms": int(t.get("under_replicated_ms") or 0),
                "orphan_applied": int(t.get("orphan_applied") or 0),
                "unavailability_windows_ms": windows.get(name, {}).get(
                    partitions.UNAVAILABLE, {"count": 0}
                ),
                "under_replication_windows_ms": windows.get(name, {}).get(
                    partitions.UNDER_REPLICATED, {"count": 0}
                ),
            },
            "fencing": fencing_summary(fence),
        }
    every = incidents
    return {
        "title": options.title,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "inputs": [
            {
                "cluster": s.cluster,
                "path": s.path,
                "files": len(s.files) if not s.remote else None,
                "bytes": s.bytes if not s.remote else None,
            }
            for s in sources
        ],
        "options": {"skew_tolerance_ms": options.tol_ms, "master": options.master},
        "lines": dict(lines_total),
        "failover_latency_ms": {
            "to_new_controller": stats.summarize(i["time_to_controller_ms"] for i in every),
            "to_failover_done": stats.summarize(i["time_to_failover_done_ms"] for i in every),
            "to_all_leaders": stats.summarize(i["time_to_leaders_ms"] for i in every),
        },
        "clusters": clusters,
    }


def _count(items: Iterable[Any]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in items:
        out[str(x)] += 1
    return dict(out)


def fencing_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One cluster's fencing table counted: every refusal by event and error (`total`
    all of them), and apart the ones that are fencing (`stale`) from the partition states
    a broker refused for another reason (`other_refusals`, by error), such as
    REPLICA_NOT_AVAILABLE: told to lead a partition whose log it does not have (item 34).
    """
    stale = [r for r in rows if r["error"] in STALE_EPOCH_ERRORS]
    return {
        "request_rejected": _fence(r for r in rows if r["event"] == "request_rejected"),
        "leader_and_isr_rejected": _fence(r for r in rows if r["event"] == "leader_and_isr"),
        "total": sum(int(r["n"]) for r in rows),
        "stale": sum(int(r["n"]) for r in stale),
        "other_refusals": _fence(r for r in rows if r["error"] not in STALE_EPOCH_ERRORS),
    }


def _fence(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        label = f"{r['api']} {r['error']}" if r.get("api") else str(r["error"])
        out[label] += int(r["n"])
    return dict(sorted(out.items()))
