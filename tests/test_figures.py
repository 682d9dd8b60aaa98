"""``filecache.figures``: one headline, the same through every surface for one session.

The surfaces: ``filecache stats --json``, ``filecache replay --json``, MCP ``cache_stats`` (the
real client over stdio) and ``filecache prune --json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp_client import meta_of, serve_args, stdio_session, text_of

from filecache.cli import main
from filecache.cli_reports import model_option
from filecache.errors import RequestError
from filecache.figures import (
    CACHE_READ,
    CACHE_WRITE,
    DEFAULT_MODEL,
    PRICES,
    RequestTally,
    RunTally,
    prices_for,
)
from filecache.replay.replay_metrics import prompt_cost

SCRIPTED = Path(__file__).parent.parent / "fixtures" / "sessions" / "scripted__polyglot-peek"


def cli(*args: str | Path) -> Any:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_a_tally_bills_as_the_replay_meters_and_counts_a_request_once() -> None:
    requests = [
        [("sys", 100), ("u1", 20)],
        [("sys", 100), ("u1", 20), ("a1", 5), ("t1", 400)],
        [("sys", 100), ("u1", 20), ("a1", 5), ("t1-pruned", 10), ("a2", 5)],
    ]
    tally = RequestTally()
    for r in requests:
        assert tally.add(r, r)
    assert not tally.add(requests[-1], requests[-1])  # the same request again: not counted
    meter = prompt_cost(requests)
    assert tally.filecache == RunTally(3, meter.tokens, meter.cached)
    assert tally.filecache.billed == pytest.approx(meter.billed)
    # by hand: cached 120 + 125, written 120 + 405 + 15
    assert (tally.filecache.cached, tally.filecache.written) == (245, 540)
    assert tally.filecache.billed == pytest.approx(245 * CACHE_READ + 540 * CACHE_WRITE)
    sonnet = PRICES["claude-sonnet-5-5"]
    assert tally.filecache.cost(sonnet) == pytest.approx((245 * 0.1 + 540 * 2.5) / 1e6)
    back = RequestTally.from_json(json.loads(json.dumps(tally.to_json())))
    assert back.filecache == tally.filecache and not back.add(requests[-1], requests[-1])


def test_prices_are_dated_and_a_model_is_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert prices_for().model == DEFAULT_MODEL
    monkeypatch.setenv("FILECACHE_MODEL", "gpt-5.5")
    assert prices_for().model == "gpt-5.5" and prices_for("claude-haiku-4-5").input == 1.0
    for p in PRICES.values():  # cache reads are cheaper than input; writes cost no less
        assert p.cache_read < p.input <= p.cache_write
    with pytest.raises(RequestError, match="known: claude-opus-5-5"):
        prices_for("gpt-0")
    # the CLI's help names the default the table has
    help_text = str(model_option(lambda: None).__click_params__[0].help)
    assert DEFAULT_MODEL in help_text
    result = CliRunner().invoke(main, ["stats", "--model", "gpt-0"])
    assert result.exit_code == 2 and "no published prices for model 'gpt-0'" in result.stderr


def test_replay_and_stats_report_one_headline(tmp_path: Path) -> None:
    """``replay --json`` and ``stats --json`` on the store it wrote: the same figures, and
    they are the replay's own plain and filecache measures (pruning included)."""
    store = tmp_path / "cache.db"
    replayed = json.loads(
        cli("replay", SCRIPTED, "--window", "16000", "--store", store, "--json").stdout
    )
    [session] = replayed["sessions"]
    headline = session["headline"]
    stats = json.loads(cli("stats", "--store", store, "--json").stdout)
    [stored] = stats["sessions"]
    assert stored["headline"] == headline
    assert stats["overall"]["headline"]["prompt_tokens"] == headline["prompt_tokens"]
    assert replayed["totals"]["headline"]["billed"] == headline["billed"]
    prompt, billed = session["prompt_tokens"], session["billed"]
    assert headline["prompt_tokens"]["baseline"] == prompt["plain"]
    assert headline["prompt_tokens"]["filecache"] == prompt["filecache"]
    assert headline["prompt_tokens"]["saved_pct"] == prompt["saved_vs_plain_pct"]
    assert headline["billed"]["baseline"] == billed["plain"]
    assert headline["billed"]["filecache"] == billed["filecache"]
    assert session["pruning"]["results"]  # pruning included: it pruned
    assert headline["per_answer"]["filecache"] == session["ledger_reads"]["served"]
    assert headline["per_answer"]["baseline"] == session["ledger_reads"]["baseline"]
    assert headline["requests"] == session["requests"]
    assert headline["prices"]["model"] == DEFAULT_MODEL and headline["cost_usd"]["saved"] > 0
    text = cli("replay", SCRIPTED, "--window", "16000", "--model", "gpt-5").stdout
    assert text.startswith("filecache saved ") and "at gpt-5's prices" in text.split("\n")[0]


def _text(n: int, word: str) -> str:
    return "".join(f"{word} line {i}: some words to count here\n" for i in range(1, n + 1))


def _call(cid: str, path: str) -> dict[str, Any]:
    args = json.dumps({"path": path})
    return {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_prune_and_stats_report_one_headline(tmp_path: Path, anyio_backend: str) -> None:
    """One live session: reads through the MCP server, each request pruned with
    ``prune --session --json``; the last prune, ``cache_stats`` and ``stats`` agree on every
    figure, and a request pruned twice is counted once."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text(_text(300, "alpha"))
    for name in ("b", "c", "d", "e"):
        (root / f"{name}.txt").write_text(_text(300, name))
    store = tmp_path / "cache.db"
    errlog = tmp_path / "server.txt"
    args = serve_args("--root", root, "--store", store, "--session", "s1")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Look at a.py and b.txt."},
    ]
    pruned: list[dict[str, Any]] = []

    def prune_now(n: int) -> dict[str, Any]:
        given = tmp_path / f"request-{n}.json"
        given.write_text(json.dumps(messages))
        out = cli(
            "prune", given, "--session", "s1", "--root", root, "--store", store, "--json",
            "--window", "2000", "--preset", "seeds", "-o", tmp_path / f"sent-{n}.json",
        )  # fmt: skip
        return json.loads(out.stdout)

    with anyio.fail_after(60):
        async with stdio_session(args, errlog) as client:
            for n, path in enumerate(["a.py", "b.txt", "a.py", "c.txt", "d.txt", "e.txt"]):
                result = await client.call_tool("read_file", {"path": path})
                cid = meta_of(result)["call_id"]
                messages.append(
                    {"role": "assistant", "content": "", "tool_calls": [_call(cid, path)]}
                )
                messages.append({"role": "tool", "tool_call_id": cid, "content": text_of(result)})
                pruned.append(prune_now(n))
            again = prune_now(99)  # the last request again
            stats_mcp = json.loads(text_of(await client.call_tool("cache_stats", {})))
    kinds = [json.loads(json.dumps(p["headline"]))["per_answer"]["reads"] for p in pruned]
    assert kinds == [1, 2, 3, 4, 5, 6]
    last = pruned[-1]["headline"]
    assert again["headline"] == last  # counted once
    stats = json.loads(cli("stats", "--store", store, "--session", "s1", "--json").stdout)
    [session] = stats["sessions"]
    assert stats_mcp["headline"] == last == session["headline"]
    assert last["requests"] == 6
    answers = last["per_answer"]
    assert answers["filecache"] == stats_mcp["read_tokens_sent"] == session["tokens"]
    assert answers["baseline"] == stats_mcp["read_tokens_plain"] == session["tokens_full"]
    assert answers["saved"] >= 0  # pruning cleared a.py's result: its second read was content
    prompt = last["prompt_tokens"]
    # pruning included: the prompt saving beats what the answers alone save in the last request
    reclaimed = pruned[-1]["reclaimed_total"]
    assert reclaimed > 0 and prompt["saved"] > answers["saved"], [
        {k: v for k, v in p.items() if k in ("triggered", "gate", "actions")} for p in pruned[-1:]
    ]
    assert last["billed"]["saved_pct"] != 0 and last["cost_usd"]["baseline"] > 0


def test_threads_recording_one_session_count_every_request_once(tmp_path: Path) -> None:
    """``record_request`` under the store's lock: eight threads, each recording its own
    request into one session, lose none; a damaged row gives no figure, not an error."""
    import threading

    from filecache.figures import load_tally, record_request, save_tally
    from filecache.store.sqlite_store import SqliteStore

    with SqliteStore(tmp_path / "cache.db") as store:
        requests = [[("sys", 10), (f"user {n}", n + 1)] for n in range(8)]
        added: list[bool] = []

        def record(request: list[tuple[object, int]]) -> None:
            added.append(record_request(store, "s", request, request))

        threads = [threading.Thread(target=record, args=(r,)) for r in requests]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tally = load_tally(store, "s")
        assert tally is not None and all(added)
        assert tally.filecache.requests == 8
        assert tally.filecache.tokens == sum(10 + n + 1 for n in range(8))
        assert tally.filecache.cached == 7 * 10  # every request after the first shares "sys"
        store.cache_put("figures-requests", "s", "{not json")  # a damaged row: no figure
        assert load_tally(store, "s") is None
        save_tally(store, "s", None)
        assert load_tally(store, "s") is None


def test_a_session_without_requests_says_so(tmp_path: Path) -> None:
    from filecache import FileCache

    (tmp_path / "a.txt").write_text(_text(50, "a"))
    store = tmp_path / "s.db"
    with FileCache(tmp_path, store=store) as cache:
        s = cache.session("live")
        s.read("a.txt")
        s.read("a.txt")  # a FileRef
    data = json.loads(cli("stats", "--store", store, "--json").stdout)
    headline = data["sessions"][0]["headline"]
    assert headline["prompt_tokens"] is None and headline["cost_usd"] is None
    assert headline["per_answer"]["reads"] == 2 and headline["per_answer"]["saved"] > 0
    assert "no request was seen" in headline["sentence"]
    text = cli("stats", "--store", store).stdout
    assert text.startswith("filecache: Per read answer it saved ") and "| n/a |" in text
    deleted = cli("sessions", "delete", "live", "--store", store)
    assert "deleted" in deleted.stdout
