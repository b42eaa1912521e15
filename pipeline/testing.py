"""One local Spark session shared by every test that needs one (starting a JVM costs
seconds, and a test run should pay that once, not once per module).

Each test module declares a session-scoped fixture over `shared_session`; the session is
started by the first and stopped when the last of them is torn down:

    @pytest.fixture(scope="session")
    def spark() -> Iterator[Any]:
        with testing.shared_session() as session:
            yield session
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pipeline import job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Small and predictable: two cores, few shuffle partitions (tests' logs are small).
TEST_MASTER = "local[2]"
TEST_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "1g",
}

# A JVM that hung starting is killed and started again, once (CI's run of 2026-12-07 went
# silent at the first Spark test, before its first dot). Both attempts fit in that test's
# 300 s timeout.
START_TIMEOUT_S = 100.0
START_ATTEMPTS = 2

_shared: list[SparkSession] = []
_users = 0


def start_session(
    timeout_s: float = START_TIMEOUT_S, attempts: int = START_ATTEMPTS
) -> SparkSession:
    """The tests' session: a start the JVM does not answer is tried again."""
    for _ in range(attempts - 1):
        try:
            return job.start_session(TEST_MASTER, TEST_CONF, start_timeout_s=timeout_s)
        except job.SparkStartTimeout as e:
            print(f"{e}; starting it again", file=sys.stderr)
    return job.start_session(TEST_MASTER, TEST_CONF, start_timeout_s=timeout_s)


@contextmanager
def shared_session() -> Iterator[SparkSession]:
    """The shared session, started on first use and stopped when its last user is done."""
    global _users
    if not _shared:
        _shared.append(start_session())
    _users += 1
    try:
        yield _shared[0]
    finally:
        _users -= 1
        if _users == 0:
            job.stop_session(_shared.pop())
