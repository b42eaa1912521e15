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

_shared: list[SparkSession] = []
_users = 0


@contextmanager
def shared_session() -> Iterator[SparkSession]:
    """The shared session, started on first use and stopped when its last user is done."""
    global _users
    if not _shared:
        _shared.append(job.start_session(TEST_MASTER, TEST_CONF))
    _users += 1
    try:
        yield _shared[0]
    finally:
        _users -= 1
        if _users == 0:
            job.stop_session(_shared.pop())
