"""Session behaviour beyond single reads: privacy, persistence, concurrency, the ledger."""

from __future__ import annotations

import threading
from pathlib import Path

from filecache import FileCache
from filecache.store.sqlite_store import SqliteStore

TEXT = "".join(
    f"setting_{i} = {i}  # a line long enough to be worth a FileRef\n" for i in range(40)
)


def test_denied_files_are_served_but_never_stored(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(TEXT)
    (tmp_path / "app.py").write_text(TEXT.replace("setting", "value"))
    db = tmp_path / "store.db"
    with FileCache(tmp_path, store=str(db)) as cache:
        session = cache.session("s")
        secret = session.read(".env")
        public = session.read("app.py")
        assert secret.kind == "full" and "setting_3 = 3" in secret.text
        assert session.read(".env").kind == "unchanged"  # still cached in the process
    with SqliteStore(db) as store:
        assert not store.has_blob(secret.version)
        assert store.has_blob(public.version)


def test_custom_deny_list(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prod.yaml").write_text(TEXT)
    db = tmp_path / "store.db"
    with FileCache(tmp_path, store=str(db), deny=("config/*",)) as cache:
        version = cache.session().read("config/prod.yaml").version
    with SqliteStore(db) as store:
        assert not store.has_blob(version)


def test_a_new_process_continues_the_session_and_can_diff(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    db = str(tmp_path / "store.db")
    with FileCache(tmp_path, store=db) as cache:
        cache.session("s").read("a.py", call_id="call_1")
    (tmp_path / "a.py").write_text(TEXT.replace("setting_20 = 20", "setting_20 = 2000"))
    with FileCache(tmp_path, store=db) as cache:  # the old version comes from the store's blob
        session = cache.session("s")
        answer = session.read("a.py", call_id="call_2")
        assert answer.kind == "diff" and answer.base_call_id == "call_1"
        assert "+setting_20 = 2000" in answer.text  # diff lines carry the raw line
        assert [c.call_id for c in session.ledger().reads()] == ["call_1", "call_2"]
    with FileCache(tmp_path, store=db) as cache:
        assert cache.session("other").read("a.py").kind == "full"  # sessions are separate


def test_ledger_records_reads_and_writes(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    with FileCache(tmp_path, store=":memory:") as cache:
        session = cache.session()
        session.read("a.py", call_id="r1")
        session.read("a.py", offset=5, limit=3, call_id="r2")
        session.edit("a.py", "setting_1 = 1 ", "setting_1 = 100 ", call_id="e1")
        session.write("b.py", "x = 1\n", call_id="w1")
        ledger = session.ledger()
    r1, r2, e1, w1 = (ledger.calls[c] for c in ("r1", "r2", "e1", "w1"))
    assert (r1.tool, r1.kind, r1.start, r1.end) == ("read", "full", 1, 40)
    assert (r2.kind, r2.start, r2.end, r2.base_call_id) == ("unchanged", 5, 7, "r1")
    assert r2.tokens < r2.tokens_full
    assert (e1.tool, e1.base_version) == ("edit", r1.version)
    assert w1.tool == "write" and w1.base_version is None
    assert [w.call_id for w in ledger.writes["a.py"]] == ["e1"]
    assert ledger.writes["b.py"][0].after == w1.version


def test_concurrent_reads_and_edits_from_threads(tmp_path: Path) -> None:
    names = [f"f{i}.py" for i in range(4)]
    for name in names:
        (tmp_path / name).write_text(TEXT)
    errors: list[BaseException] = []
    with FileCache(tmp_path, store=str(tmp_path / "store.db")) as cache:
        session = cache.session("threads")

        def work(name: str) -> None:
            try:
                for i in range(25):
                    session.read(name)
                    session.edit(name, f"setting_{i} = {i} ", f"setting_{i} = -{i} ")
                    assert session.read(name).kind == "unchanged"
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        seqs = [c.seq for c in session.ledger().calls.values()]
    assert len(seqs) == len(set(seqs)) == 4 * 25 * 3


def test_the_ledger_records_every_result_an_answer_relies_on(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(TEXT)
    db = str(tmp_path / "store.db")
    with FileCache(tmp_path, store=db) as cache:
        session = cache.session("s")
        session.read("a.py", offset=1, limit=20, call_id="top")
        session.read("a.py", offset=21, limit=20, call_id="bottom")
        whole = session.read("a.py", call_id="whole")
    assert whole.kind == "unchanged" and whole.base_call_id == "top"  # the first, in line order
    assert "since your results top and bottom" in whole.text
    with FileCache(tmp_path, store=db) as cache:  # deps survive in SQLite
        record = cache.session("s").ledger().calls["whole"]
    assert record.deps == ("bottom", "top")
