"""Real Claude Code logs: the recording, the hook, pruning, the gateway, Anthropic's clearing.

Run from the repository root, on folders of Claude Code logs (``~/.claude/projects`` session
files, subagents' ``agent-<id>.jsonl`` too; one folder a source)::

    .venv/bin/python bench/bench_real_claude_code.py LOGS... --traces OUT \
        [--windows 200000,128000] [--long 20] [--jobs 2] [--json FILE] [--no-import]

Each folder is imported (``filecache import claude-code FOLDER -o OUT/<folder name>``; with
``--no-import`` the traces already there are used), then every trace is replayed:

- through the Claude Code hook's own logic (``filecache replay OUT/*``), once;
- at each window, in one replay: filecache's transcript pruning (``--window W``, the ``cost``
  preset), the gateway (``--gateway --window W``) and Anthropic's ``clear_tool_uses`` at its
  trigger of 30% of the window (``--policy anthropic-clear-tool-uses --window W``);
- Anthropic's ``clear_tool_uses`` at its documented 100,000-token trigger, once (the trigger is
  all that depends on the window).

The tables give, per window, for all sessions and for the long ones (at least ``--long``
requests): prompt tokens and billed equivalents as the replay counts the logged conversation
(the prefix a request shares with the previous one at 0.1x, the rest at 1.25x), against the
recording and the hook, the sessions billed above their recording, recall (the simulator's, and
over every line the recording showed), edits grounded (lost: the recording showed the old
text, this run did not), stale and dangling; then what each run saves as a share of what the
sessions' own logs say they sent (``usage``: system prompt, tools and all, billed the same way:
cache reads at 0.1x, the rest at 1.25x), and the sessions' sizes. Not a timed benchmark.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from filecache.adapters.hosts.claude_replay import replay_claude_code

from filecache.importers import import_logs
from filecache.importers.logs import trace_name
from filecache.replay.policy_runs import PolicyRun, combine_runs
from filecache.replay.replay import replay_session
from filecache.replay.replay_compare import compare
from filecache.replay.replay_grounding import Grounding
from filecache.replay.replay_metrics import SessionReplay, grounding_cell

CLEAR = "anthropic-clear-tool-uses"
ROWS = (  # (label, run name)
    ("recorded", "none"),
    ("hook", "hook"),
    ("transcript pruning (cost)", "filecache (cost)"),
    ("gateway", "gateway"),
    ("Anthropic's clearing, trigger 30% of the window", CLEAR),
    ("Anthropic's clearing, trigger 100,000", "clear@100k"),
)
CACHE_READ, CACHE_WRITE = 0.1, 1.25


def usage_of(log: Path) -> tuple[int, float]:
    """(prompt tokens, billed equivalents) the log's API responses report: each response once
    (its last entry), ``input_tokens`` + cache writes at 1.25x, cache reads at 0.1x. A
    subagent's own log counts its sidechain; a session file, the rest."""
    entries = []
    for line in log.read_text("utf-8", errors="replace").split("\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") == "assistant":
            entries.append(entry)
    side = bool(entries) and all(e.get("isSidechain") for e in entries)
    usage: dict[str, Mapping[str, Any]] = {}
    for n, e in enumerate(entries):
        message = e.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
            continue
        if bool(e.get("isSidechain")) != side:
            continue
        usage[str(message.get("id") or n)] = message["usage"]
    tokens, billed = 0, 0.0
    for u in usage.values():
        fresh = int(u.get("input_tokens") or 0) + int(u.get("cache_creation_input_tokens") or 0)
        read = int(u.get("cache_read_input_tokens") or 0)
        tokens += fresh + read
        billed += fresh * CACHE_WRITE + read * CACHE_READ
    return tokens, billed


def import_set(folder: Path, out: Path) -> dict[str, dict[str, Any]]:
    """Import ``folder`` into ``out``; per trace directory: its log and the log's usage (on the
    first trace of a log split at compactions; 0 on the others)."""
    current: list[Path] = []
    results = import_logs("claude-code", [folder], out, progress=current.append)
    # progress is called before each log: map results to logs by re-reading the order
    seen: dict[str, dict[str, Any]] = {}
    logs = iter(current)
    log = None
    for result in results:
        name = result.directory.name
        while log is None or not _belongs(name, log):
            log = next(logs)
        first = not any(v["log"] == str(log) for v in seen.values())
        tokens, billed = usage_of(log) if first else (0, 0.0)
        seen[name] = {"log": str(log), "usage_tokens": tokens, "usage_billed": billed}
    (out / "usage.json").write_text(json.dumps(seen, indent=1), "utf-8")
    return seen


def _belongs(trace: str, log: Path) -> bool:
    stem = trace_name(log)
    return trace == stem or trace.startswith(f"{stem}.") or trace.startswith(f"{stem}-")


def _hook_run(r: SessionReplay) -> PolicyRun:
    return PolicyRun(
        name="hook", requests=r.requests, prompt_tokens=int(r.prompt_tokens.filecache),
        billed=r.billed.filecache, peak=int(r.peak_request.filecache), passes=0, results=0,
        stale=r.stale_views, dangling=r.dangling_refs, recall=r.recall,
        recall_pairs=r.recall_pairs, recall_all=r.recall_all,
        recall_all_pairs=r.recall_all_pairs,
        grounding=r.grounding.get("filecache", Grounding()),
    )  # fmt: skip


def replay_trace(trace: Path, windows: Sequence[int]) -> dict[str, Any]:
    """Every run of one trace: ``{window: {run name: PolicyRun}}`` and the trace's sizes."""
    out: dict[str, Any] = {"name": trace.name, "set": trace.parent.name, "runs": {}}
    hook = _hook_run(replay_claude_code(trace))
    clear100 = compare(
        [trace], replay=replay_session, window=None, peers=(CLEAR,), trigger=100_000
    ).sessions[0][1][CLEAR]
    for window in windows:
        c = compare(
            [trace], replay=replay_session, window=window, peers=("none", "gateway", CLEAR),
            presets=("cost",),
        )  # fmt: skip
        runs = dict(c.sessions[0][1])
        runs["hook"] = hook
        runs["clear@100k"] = clear100
        out["runs"][window] = runs
    recorded = out["runs"][windows[0]]["none"]
    out.update(requests=recorded.requests, recorded=recorded.prompt_tokens, peak=recorded.peak)
    return out


def _pct(base: float, value: float) -> str:
    return f"{100 * (value - base) / base:+.1f}%".replace("-", "−") if base else "n/a"


def table(sessions: Sequence[Mapping[str, Any]], window: int) -> list[str]:
    """The runs' totals over ``sessions`` at ``window``, one markdown row each."""
    totals = combine_runs([s["runs"][window] for s in sessions])
    rec, hook = totals["none"], totals["hook"]
    lines = [
        "| run | prompt tokens | vs recorded | billed | vs recorded | vs hook | sessions above "
        "recorded | recall | recall (all lines) | edits grounded | stale | dangling |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, name in ROWS:
        run = totals[name]
        above = sum(
            1 for s in sessions
            if s["runs"][window][name].billed > 1.001 * s["runs"][window]["none"].billed
        )  # fmt: skip
        lines.append(
            f"| {label} | {run.prompt_tokens:,} | {_pct(rec.prompt_tokens, run.prompt_tokens)} "
            f"| {run.billed:,.0f} | {_pct(rec.billed, run.billed)} "
            f"| {_pct(hook.billed, run.billed)} "
            f"| {above} | {100 * run.recall:.1f}% | {100 * run.recall_all:.1f}% "
            f"| {'not counted' if name == 'hook' else grounding_cell(run.grounding)} "
            f"| {run.stale} | {run.dangling} |"
        )  # fmt: skip
    return lines


def usage_lines(sessions: Sequence[Mapping[str, Any]], window: int) -> list[str]:
    """What each run saves, as a share of what the logs report they sent."""
    with_usage = [s for s in sessions if s.get("usage_billed")]
    groups = {s["log"] for s in with_usage}
    measured = [s for s in sessions if s.get("log") in groups]
    if not measured:
        return ["(no usage in the logs)"]
    tokens = sum(s["usage_tokens"] for s in measured)
    billed = sum(s["usage_billed"] for s in measured)
    totals = combine_runs([s["runs"][window] for s in measured])
    rec = totals["none"]
    out = [
        f"{len(groups)} logs report usage: {tokens:,} prompt tokens, {billed:,.0f} billed; the "
        f"replay counts {rec.prompt_tokens:,} and {rec.billed:,.0f} of their logged "
        f"conversation ({100 * rec.prompt_tokens / tokens:.0f}% and "
        f"{100 * rec.billed / billed:.0f}%)",
        "| run | prompt saved, of usage | billed saved, of usage |",
        "|---|---:|---:|",
    ]
    for label, name in ROWS[1:]:
        run = totals[name]
        out.append(
            f"| {label} | {100 * (rec.prompt_tokens - run.prompt_tokens) / tokens:.1f}% "
            f"| {100 * (rec.billed - run.billed) / billed:.1f}% |"
        )
    return out


def sizes(sessions: Sequence[Mapping[str, Any]], window: int) -> str:
    """How many sessions, requests and tokens, and how the gateway's saving spreads."""
    reqs = sorted(s["requests"] for s in sessions)
    saved = sorted(
        1 - s["runs"][window]["gateway"].billed / s["runs"][window]["none"].billed
        for s in sessions
        if s["runs"][window]["none"].billed
    )
    q = statistics.quantiles(saved, n=4) if len(saved) > 1 else saved * 3
    return (
        f"{len(sessions)} sessions, {sum(reqs):,} requests (median {statistics.median(reqs):.0f}, "
        f"90th percentile {reqs[int(0.9 * (len(reqs) - 1))]}, largest {reqs[-1]}), "
        f"{sum(s['recorded'] for s in sessions):,} recorded prompt tokens, peak request "
        f"{max(s['peak'] for s in sessions):,}; gateway billed saving per session: quartiles "
        f"{100 * q[0]:.1f}% / {100 * q[1]:.1f}% / {100 * q[2]:.1f}%, "
        f"{sum(1 for x in saved if x >= 0.30)} sessions at 30% or more"
    )


def _traces(root: Path) -> list[Path]:
    return sorted(d for d in root.iterdir() if (d / "transcript.json").exists())


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="folders of Claude Code logs")
    parser.add_argument("--traces", type=Path, required=True, help="where the traces go")
    parser.add_argument("--windows", default="200000,128000")
    parser.add_argument("--long", type=int, default=20, help="requests of a long session")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every session's runs here")
    parser.add_argument("--no-import", action="store_true", help="use the traces already there")
    args = parser.parse_args(None if argv is None else list(argv))
    windows = [int(w) for w in args.windows.split(",")]
    meta: dict[str, dict[str, Any]] = {}
    dirs: list[Path] = []
    for folder in args.logs:
        out = args.traces / folder.name
        if args.no_import:
            usage = out / "usage.json"
            known = json.loads(usage.read_text("utf-8")) if usage.exists() else {}
        else:
            known = import_set(folder, out)
        meta.update({f"{folder.name}/{k}": v for k, v in known.items()})
        dirs.extend(_traces(out))
    sessions: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(replay_trace, d, windows) for d in dirs]
        for n, (d, future) in enumerate(zip(dirs, futures, strict=True), 1):
            session = future.result()
            session.update(meta.get(f"{d.parent.name}/{d.name}", {}))
            sessions.append(session)
            print(f"replayed {n}/{len(dirs)}: {d.parent.name}/{d.name}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(_jsonable(sessions), indent=1), "utf-8")
    long = [s for s in sessions if s["requests"] >= args.long]
    for window in windows:
        for label, chosen in (("all sessions", sessions), (f"at least {args.long} requests", long)):
            if not chosen:
                continue
            print(f"\n## {window:,}-token window, {label}\n")
            print(sizes(chosen, window) + "\n")
            print("\n".join(table(chosen, window)) + "\n")
            print("\n".join(usage_lines(chosen, window)))
        print(
            f"\nper source at {window:,}, gateway billed vs recorded: "
            + per_source(sessions, window)
        )


def per_source(sessions: Sequence[Mapping[str, Any]], window: int) -> str:
    parts = []
    for name, group in _by_set(sessions).items():
        recorded = sum(s["runs"][window]["none"].billed for s in group)
        gateway = sum(s["runs"][window]["gateway"].billed for s in group)
        parts.append(f"{name} ({len(group)}) {_pct(recorded, gateway)}")
    return ", ".join(parts)


def _by_set(sessions: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for s in sessions:
        out.setdefault(s["set"], []).append(s)
    return out


def _jsonable(sessions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **{k: v for k, v in s.items() if k != "runs"},
            "runs": {
                str(w): {n: r.to_json() for n, r in runs.items()} for w, runs in s["runs"].items()
            },
        }
        for s in sessions
    ]


if __name__ == "__main__":
    main()
