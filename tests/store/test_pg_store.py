"""The PostgreSQL store on a real server: store URLs, the schema, sharing across sessions and
processes, the fleet's CLI, retries, a server that dies, and ``serve --transport http`` replicas.

The server comes from ``pg_server`` (``FILECACHE_TEST_PG`` or a throwaway cluster); without one
these tests skip, saying why.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listening import wait_until_listening
from pg_server import Cluster
from test_concurrency import KILLED_WRITER, _run_workers
from test_invariant import OPS, PATHS, contents, run_ops
from test_store import event

from filecache import FileCache
from filecache.cli import main
from filecache.errors import ConfigError, StoreError
from filecache.store.opening import open_store
from filecache.store.store import Event, Store

psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

from filecache.store import migrations  # noqa: E402
from filecache.store.dialect import POSTGRESQL  # noqa: E402
from filecache.store.migrations import MIGRATIONS  # noqa: E402
from filecache.store.pg_store import PostgresStore  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TEST_TIMEOUT = 90.0


def rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m filecache ARGS`` in a process of its own (another agent, another machine)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FILECACHE_")}
    return subprocess.run(
        [sys.executable, "-m", "filecache", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd or REPO,
        env=env,
    )


# Store URLs ---------------------------------------------------------------------------------


def append(store: Store, event: Event, views: dict[str, str | None] | None = None) -> None:
    """Commit one event (and view changes) at its session's head (what a session's turn does)."""
    store.commit(event.session_id, store.head(event.session_id), [event], views or {})


def test_a_postgresql_url_opens_the_postgres_store(pg_url: str) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        with open_store(Path("."), url) as store:
            assert isinstance(store, PostgresStore)
            assert "@" not in repr(store)  # no user or password in what is shown


@pytest.mark.parametrize(
    "store",
    ["xyz://host/db", "mysql://root@127.0.0.1/db", "sqlite:///tmp/x.db", "s3://bucket/key"],
)
def test_unknown_store_url_schemes_are_refused_and_never_a_path(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "root").mkdir()
    with pytest.raises(ConfigError, match="unknown store URL scheme") as info:
        FileCache(tmp_path / "root", store=store)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]  # no folder named 'xyz:'
    assert not (tmp_path / "root" / ".filecache").exists()


def test_a_url_made_into_a_path_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="pass the URL as a string"):
        open_store(tmp_path, Path("postgresql://postgres@127.0.0.1:5432/postgres"))
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_an_unknown_scheme_in_one_line(tmp_path: Path) -> None:
    done = cli("stats", "--store", "xyz://somewhere/db", cwd=tmp_path)
    assert done.returncode == ConfigError.exit_code
    assert done.stderr.count("\n") == 1 and "unknown store URL scheme 'xyz://'" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_store_urls_from_the_environment_and_pyproject(
    pg_url: str, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FILECACHE_STORE", pg_url)
    with FileCache(root) as cache:
        assert isinstance(cache.engine.store, PostgresStore)
        cache.session("env").read("notes.txt")
    monkeypatch.delenv("FILECACHE_STORE")
    with FileCache(root, store=pg_url) as cache:  # the same server, named by the caller
        assert [s.session_id for s in cache.engine.store.sessions()] == ["env"]
    # A repository's own pyproject.toml may not send its reads to a server (issue 31, 6): the
    # URL is ignored with a warning and the local store is used.
    (root / "pyproject.toml").write_text(f'[tool.filecache]\nstore = "{pg_url}"\n')
    with FileCache(root) as cache:
        assert not isinstance(cache.engine.store, PostgresStore)


def test_an_unreachable_server_is_one_clear_store_error() -> None:
    url = f"postgresql://postgres:sekrit@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(StoreError) as info:
        open_store(Path("."), url)
    message = str(info.value)
    assert message.startswith("cannot open the PostgreSQL store at 127.0.0.1:")
    assert "check that the server is running" in message
    assert "sekrit" not in message and "\n" not in message


# The schema ---------------------------------------------------------------------------------


def test_migrations_are_recorded_once_even_when_processes_open_at_once(pg_url: str) -> None:
    code = (
        "import sys; from filecache.store.pg_store import PostgresStore; "
        "PostgresStore(sys.argv[1]).close()"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    with PostgresStore(pg_url):
        pass
    names = [n for (n,) in rows(pg_url, "SELECT name FROM _migrations ORDER BY name")]
    history = [m.__name__ for m in MIGRATIONS]  # and the old history's names of the same steps
    old = [a for n in history for a in migrations.aliases(n, POSTGRESQL)]
    assert old == ["m002_intents", "m003_commit_function"]
    assert names == sorted(history + old)


# Sharing across sessions, machines and processes ------------------------------------------------

BIG = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(400))


def test_a_version_parsed_once_serves_the_fleet(pg_url: str, tmp_path: Path) -> None:
    """Two machines (two roots, two stores objects) on one database: the second one's outline
    and token counts of the same bytes come from the store, and its blob is not stored twice."""
    roots = []
    for name in ("machine-a", "machine-b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "big.py").write_text(BIG)
        roots.append(tmp_path / name)
    with FileCache(roots[0], store=pg_url, exact_counts=True) as a:
        first = a.session("a").read("big.py", mode="outline")
    cached = rows(pg_url, "SELECT namespace, key, value FROM cache ORDER BY namespace, key")
    blobs = rows(pg_url, "SELECT version FROM blobs")
    assert blobs == [(first.version,)]
    assert {n for n, _, _ in cached} >= {"outline+s1", "tokens+s1", "blob+s1"}  # store.seal
    with FileCache(roots[1], store=pg_url, exact_counts=True) as b:
        second = b.session("b").read("big.py", mode="outline")
    assert second.version == first.version and second.text == first.text
    assert rows(pg_url, "SELECT version FROM blobs") == blobs
    after = rows(pg_url, "SELECT namespace, key, value FROM cache ORDER BY namespace, key")
    own = ("meta", "session-root")  # per store and per session, not derivations
    assert [r for r in after if r[0] not in own] == [r for r in cached if r[0] not in own]


def test_deny_listed_files_leave_nothing_in_the_shared_store(pg_url: str, root: Path) -> None:
    (root / ".env").write_text("API_KEY=secret-value-123\n")
    with FileCache(root, store=pg_url) as cache:
        result = cache.session("s").read(".env")
    assert "secret-value-123" in result.text
    assert rows(pg_url, "SELECT 1 FROM blobs WHERE version = %s", (result.version,)) == []
    for namespace, key, value in rows(pg_url, "SELECT namespace, key, value FROM cache"):
        assert result.version not in key and "secret-value" not in value, namespace
    assert all("secret" not in str(r) for r in rows(pg_url, "SELECT * FROM archive"))


def test_a_session_read_in_one_process_continues_in_another(pg_url: str, root: Path) -> None:
    base = ("read", "notes.txt", "--root", root, "--store", pg_url, "--session", "agent-7")
    first = cli(*base, "--call-id", "call_1", "--json")
    assert first.returncode == 0, first.stderr
    again = cli(*base, "--call-id", "call_2", "--json")
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert answer["kind"] == "unchanged"
    assert answer["base_call_id"] == "call_1"
    assert "call_1" in answer["text"]
    assert not (root / ".filecache").exists()


# The fleet's CLI ----------------------------------------------------------------------------------


def test_concurrent_cli_reads_of_one_session_all_succeed_on_postgres(
    pg_url: str, root: Path
) -> None:
    """Six processes read one file in one session at once: one gets the content, and the five
    others a FileRef to a call that succeeded; seqs 1..6."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "filecache",
                "read",
                "notes.txt",
                "--root",
                str(root),
                "--store",
                pg_url,
                "--session",
                "shared",
                "--call-id",
                f"c{i}",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )  # fmt: skip
        for i in range(6)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    assert sorted(r["kind"] for r in results) == ["full"] + ["unchanged"] * 5
    ids = {r["call_id"] for r in results}
    assert all(r["base_call_id"] in ids for r in results if r["kind"] == "unchanged")
    got = rows(pg_url, "SELECT seq FROM events WHERE session_id = 'shared' ORDER BY seq")
    assert [seq for (seq,) in got] == [1, 2, 3, 4, 5, 6]


def test_stats_and_sessions_across_the_fleet(pg_url: str, root: Path, tmp_path: Path) -> None:
    for agent in ("agent-a", "agent-b"):
        for call in ("c1", "c2"):
            done = cli("read", "notes.txt", "--root", root, "--store", pg_url,
                       "--session", agent, "--call-id", call)  # fmt: skip
            assert done.returncode == 0, done.stderr
    runner = CliRunner()
    listed = runner.invoke(main, ["sessions", "list", "--store", pg_url, "--json"])
    assert listed.exit_code == 0, listed.output
    got = {s["session_id"]: s for s in json.loads(listed.output)["sessions"]}
    assert sorted(got) == ["agent-a", "agent-b"]
    stats = runner.invoke(
        main, ["stats", "--store", pg_url, "--json", "--html", str(tmp_path / "s.html")]
    )
    assert stats.exit_code == 0, stats.output
    report = json.loads(stats.stdout)
    text = json.dumps(report)
    assert "agent-a" in text and "agent-b" in text
    assert "agent-a" in (tmp_path / "s.html").read_text()
    plain = runner.invoke(main, ["stats", "--store", pg_url])
    assert plain.exit_code == 0 and "unchanged" in plain.output
    shown = runner.invoke(main, ["sessions", "show", "agent-a", "--store", pg_url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert [e["call_id"] for e in json.loads(shown.output)["events"]] == ["c1", "c2"]
    deleted = runner.invoke(main, ["sessions", "delete", "agent-a", "--store", pg_url])
    assert deleted.exit_code == 0, deleted.output
    assert rows(pg_url, "SELECT session_id FROM sessions") == [("agent-b",)]


def test_sessions_gc_on_postgres(pg_url: str) -> None:
    with PostgresStore(pg_url) as store:
        for version in ("old-only", "kept", "orphan"):
            store.put_blob(version, version.encode())
        append(store, event(1, "old", version="old-only", created=100.0), {"a.py": "state"})
        append(store, event(1, "new", version="kept"))
    runner = CliRunner()
    done = runner.invoke(main, ["sessions", "gc", "--store", pg_url, "--older-than", "1", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output) == {
        "retention_days": 1.0,
        "sessions_deleted": 1,
        "blobs_deleted": 2,
    }
    assert rows(pg_url, "SELECT session_id FROM sessions") == [("new",)]
    assert rows(pg_url, "SELECT version FROM blobs") == [("kept",)]
    assert rows(pg_url, "SELECT * FROM views") == []


# Retries and failures -------------------------------------------------------------------------


def test_a_serialization_failure_is_retried(pg_url: str) -> None:
    """A real 40001: the work reads a row under SERIALIZABLE, another connection changes it and
    commits, the work's update then fails; the store runs the work again and it succeeds."""
    attempts: list[int] = []
    with PostgresStore(pg_url) as store:
        store.cache_put("meta", "n", "0")

        def work(conn: Any) -> str:
            attempts.append(1)
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            (value,) = conn.execute(
                "SELECT value FROM cache WHERE namespace = 'meta' AND key = 'n'"
            ).fetchone()
            if len(attempts) == 1:
                with psycopg.connect(pg_url, autocommit=True) as other:
                    other.execute("UPDATE cache SET value = '10' WHERE key = 'n'")
            conn.execute(
                "UPDATE cache SET value = %s WHERE namespace = 'meta' AND key = 'n'",
                (str(int(value) + 1),),
            )
            return str(value)

        assert store._transaction(work) == "10"
        assert len(attempts) == 2
        assert store.cache_get("meta", "n") == "11"


def test_more_lock_holders_than_lock_connections_wait_their_turn(pg_url: str) -> None:
    """Two lock connections, four threads holding different locks for 1 s each: the last two
    wait for a connection past the pool's 0.5 s timeout, as they would wait for the lock."""
    errors: list[BaseException] = []
    guard = threading.Lock()
    inside = most = 0
    with PostgresStore(pg_url, max_connections=2, timeout=0.5) as store:

        def hold(i: int) -> None:
            nonlocal inside, most
            try:
                with store.lock(f"path:/r\0{i}"):
                    with guard:
                        inside += 1
                        most = max(most, inside)
                    time.sleep(1.0)
                    with guard:
                        inside -= 1
            except BaseException as exc:  # collected, asserted empty below
                errors.append(exc)

        threads = [threading.Thread(target=hold, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []
    assert most == 2  # two at a time: one per lock connection, the others waited


def test_a_killed_server_is_a_store_error_and_no_stale_answer_after_it_returns(
    pg_cluster: Cluster, root: Path
) -> None:
    with FileCache(root, store=pg_cluster.url) as cache:
        session = cache.session("agent")
        first = session.read("notes.txt", call_id="r1")
        assert first.kind == "full"
        assert session.read("notes.txt", call_id="r2").kind == "unchanged"
        pg_cluster.kill()
        with pytest.raises(StoreError, match="check that the server is running"):
            session.read("notes.txt", call_id="r3")
        # The file changes while the server is down...
        text = (root / "notes.txt").read_text()
        (root / "notes.txt").write_text(text.replace("line 30:", "line 30 (changed):"))
        pg_cluster.resume()
        # ...and after it returns, the session answers from disk, never 'unchanged'.
        after = session.read("notes.txt", call_id="r4")
        assert after.kind in ("diff", "full")
        assert "line 30 (changed):" in after.text
        assert session.read("notes.txt", call_id="r5").kind == "unchanged"
    with PostgresStore(pg_cluster.url) as store:
        assert [e.call_id for e in store.events("agent")] == ["r1", "r2", "r4", "r5"]


# Many processes on one file ----------------------------------------------------------------------

_EDITOR = """
import sys
from pathlib import Path
from filecache import FileCache
from filecache.errors import FileCacheError
root, url, me, n = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
with FileCache(root, store=url) as cache:
    session = cache.session(me)
    for j in range(n):
        for attempt in range(200):
            try:
                session.read("shared.txt")
                session.edit("shared.txt", "END\\n", f"{me}-{j}\\nEND\\n")
                break
            except FileCacheError as exc:  # lost a race: the file changed; read it again
                if attempt == 199:
                    raise
"""


def test_four_processes_sixty_edits_each_lose_none(pg_url: str, root: Path) -> None:
    (root / "shared.txt").write_text("START\nEND\n")
    procs = [
        subprocess.Popen([sys.executable, "-c", _EDITOR, str(root), pg_url, f"p{i}", "60"])
        for i in range(4)
    ]
    assert [p.wait(timeout=600) for p in procs] == [0, 0, 0, 0]
    lines = (root / "shared.txt").read_text().splitlines()
    assert lines[0] == "START" and lines[-1] == "END"
    assert sorted(lines[1:-1]) == sorted(f"p{i}-{j}" for i in range(4) for j in range(60))
    for i in range(4):  # per process, its own edits in order
        mine = [line for line in lines if line.startswith(f"p{i}-")]
        assert mine == [f"p{i}-{j}" for j in range(60)]
    with PostgresStore(pg_url) as store:
        edits = [
            e for s in store.sessions() for e in store.events(s.session_id) if e.tool == "edit"
        ]
        assert len(edits) == 240 and {e.kind for e in edits} == {"edited"}


# serve --transport http replicas ------------------------------------------------------------------


@pytest.fixture
def start_replicas(pg_url: str, root: Path, tmp_path: Path) -> Iterator[Any]:
    """Starts two ``filecache serve --transport http`` processes on one PostgreSQL store (with
    extra options) and gives their URLs; they are stopped after the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(*extra: str) -> list[str]:
        ports = [free_port(), free_port()]
        logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
        for port, log in zip(ports, logs, strict=True):
            args = ["-m", "filecache", "serve", "--root", str(root), "--store", pg_url,
                    "--transport", "http", "--port", str(port), *extra]  # fmt: skip
            with log.open("w") as out:
                procs.append(subprocess.Popen([sys.executable, *args], stdout=out, stderr=out))
        for port, proc, log in zip(ports, procs, logs, strict=True):
            wait_until_listening(proc, port, log)
        return [f"http://127.0.0.1:{port}/mcp" for port in ports]

    try:
        yield start
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=10)


@pytest.fixture
def replicas(start_replicas: Any) -> list[str]:
    urls: list[str] = start_replicas()
    return urls


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_replicas_serve_one_session_in_turn(
    replicas: list[str], root: Path, anyio_backend: str
) -> None:
    """A client whose connection moves to another replica keeps its session (ledger, stats,
    ref window); the new connection takes the session's lease, so it starts with an empty view
    (its first read is content), and the connection it left, if still live, is never answered
    from what the new one did."""
    from mcp_client import http_session, meta_of, text_of

    header = {"filecache-session": "fleet-agent-1"}

    async def read(client: Any) -> dict[str, Any]:
        result = await client.call_tool("read_file", {"path": "notes.txt"})
        assert not result.is_error, text_of(result)
        return meta_of(result) | {"text": text_of(result)}

    with anyio.fail_after(TEST_TIMEOUT):
        async with http_session(replicas[0], header) as one:
            r1 = await read(one)
            r2 = await read(one)
            async with http_session(replicas[1], header) as two:
                r3 = await read(two)
                r4 = await read(two)
                edit = await two.call_tool(
                    "edit_file",
                    {"path": "notes.txt", "old_string": "line 7:", "new_string": "line 7 (ed):"},
                )
                assert not edit.is_error, text_of(edit)
                r5 = await read(two)
                (root / "notes.txt").write_text(
                    (root / "notes.txt").read_text().replace("line 50:", "line 50 (outside):")
                )
                r6 = await read(two)
                stats_two = meta_of(await two.call_tool("cache_stats", {}))
                r7 = await read(one)  # the first connection is still live: it lost the lease
                stats_one = meta_of(await one.call_tool("cache_stats", {}))
    assert [r1["kind"], r2["kind"]] == ["full", "unchanged"]
    assert r3["kind"] == "full" and r3.get("base_call_id") is None  # a new connection
    assert r4["kind"] == "unchanged" and r4["base_call_id"] == r3["call_id"]
    edit_id = meta_of(edit)["call_id"]
    assert r5["kind"] == "unchanged" and edit_id in (r5["base_call_id"], *r5.get("deps", ()))
    assert r6["kind"] == "diff" and "line 50 (outside):" in r6["text"]
    assert r7["kind"] == "full" and "line 7 (ed):" in r7["text"]
    assert stats_one["session"] == stats_two["session"] == "fleet-agent-1"
    assert stats_two["answers"] == {"full": 1, "unchanged": 2, "edited": 1, "diff": 1}
    assert stats_one["answers"] == {"full": 1}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_bad_session_header_is_a_tool_error(
    replicas: list[str], anyio_backend: str
) -> None:
    from mcp_client import http_session, text_of

    with anyio.fail_after(TEST_TIMEOUT):
        async with http_session(replicas[0], {"filecache-session": "no spaces allowed"}) as c:
            result = await c.call_tool("read_file", {"path": "notes.txt"})
    assert result.is_error and "filecache-session header" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_calls_on_the_other_replica_count_towards_the_ref_window(
    start_replicas: Any, anyio_backend: str
) -> None:
    """With --ref-calls 2, three calls answered by replica two expire replica one's read (the
    connection to replica two was open before that read, so only the store tells it)."""
    from mcp_client import http_session, meta_of

    one_url, two_url = start_replicas("--ref-calls", "2")
    header = {"filecache-session": "windowed"}
    with anyio.fail_after(TEST_TIMEOUT):
        async with http_session(one_url, header) as one, http_session(two_url, header) as two:
            await two.call_tool("read_file", {"path": "empty.txt"})  # both connections open
            first = meta_of(await one.call_tool("read_file", {"path": "notes.txt"}))
            for path in ("src/app.py", "empty.txt", "src/app.py"):
                await two.call_tool("read_file", {"path": path})
            again = meta_of(await one.call_tool("read_file", {"path": "notes.txt"}))
    assert first["kind"] == "full"
    assert again["kind"] == "full"  # r1 is 4 calls old: no longer relied on


def test_threads_share_one_store_object(pg_url: str, root: Path) -> None:
    """Eight threads, eight sessions, one FileCache on PostgreSQL: every call recorded once."""
    errors: list[BaseException] = []
    with FileCache(root, store=pg_url) as cache:

        def work(t: int) -> None:
            try:
                s = cache.session(f"t{t}")
                for i in range(10):
                    s.read("notes.txt", call_id=f"t{t}-{i}")
            except BaseException as exc:  # collected, asserted empty below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        counts = {s.session_id: s.events for s in cache.engine.store.sessions()}
    assert counts == {f"t{t}": 10 for t in range(8)}


# The never-stale property on PostgreSQL -----------------------------------------------------------

_TABLES = "sessions, events, views, blobs, cache, archive, projections, intents"


@settings(
    max_examples=max(20, int(os.environ.get("FILECACHE_PROPERTY_EXAMPLES", "300")) // 10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    initial=st.tuples(contents(), contents()),
    ops=st.lists(OPS, min_size=8, max_size=40),
    ratio=st.sampled_from([0.6, 1.0, 50.0]),
    versions=st.sampled_from([1, 2, 4]),
)
def test_model_view_equals_disk_on_postgres(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory, initial: Any, ops: Any, ratio: float,
    versions: int,
) -> None:  # fmt: skip
    """test_invariant's property (the model's view equals disk) with the store on PostgreSQL:
    each example on an emptied database (one session id, continued from nothing)."""
    with PostgresStore(pg_url):
        pass  # the schema exists before the first TRUNCATE
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {_TABLES}")
    root = tmp_path_factory.mktemp("root")
    for rel, text in zip(PATHS, initial, strict=True):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(text.encode())
    run_ops(root, ops, ratio, versions, pg_url)


# The concurrency issue's stress test on PostgreSQL ---------------------------------------------


def test_stress_on_postgres_no_lost_edits_no_answer_from_a_failed_call(
    pg_url: str, tmp_path: Path
) -> None:
    """test_concurrency's stress test (two processes, sessions, one id in both processes, two
    objects for one id), with the store on PostgreSQL."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "shared.txt").write_text("START\nEND\n")
    plans: list[dict[str, object]] = [
        {
            "caches": 2,
            "threads": [
                [0, "a0", 0, 150],
                [0, "a1", 1, 150],
                [0, "both", 2, 60],
                [0, "twin", 3, 40],
                [1, "twin", 4, 40],
            ],
        },  # fmt: skip
        {
            "caches": 1,
            "threads": [[0, "b0", 0, 150], [0, "b1", 1, 150], [0, "both", 2, 60]],
        },
    ]
    outs = _run_workers(root, pg_url, plans)  # type: ignore[arg-type]
    ok = {cid for out in outs for _, cid in out["ok"]}
    failed = [f for out in outs for f in out["failed"]]
    text = (root / "shared.txt").read_text()
    lines = set(text.splitlines())
    edits_ok = {cid for cid in ok if not cid.endswith("-read")}
    assert failed == [], failed[:5]
    assert len(edits_ok) == 2 * 150 * 2 + 2 * 60 + 2 * 40
    assert edits_ok - lines == set(), "edits that returned success are missing from the file"
    assert {line for line in lines if line.startswith("p")} == edits_ok
    assert text.startswith("START\n") and text.endswith("END\n")
    for out in outs:
        for _sid, _rid, kind, base in out["answers"]:
            assert base is None or base in ok, f"a {kind} answer names {base}, which failed"
    for sid in ("a0", "a1", "b0", "b1", "both", "twin"):
        got = rows(pg_url, "SELECT seq, call_id FROM events WHERE session_id = %s ORDER BY seq",
                   (sid,))  # fmt: skip
        assert [seq for seq, _ in got] == list(range(1, len(got) + 1)), sid
        assert {c for _, c in got} == {cid for out in outs for s, cid in out["ok"] if s == sid}
    assert rows(pg_url, "SELECT COUNT(*) FROM intents") == [(0,)]


def test_a_write_killed_before_its_commit_is_recovered_on_postgres(
    pg_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("alpha\nbeta\n")
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(root), pg_url], capture_output=True
    )
    assert proc.returncode == 9, proc.stderr
    assert (root / "a.txt").read_text() == "alpha\ngamma\n"  # replaced, never committed
    with FileCache(root, store=pg_url) as cache:
        assert cache.engine.store.intents() == []
        events = cache.engine.store.events("s")
        assert [(e.tool, e.kind) for e in events] == [("read", "full"), ("change", "changed")]
        answer = cache.session("s").read("a.txt", call_id="r2")
        assert answer.kind in ("diff", "full") and "gamma" in answer.text
