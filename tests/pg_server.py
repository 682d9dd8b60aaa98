"""A real PostgreSQL server for the tests: ``FILECACHE_TEST_PG`` (as ``.ci/run`` exports), else a
throwaway cluster started here by ``.ci/start_postgres``; without either, the tests that need one
skip, saying why (under ``CI`` they fail instead: CI must run them).

Fixtures (import them into a test module):
- ``pg_server``: the server's base URL (one per test run).
- ``pg_url``: the URL of a fresh database of its own for one test, dropped afterwards.
- ``pg_cluster``: a cluster of the test's own that it may kill and resume (``Cluster``).
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
START = REPO / ".ci" / "start_postgres"
# Read at import: conftest's autouse fixture hides FILECACHE_* from every test.
GIVEN_URL = os.environ.get("FILECACHE_TEST_PG")


@dataclass
class Cluster:
    """A throwaway cluster started by ``.ci/start_postgres``."""

    url: str
    data: str

    def kill(self) -> None:
        """Stop the server at once (``immediate``: as a crash)."""
        subprocess.run([str(START), "--kill", self.data], check=True, capture_output=True)

    def resume(self) -> None:
        """Start the killed server again on the same port."""
        subprocess.run([str(START), "--resume", self.data], check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run([str(START), "--stop", self.data], check=False, capture_output=True)


def start_cluster() -> Cluster:
    """A new cluster; skips (fails under CI) with the script's reason when none can start."""
    done = subprocess.run([str(START)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        message = f"no PostgreSQL server could be started (.ci/start_postgres: {reason})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        found[name] = shlex.split(value)[0]
    return Cluster(found["FILECACHE_TEST_PG"], found["FILECACHE_TEST_PG_DATA"])


def _with_database(url: str, dbname: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{dbname}"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    given = GIVEN_URL
    cluster = None if given else start_cluster()
    url = given or cluster.url  # type: ignore[union-attr]
    psycopg.connect(url, connect_timeout=10).close()  # a given server that is down: an error
    try:
        yield url
    finally:
        if cluster is not None:
            cluster.stop()


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    import psycopg

    name = "fc_test_" + secrets.token_hex(4)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield _with_database(pg_server, name)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def pg_cluster() -> Iterator[Cluster]:
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()
