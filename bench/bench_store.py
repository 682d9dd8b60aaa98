"""The stores under load: filecache calls per second at 1, 2 and 4 processes, on SQLite and on
PostgreSQL, and the store bytes one replayed session takes.

Run from the repository root (PostgreSQL from ``FILECACHE_TEST_PG``, else a throwaway cluster
started by ``.ci/start_postgres`` and stopped at the end)::

    .venv/bin/python bench/bench_store.py [--seconds 5] [--corpus DIR_OR_TAR]

Each process runs its own session over one shared tree of 20 files (60 lines each): it reads the
files in turn (the first read of each is content, the later ones FileRefs) and every tenth call
edits a file of its own, so that both the read path and the write path (path lock, intent,
replace, commit) are measured. The figure is every process's calls over the wall time of the
run, after all processes have opened their stores. The byte figures replay the sessions of the
corpus (default ``../shared/corpus/swe-agent-dev.tar.gz``, else ``fixtures/sessions``) into an
empty store: the SQLite file (checkpointed), and PostgreSQL's growth of the tables' sizes.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shlex
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from filecache import FileCache
from filecache.replay.replay import replay_session

ROOT = Path(__file__).resolve().parent.parent
START = ROOT / ".ci" / "start_postgres"
CORPUS = ROOT.parent / "shared" / "corpus" / "swe-agent-dev.tar.gz"
PROCESSES = (1, 2, 4)
TABLES = ("sessions", "events", "views", "blobs", "cache", "archive", "projections", "intents")


def make_tree(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(20):
        lines = "".join(f"line {n} of file {i}: some text to read\n" for n in range(60))
        (root / f"f{i:02d}.txt").write_text(lines)
    for p in range(max(PROCESSES)):
        (root / f"own{p}.txt").write_text("counter 0\n")


def worker(root: str, spec: str, me: int, start: Any, stop_at: Any, out: Any) -> None:
    with FileCache(Path(root), store=spec) as cache:
        session = cache.session(f"bench-{me}-{os.getpid()}")
        own = f"own{me}.txt"
        session.read(own)
        start.wait()
        calls = 0
        n = 0
        while time.time() < stop_at.value:
            if calls % 10 == 9:
                session.edit(own, f"counter {n}\n", f"counter {n + 1}\n")
                n += 1
            else:
                session.read(f"f{calls % 20:02d}.txt")
            calls += 1
        out.put(calls)


def ops_per_second(spec: str, processes: int, seconds: float, tmp: Path) -> float:
    root = tmp / f"tree-{processes}-{abs(hash(spec))}"
    make_tree(root)
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(processes + 1)
    stop_at = ctx.Value("d", 0.0)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(str(root), spec, p, start, stop_at, out))
        for p in range(processes)
    ]
    for proc in procs:
        proc.start()
    stop_at.value = time.time() + 3600  # set for real once everyone has opened the store
    start.wait(timeout=120)
    began = time.time()
    stop_at.value = began + seconds
    total = sum(out.get(timeout=seconds + 120) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        if proc.exitcode != 0:
            raise SystemExit(f"a worker failed (exit {proc.exitcode})")
    return total / (time.time() - began)


def sessions_in(corpus: Path, tmp: Path) -> list[Path]:
    if corpus.is_file():
        with tarfile.open(corpus) as tar:
            tar.extractall(tmp / "corpus", filter="data")
        corpus = tmp / "corpus"
    return sorted(p.parent for p in corpus.rglob("transcript.json"))


def sqlite_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def pg_bytes(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM")  # settle the visibility maps and free space maps
        sizes = [
            conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0] for t in TABLES
        ]
    return int(sum(sizes))


def fresh_database(server: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return server.rpartition("/")[0] + "/" + name


def start_server() -> tuple[str, str | None]:
    given = os.environ.get("FILECACHE_TEST_PG")
    if given:
        return given, None
    done = subprocess.run([str(START)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"no PostgreSQL server: {done.stderr.strip()}")
    env = dict(
        line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines() if line
    )
    return shlex.split(env["FILECACHE_TEST_PG"])[0], env["FILECACHE_TEST_PG_DATA"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each load run")
    parser.add_argument("--corpus", type=Path, default=None, help="session traces (dir or tar)")
    args = parser.parse_args()
    server, data = start_server()
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            print(f"calls per second ({args.seconds:g} s runs; 9 reads : 1 edit), "
                  f"{os.cpu_count()} cores\n")  # fmt: skip
            print("| store | 1 process | 2 processes | 4 processes |")
            print("|---|---:|---:|---:|")
            for label in ("SQLite", "PostgreSQL"):
                cells = []
                for n in PROCESSES:
                    if label == "SQLite":
                        spec = str(tmp / f"load-{n}" / "cache.db")
                    else:
                        spec = fresh_database(server, f"fc_bench_load_{n}")
                    cells.append(f"{ops_per_second(spec, n, args.seconds, tmp):,.0f}")
                print(f"| {label} | " + " | ".join(cells) + " |")

            corpus = args.corpus or (CORPUS if CORPUS.exists() else ROOT / "fixtures" / "sessions")
            dirs = sessions_in(corpus, tmp)
            db = tmp / "replay" / "cache.db"
            db.parent.mkdir()
            url = fresh_database(server, "fc_bench_replay")
            FileCache(tmp, store=url).close()  # the schema, so that the empty size is measured
            empty_pg = pg_bytes(url)
            FileCache(tmp, store=str(db)).close()
            empty_sqlite = sqlite_bytes(db)
            for d in dirs:
                replay_session(d, store=str(db))
                replay_session(d, store=url)
            n = len(dirs)
            print(f"\nstore bytes per replayed session ({n} sessions of {corpus.name})\n")
            print("| store | empty | after the replays | per session |")
            print("|---|---:|---:|---:|")
            for label, empty, full in (
                ("SQLite", empty_sqlite, sqlite_bytes(db)),
                ("PostgreSQL", empty_pg, pg_bytes(url)),
            ):
                print(f"| {label} | {empty:,} | {full:,} | {(full - empty) / n:,.0f} |")
    finally:
        if data is not None:
            subprocess.run([str(START), "--stop", data], check=False, capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
