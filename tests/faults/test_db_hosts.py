"""A database URL with several hosts (`postgresql://…@A,B/db?target_session_attrs=read-write`) that finds
none to use names each host's own cause — refused, read-only, no answer — not only the first host's error.
The read-only host is a real hot standby of the test's cluster (pg_basebackup)."""

from collections.abc import Iterator

import pytest

from tests.conftest import einmal
from tests.support.pgcluster import PgCluster, pg_cluster  # noqa: F401  (fixtures)
from tests.support.smtp_servers import free_port


@pytest.fixture(scope="module")
def standby(pg_cluster: PgCluster) -> Iterator[PgCluster]:  # noqa: F811
    cluster = PgCluster.standby_of(pg_cluster)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


def test_each_host_is_named_with_its_own_cause(standby: PgCluster) -> None:
    closed = free_port()
    url = (f"postgresql://postgres@127.0.0.1:{closed},127.0.0.1:{standby.port}/postgres"
           "?target_session_attrs=read-write")
    result = einmal("migrate", dsn=url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"einmal: cannot reach PostgreSQL at 127.0.0.1:{closed},127.0.0.1:{standby.port}/postgres: no host accepts "
        f"writes (target_session_attrs=read-write): 127.0.0.1:{closed}: connection refused; "
        f"127.0.0.1:{standby.port}: read-only (a standby)"), result.stderr


def test_a_read_only_host_alone_is_named_as_read_only_in_one_line(standby: PgCluster) -> None:
    url = f"postgresql://postgres@127.0.0.1:{standby.port}/postgres?target_session_attrs=read-write"
    result = einmal("migrate", dsn=url)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"einmal: cannot reach PostgreSQL at 127.0.0.1:{standby.port}/postgres: no host accepts writes "
        f"(target_session_attrs=read-write): 127.0.0.1:{standby.port}: read-only (a standby)"), result.stderr
