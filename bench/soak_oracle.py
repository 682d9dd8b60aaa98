"""The never-stale oracle of ``bench/bench_soak.py``: the soak's logs against the store.

Per session, the delivered answers of all its processes, ordered by the store's event seq (a
``forget`` by the store head its worker read under the session lock), go through the simulated
model of ``tests/session/test_invariant.py`` (its parsers and checks are imported from there). The
"disk" an answer is checked against is the true content of the answer's version: the store's
blob, a delivered full answer of that version, a write's content, or the initial files.

Lines keep every way the model learnt them, through diffs and through its own edits, as
filecache's views do ("lines keep every backing result; forget drops only what no other
backs"); carrying only the newest way through an edit made the soak (and that test) report a
correct FileRef as stale once the newest backing result was forgotten.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EDITED = ("a.txt", "b.txt")
WRITTEN = "c.txt"
SESSIONS = 3  # session ids: worker slot i uses s{i % SESSIONS}


def load_log(path: Path) -> list[dict[str, Any]]:
    """The slot's records so far; a line cut by a kill is dropped (and cut off the file)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    keep = data[: data.rfind(b"\n") + 1]
    if len(keep) != len(data):
        with path.open("r+b") as fh:
            fh.truncate(len(keep))
    return [json.loads(row) for row in keep.decode().splitlines()]


@dataclass
class Counts:
    ops: int = 0
    failed_ops: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    unexpected: int = 0  # exceptions outside filecache's error tree
    kinds: dict[str, int] = field(default_factory=dict)
    checked: int = 0
    unknown: int = 0
    stale: int = 0
    stale_forgotten: int = 0  # of those: relying on a result the model forgot
    relies_undelivered: int = 0
    undelivered: int = 0
    recovered_changes: int = 0
    forgets: int = 0
    edits_ok: int = 0
    edits_failed: int = 0
    lost_edits: int = 0
    failed_applied: int = 0
    unrecorded_answers: int = 0
    failed_recorded: int = 0
    intents_before_open: int = 0
    intents_left: int = 0
    tmp_files: int = 0
    integrity: str = ""
    examples: list[str] = field(default_factory=list)

    def hard_failures(self) -> list[str]:
        bad = [
            name
            for name in (
                "stale",
                "lost_edits",
                "failed_applied",
                "unrecorded_answers",
                "failed_recorded",
                "intents_left",
                "unexpected",
            )  # fmt: skip
            if getattr(self, name)
        ]
        return bad + ([] if self.integrity == "ok" else ["integrity"])


def import_model() -> Any:
    sys.path[:0] = [str(REPO / "tests" / "session"), str(REPO / "tests")]
    import test_invariant

    return test_invariant


def _text_of_full_answer(inv: Any, rec: dict[str, Any]) -> str | None:
    """The file's text from a delivered content answer of the whole file, else None."""
    if rec["kind"] != "full" or rec["start"] != 1 or rec["end"] != rec["line_count"]:
        return None
    body = inv.without_undone_note(rec["text"]).partition("\n")[2]
    rows = body.split("\n")
    rows.pop()
    from filecache.core.text import NO_NEWLINE

    eol = True
    if rows and rows[-1] == NO_NEWLINE:
        rows.pop()
        eol = False
    lines = [row.partition("\t")[2] for row in rows]
    return "\n".join(lines) + ("\n" if eol and lines else "")


def oracle(root: Path, store: Path, logs: Path, counts: Counts, initial: dict[str, str]) -> None:
    from filecache import FileCache
    from filecache.core.hashing import version_of
    from filecache.store.opening import open_store

    inv = import_model()
    raw = open_store(root, str(store))
    counts.intents_before_open = len(raw.intents())
    raw.close()
    records = [r for p in sorted(logs.glob("slot*.jsonl")) for r in load_log(p)]
    with FileCache(root, store=str(store)) as cache:  # runs recovery
        counts.intents_left = len(cache.engine.store.intents())
        texts = dict(initial)
        for r in records:
            if r["ok"] and r["op"] == "write":
                texts[version_of(r["content"].encode())] = r["content"]
            elif r["ok"] and r["op"] in ("full", "ranged"):
                text = _text_of_full_answer(inv, r)
                if text is not None and version_of(text.encode()) == r["version"]:
                    texts[r["version"]] = text

        def text_of(version: str | None) -> str | None:
            if version is None:
                return None
            if version not in texts:
                blob = cache.engine.store.get_blob(version)
                if blob is not None:
                    texts[version] = blob.decode()
            return texts.get(version)

        for sid in sorted({r["session"] for r in records}):
            mine = [r for r in records if r["session"] == sid]
            _check_session(inv, cache.engine.store.events(sid), mine, text_of, counts)
    counts.ops = len(records)
    for r in records:
        if not r["ok"]:
            counts.failed_ops += 1
            counts.errors[r["error"]] = counts.errors.get(r["error"], 0) + 1
            counts.unexpected += bool(r.get("raw"))
        elif r["op"] in ("full", "ranged"):
            counts.kinds[r["kind"]] = counts.kinds.get(r["kind"], 0) + 1
    final = {name: (root / name).read_text() for name in EDITED}
    for r in records:
        if r["op"] != "edit" or "marker" not in r:
            continue
        present = r["marker"] in final[r["args"][0]]
        if r["ok"]:
            counts.edits_ok += 1
            counts.lost_edits += not present
        else:
            counts.edits_failed += 1
            counts.failed_applied += present
    counts.tmp_files = sum(1 for _ in root.rglob("*.fc-*.tmp"))
    conn = sqlite3.connect(store)
    counts.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()


def _check_session(inv: Any, events: list[Any], mine: list[dict[str, Any]], text_of: Any,
                   counts: Counts) -> None:  # fmt: skip
    by_id = {e.call_id: e for e in events}
    delivered = {r["call_id"] for r in mine if r["ok"]}
    for r in mine:
        recorded = r["call_id"] in by_id
        if r["op"] != "forget" and r["ok"] and not recorded:
            counts.unrecorded_answers += 1
            _example(counts, f"delivered, no ledger row: {r['call_id']}")
        if not r["ok"] and recorded:
            counts.failed_recorded += 1
            _example(counts, f"failed but recorded: {r['call_id']} {r['error']}")
    undelivered = {
        e.call_id for e in events if e.tool in ("read", "write", "edit")
        and e.call_id not in delivered
    }  # fmt: skip
    counts.undelivered += len(undelivered)
    counts.recovered_changes += sum(e.call_id.endswith("~recovered") for e in events)

    def order(r: dict[str, Any]) -> float:
        return r["after_seq"] + 0.5 if r["op"] == "forget" else by_id[r["call_id"]].seq

    timeline = sorted(
        (r for r in mine if r["ok"] and (r["op"] == "forget" or r["call_id"] in by_id)), key=order
    )
    model = inv.Model()
    tainted_undelivered = set(undelivered)
    tainted_unknown: set[str] = set()
    for r in timeline:
        cid = r["call_id"]
        if r["op"] == "forget":
            counts.forgets += 1
            model.forgotten |= set(r["ids"])
            continue
        event = by_id[cid]
        deps = set(event.deps) | ({event.base_call_id} if event.base_call_id else set())
        if deps & tainted_undelivered:
            counts.relies_undelivered += 1
            tainted_undelivered.add(cid)
            continue
        if deps & tainted_unknown:
            counts.unknown += 1
            tainted_unknown.add(cid)
            continue
        if r["op"] in ("full", "ranged"):
            text = text_of(r["version"])
            if text is None:
                counts.unknown += 1
                tainted_unknown.add(cid)
                continue
            fields = ("kind", "text", "version", "start", "end", "base_call_id")
            result = SimpleNamespace(**{k: r[k] for k in fields}, call_id=cid, path=r["args"][0])
            disk = inv.disk_lines_of(text)
            absorb = {"full": inv.absorb_content, "partial": inv.absorb_content,
                      "unchanged": inv.absorb_unchanged, "diff": inv.absorb_diff}  # fmt: skip
            try:
                absorb[r["kind"]](model, result, disk)
                counts.checked += 1
            except (AssertionError, AttributeError, KeyError) as exc:
                counts.stale += 1
                counts.stale_forgotten += bool(deps & model.forgotten)
                _example(counts, f"stale {r['kind']} {cid} (base {r['base_call_id']}): {exc!r}")
        elif r["op"] == "edit":
            before, after = text_of(r["base_version"]), text_of(r["version"])
            if before is None or after is None:
                counts.unknown += 1
                tainted_unknown.add(cid)
                continue
            pieces = inv.edit_pieces(before, r["old"], r["new"])
            inv.absorb_own_change(model, r["args"][0], before, after, cid, pieces)
        elif r["op"] == "write":
            inv.absorb_own_change(model, r["args"][0], None, r["content"], cid, None)


def _example(counts: Counts, text: str) -> None:
    if len(counts.examples) < 10:
        counts.examples.append(text)
