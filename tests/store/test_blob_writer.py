"""``BlobWriter``: blobs of evicted versions written by a background thread into a real store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from filecache import StoreError
from filecache.core.hashing import version_of
from filecache.core.text import join_lines, split_lines
from filecache.store.blob_writer import BlobWriter, encode_lines
from filecache.store.sqlite_store import SqliteStore


@pytest.mark.parametrize(
    "text", ["", "a", "a\n", "a\nb", "x\n" * 2000, "y\n" * 1023 + "end", "é\r\n" * 600]
)
def test_encode_lines_is_join_lines_encoded(text: str) -> None:
    lines = split_lines(text)
    assert encode_lines(lines) == encode_lines(lines, yielding=True) == text.encode("utf-8")
    assert encode_lines(lines) == join_lines(lines).encode("utf-8")


def _texts(n: int, tag: str) -> list[str]:
    return [f"{tag} {i}\n" + "".join(f"line {j} of {i}\n" for j in range(300)) for i in range(n)]


def test_queued_blobs_reach_the_store_from_many_threads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    writer = BlobWriter(store, max_bytes=1 << 30)
    texts = {t: tag for tag in "abcd" for t in _texts(25, tag)}

    def put(tag: str) -> None:
        for text in (t for t, g in texts.items() if g == tag):
            writer.put(version_of(text.encode()), split_lines(text), len(text))

    threads = [threading.Thread(target=put, args=(tag,)) for tag in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.drain()
    for text in texts:
        assert store.get_blob(version_of(text.encode())) == text.encode()
    writer.close()
    store.close()


class GatedStore(SqliteStore):
    """The real store, whose blob writes wait until the test opens the gate."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = threading.Event()

    def put_blob(self, version: str, data: bytes) -> None:
        self.gate.wait(10)
        super().put_blob(version, data)


def test_a_queued_version_stays_readable_until_it_is_stored(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "s.db")
    writer = BlobWriter(store, max_bytes=1 << 30)
    text = _texts(1, "q")[0]
    version, lines = version_of(text.encode()), split_lines(text)
    writer.put(version, lines, len(text))
    assert writer.lines(version) is lines and not store.has_blob(version)  # queued or busy
    store.gate.set()
    writer.drain()
    assert writer.lines(version) is None and store.get_blob(version) == text.encode()
    writer.close()
    store.close()


def test_over_the_bound_the_caller_writes(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    writer = BlobWriter(store, max_bytes=10)
    text = _texts(1, "big")[0]
    version = version_of(text.encode())
    writer.put(version, split_lines(text), len(text))
    assert store.has_blob(version)  # written before put returned: nothing was queued
    writer.close()
    store.close()


def test_a_storage_error_of_the_thread_surfaces_on_drain(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.close()  # every later call raises StoreError
    writer = BlobWriter(store, max_bytes=1 << 30)
    text = _texts(1, "e")[0]
    writer.put(version_of(text.encode()), split_lines(text), len(text))
    with pytest.raises(StoreError, match="closed"):
        writer.drain()
    writer.drain()  # reported once
    writer.close()


def test_a_version_nothing_needs_is_dropped_unwritten(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    keep, drop = _texts(2, "n")
    asked: list[str] = []

    def needed(version: str) -> bool:
        asked.append(version)
        return version == version_of(keep.encode())

    writer = BlobWriter(store, max_bytes=1 << 30, needed=needed)
    for text in (keep, drop):
        writer.put(version_of(text.encode()), split_lines(text), len(text))
    writer.drain()
    assert store.has_blob(version_of(keep.encode()))
    assert not store.has_blob(version_of(drop.encode()))
    assert len(asked) == 2
    writer.close()
    store.close()
