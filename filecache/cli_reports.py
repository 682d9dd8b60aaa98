"""The reporting commands: ``replay``, ``stats`` and ``sessions``. Thin: parse, call, format.

Registered on ``filecache.cli.main``; a ``FileCacheError`` raised here exits with its class's
code through the main group.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from filecache.errors import PathError, RequestError

if TYPE_CHECKING:  # opened by the commands that use it: --help stays light
    from filecache.store.store import Store

CONTEXT = {"help_option_names": ["-h", "--help"]}
_F = TypeVar("_F", bound=Callable[..., Any])


def preset_option(help: str) -> Callable[[_F], _F]:
    """``--preset cost|context|seeds`` (``PrunePolicy.preset``), for ``prune`` and ``replay``."""
    return click.option(
        "--preset", type=click.Choice(["cost", "context", "seeds"]), default="cost",
        show_default=True,
        help=help,
    )  # fmt: skip


def cache_aware_option(lead: str) -> Callable[[_F], _F]:
    """``--cache-aware/--no-cache-aware`` (default: the preset's), its help starting ``lead``."""
    return click.option(
        "--cache-aware/--no-cache-aware", default=None,
        help=f"{lead} only when it pays for the cached prefix it invalidates (default: the "
        "preset's; on for cost, off for context).",
    )  # fmt: skip


def model_option(fn: _F) -> _F:
    """``--model``: whose published prices a cost is in (``filecache.figures.PRICES``)."""
    return click.option(
        "--model", envvar="FILECACHE_MODEL",
        help="Price the cost at this model's published prices (cache writes and reads "
        "included; default: env FILECACHE_MODEL, else claude-sonnet-5-5). The report names "
        "the prices it used; an unknown name lists the known ones.",
    )(fn)  # fmt: skip


@contextlib.contextmanager
def _progress(dirs: Sequence[Path], quiet: bool) -> Iterator[Iterable[Path]]:
    """The sessions to replay, with progress on stderr: a bar on a terminal, one line per
    session replayed otherwise (a log, CI), nothing when ``quiet`` (``--json``)."""
    if quiet:
        yield dirs
    elif sys.stderr.isatty():
        with click.progressbar(
            dirs, label="replaying", file=sys.stderr,
            item_show_func=lambda d: d.name if d is not None else None,
        ) as bar:  # fmt: skip
            yield bar
    else:
        yield _lines(dirs)


def _lines(dirs: Sequence[Path]) -> Iterator[Path]:
    started = time.monotonic()
    for n, d in enumerate(dirs, 1):
        yield d  # the caller replays it before asking for the next
        elapsed = time.monotonic() - started
        click.echo(f"replayed {n}/{len(dirs)}: {d.name} ({elapsed:.1f} s)", err=True)


def _cannot_write(path: Path, exc: OSError) -> PathError:
    why = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError) and not path.parent.is_dir():
        why = f"the folder {path.parent} does not exist"
    return PathError(f"{path}: cannot write the output ({why})")


def check_output_file(path: Path | None) -> None:
    """Refuse, before any work, an output file (``--html``, ``-o``) that cannot be written: a
    missing folder, a directory, no permission. Nothing is left behind: an existing file is
    opened for appending (never truncated) and a new one is removed again. A device or pipe
    (``/dev/stdout``) is taken as it is.

    Raises:
        PathError: in one line, naming the path.
    """
    if path is None:
        return
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise PathError(f"{path}: is a directory; name a file to write the output to")
    if mode is not None and not stat.S_ISREG(mode):
        return
    flags = os.O_WRONLY | os.O_APPEND if mode is not None else os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        os.close(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644))
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    if mode is None:
        with contextlib.suppress(OSError):
            os.unlink(path)


def write_output(path: Path, text: str) -> None:
    """Write ``text`` to the output file ``path``.

    Raises:
        PathError: it cannot be written (one line, naming the path).
    """
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def _write_html(path: Path, page: str) -> None:
    write_output(path, page)
    click.echo(f"wrote {path}", err=True)


@click.command(context_settings=CONTEXT)
@click.argument(
    "dirs",
    nargs=-1,
    required=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
)
@click.option(
    "--window",
    type=click.IntRange(min=1000),
    help="Prune before every request for a model with this context window (tokens). "
    "Default: no pruning (delta reads only).",
)
@cache_aware_option("With --window: prune")
@preset_option(
    "filecache's pruning with --window: cost (least billed under prompt caching) or "
    "context (the prompt small: small windows, providers without prompt caching)."
)
@click.option(
    "--policy",
    default="filecache",
    show_default=True,
    help="The pruning policy to replay: filecache, none, anthropic-clear-tool-uses, openclaw, "
    "opencode, claude-code-dedup (or claude-code-dedup+NAME), gateway, gateway+context, "
    "gateway-delta. Others than filecache edit the recorded requests (docs/pruning.md, "
    "docs/gateway.md).",
)
@click.option(
    "--gateway",
    is_flag=True,
    help="The recorded requests through the gateway's request transform (FileRefs and diffs "
    "within each request, then pruning with the cost preset): --policy gateway, at --window "
    "(default 200,000).",
)
@click.option(
    "--compare",
    is_flag=True,
    help="With --window: every policy side by side (and both filecache presets), in one run.",
)
@click.option(
    "--trigger",
    type=click.IntRange(min=1),
    help="anthropic-clear-tool-uses: trigger at this many input tokens "
    "(default: 30% of --window, or 100,000 without one).",
)
@click.option(
    "--read-mode",
    type=click.Choice(["agent", "auto", "full"]),
    default="agent",
    show_default=True,
    help="filecache's whole-file reads: agent answers them as the agent's own tool does (an "
    "outline of a large file only where it abbreviates one: SWE-agent); auto always outlines a "
    "large file; full never does.",
)
@click.option(
    "--tokenizer",
    type=click.Choice(["o200k", "cl100k", "estimate"]),
    default="o200k",
    show_default=True,
    help="How prompt tokens are counted.",
)
@click.option(
    "--cap/--no-cap",
    default=True,
    show_default=True,
    help="A read answer larger than the agent's own recorded one is sent as recorded (as a "
    "host integration falls back to the host's output); --no-cap: filecache's answers as is.",
)
@click.option(
    "--host",
    type=click.Choice(["auto", "none", "claude-code"]),
    default="auto",
    show_default=True,
    help="Replay through a host integration's own hook logic: auto does so for traces "
    "imported from that host's logs (filecache import claude-code), unless --window, "
    "--compare or --policy asks for pruning; none: the library session's logic.",
)
@click.option("--json", "as_json", is_flag=True, help="Print totals and sessions as JSON.")
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML page with a chart of every request.",
)
@click.option(
    "--store",
    help="Keep the filecache runs' sessions in this SQLite store (for 'filecache stats').",
)
@model_option
def replay(
    dirs: tuple[Path, ...],
    window: int | None,
    cache_aware: bool | None,
    preset: str,
    policy: str,
    compare: bool,
    trigger: int | None,
    read_mode: str,
    tokenizer: str,
    cap: bool,
    host: str,
    as_json: bool,
    html_out: Path | None,
    store: str | None,
    model: str | None = None,
    gateway: bool = False,
) -> None:
    """Replay recorded sessions (DIR/files + DIR/transcript.json): recorded, plain, filecache.

    A trace imported from Claude Code's logs is replayed through the hook's own logic (what
    `filecache install claude-code` would have sent the model); see --host."""
    from filecache.figures import prices_for
    from filecache.prune.pruning import PrunePolicy
    from filecache.replay.replay import replay_session
    from filecache.replay.replay_host import host_replay, trace_host
    from filecache.replay.replay_metrics import SessionReplay, combine
    from filecache.replay.replay_report import format_replay, replay_html, worse_than_recorded

    check_output_file(html_out)
    if gateway:
        policy, window = "gateway", window or 200_000
    pruning = compare or policy != "filecache" or window is not None
    if host not in ("auto", "none") and pruning:
        raise RequestError(
            f"--host {host} replays the hook's answers (no pruning); drop --window/--compare/"
            "--policy, or pass --host none"
        )
    hosts = {d: (trace_host(d) if host == "auto" and not pruning else None) for d in dirs}
    if host not in ("auto", "none"):
        hosts = dict.fromkeys(dirs, host)

    def one(d: Path) -> SessionReplay:
        if hosts[d] is not None:
            return host_replay(str(hosts[d]))(d, tokenizer=tokenizer, store=store)
        return replay_session(
            d, tokenizer=tokenizer, policy=rules, read_mode=read_mode, store=store, cap=cap,
            model=model,
        )  # fmt: skip

    prices = prices_for(model)  # an unknown model fails before the work
    if compare or policy != "filecache":
        _compare(dirs, window, cache_aware, policy, compare, trigger, read_mode, tokenizer,
                 as_json, html_out, store, cap, prices)  # fmt: skip
        return
    aware = {} if cache_aware is None else {"cache_aware": cache_aware}
    rules = PrunePolicy.preset(preset, context_window=window, **aware) if window else None
    with _progress(dirs, as_json) as bar:
        replays = [one(d) for d in bar]
    totals = combine(replays)
    if html_out is not None:
        _write_html(html_out, replay_html(replays, totals))
    if as_json:
        payload = {
            "totals": totals.to_json(detail=False)
            | {"worse_than_recorded": [r.name for r in worse_than_recorded(replays)]},
            "sessions": [r.to_json() for r in replays],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(format_replay(replays, totals), nl=False)
    for line in totals.mismatches:
        click.echo(f"mismatch: {line}", err=True)
    if totals.skipped:
        click.echo(
            f"skipped: {len(totals.skipped)} file tool calls kept as recorded (the logs do not "
            "show their files; 'unknown' in transcript.json)",
            err=True,
        )
    for line in totals.problems:
        click.echo(f"problem: {line}", err=True)


def _compare(
    dirs: tuple[Path, ...],
    window: int | None,
    cache_aware: bool | None,
    policy: str,
    compare_all: bool,
    trigger: int | None,
    read_mode: str,
    tokenizer: str,
    as_json: bool,
    html_out: Path | None,
    store: str | None,
    cap: bool,
    prices: Any,
) -> None:
    from filecache.prune.peer_policies import PEER_POLICIES, parse_policy
    from filecache.replay.replay import replay_session
    from filecache.replay.replay_compare import compare, comparison_html, format_comparison
    from filecache.replay.replay_gateway import is_gateway_policy

    if compare_all and window is None:
        raise RequestError("--compare needs --window TOKENS (the window every policy runs at)")
    if compare_all:
        peers: tuple[str, ...] = (
            "none", *PEER_POLICIES, "claude-code-dedup+anthropic-clear-tool-uses",
        )  # fmt: skip
        presets: tuple[str, ...] = ("cost", "context")
    else:
        try:
            if not is_gateway_policy(policy):
                parse_policy(policy)
        except ValueError as exc:
            raise RequestError(str(exc)) from exc
        peers, presets = ("none", policy), ()
    with _progress(dirs, as_json) as bar:
        result = compare(
            bar, replay=replay_session, window=window, peers=peers, presets=presets,
            cache_aware=cache_aware, trigger=trigger, tokenizer=tokenizer, read_mode=read_mode,
            store=store, cap=cap,
        )  # fmt: skip
    if html_out is not None:
        _write_html(html_out, comparison_html(result, prices))
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(format_comparison(result), nl=False)
    for name in result.names:
        for line in result.totals[name].problems:
            click.echo(f"problem: {line}", err=True)


def _store_path(store: str | None) -> str:
    from filecache.store.opening import store_location

    return store_location(Path(".").resolve(), store, create=False)  # read-only: make nothing


def open_existing(store: str | None) -> Store:
    from filecache.store.opening import open_store
    from filecache.store.store_url import is_store_url

    path = _store_path(store)
    if path != ":memory:" and not is_store_url(path) and not Path(path).exists():
        raise RequestError(f"no store at {path}; pass --store PATH (or set FILECACHE_STORE)")
    return open_store(Path("."), path)


def store_option(fn: Any) -> Any:
    return click.option(
        "--store",
        envvar="FILECACHE_STORE",
        help="SQLite store path or postgresql:// URL (a fleet's shared store). "
        "Default: ./.filecache/cache.db; env FILECACHE_STORE.",
    )(fn)


def _json_or(as_json: bool, payload: Any, text: str) -> None:
    if as_json:
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(text, nl=False)


@click.command(context_settings=CONTEXT)
@click.option("--session", "session_id", help="Only this session.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Top files.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML page with a chart per session.",
)
@store_option
@click.option(
    "--gateway-store",
    envvar="FILECACHE_GATEWAY_STORE",
    help="Also list the conversations of the gateway whose store this is (path or "
    "postgresql:// URL; env FILECACHE_GATEWAY_STORE). Default: without --store, the user's "
    "gateway store when it exists (what 'filecache run' and 'filecache gateway' saved).",
)
@click.option("--no-gateway", is_flag=True, help="Leave the gateway's conversations out.")
@model_option
@click.pass_context
def stats(
    ctx: click.Context,
    session_id: str | None,
    top: int,
    as_json: bool,
    html_out: Path | None,
    store: str | None,
    gateway_store: str | None,
    no_gateway: bool,
    model: str | None,
) -> None:
    """What filecache saved, per session and overall: prompt, billed, cost and per answer.

    Gateway conversations (filecache run, filecache gateway, the LiteLLM callback) are priced
    at the model their requests name when the price table has it, unless --model is given."""
    from filecache.figures import prices_for
    from filecache.stats import collect_stats, format_stats, stats_html

    check_output_file(html_out)
    prices_for(model)  # an unknown model fails before the store is opened
    given = ctx.get_parameter_source("store") not in (None, click.core.ParameterSource.DEFAULT)
    gateway = None if no_gateway else _gateway_store(gateway_store, store, given)
    with contextlib.ExitStack() as stack:
        opened = None
        if given or gateway is None or Path(_store_path(store)).exists():
            opened = stack.enter_context(open_existing(store))
        also = [stack.enter_context(open_existing(gateway))] if gateway is not None else []
        main = opened if opened is not None else also.pop()
        report = collect_stats(main, session_id, top=top, model=model, also=also)
    if html_out is not None:
        _write_html(html_out, stats_html(report))
    _json_or(as_json, report.to_json(), format_stats(report))


def _gateway_store(chosen: str | None, store: str | None, store_given: bool) -> str | None:
    """The gateway store ``stats`` lists too: ``chosen``, else (no ``--store``) the user's
    default one when it exists; None when there is none, or it is the store itself."""
    from filecache.store.store_url import is_store_url

    if chosen is None:
        if store_given:
            return None
        from filecache.gateway.memory import gateway_store_path

        path = gateway_store_path()
        if not path.exists():
            return None
        chosen = str(path)
    if chosen == ":memory:":
        return None
    if is_store_url(chosen):
        return None if chosen == store else chosen
    main = _store_path(store)
    if not is_store_url(main) and Path(main).resolve() == Path(chosen).resolve():
        return None
    return chosen


@click.group(context_settings=CONTEXT)
def sessions() -> None:
    """The sessions in the store: list, show, delete, gc."""


@sessions.command("list", context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
@store_option
def sessions_list(as_json: bool, store: str | None) -> None:
    """Every session: when it was used, its ledger rows, tokens served and saved."""
    from filecache.stats import format_sessions, session_rows

    with open_existing(store) as opened:
        rows = session_rows(opened)
    _json_or(as_json, {"sessions": rows}, format_sessions(rows))


@sessions.command("show", context_settings=CONTEXT)
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print the session as JSON.")
@store_option
def sessions_show(session_id: str, as_json: bool, store: str | None) -> None:
    """One session's statistics and its ledger."""
    from filecache.stats import collect_stats, format_events, format_stats

    with open_existing(store) as opened:
        report = collect_stats(opened, session_id)
        events = opened.events(session_id)
    payload = report.to_json() | {
        "events": [
            {
                k: getattr(e, k)
                for k in (
                    "seq",
                    "call_id",
                    "tool",
                    "path",
                    "kind",
                    "start",
                    "end",
                    "tokens",
                    "tokens_full",
                    "base_call_id",
                )
            }
            for e in events
        ]  # fmt: skip
    }
    _json_or(as_json, payload, format_stats(report) + "\n" + format_events(events))


@sessions.command("delete", context_settings=CONTEXT)
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@store_option
def sessions_delete(session_id: str, as_json: bool, store: str | None) -> None:
    """Delete SESSION_ID: its ledger, views, archive and projections (blobs stay until gc)."""
    from filecache.figures import save_tally

    with open_existing(store) as opened:
        if session_id not in {s.session_id for s in opened.sessions()}:
            raise RequestError(f"no session {session_id!r}; 'filecache sessions list' shows them")
        opened.delete_session(session_id)
        save_tally(opened, session_id, None)  # its requests, counted for the headline
    _json_or(as_json, {"deleted": session_id}, f"deleted session {session_id}\n")


@sessions.command("gc", context_settings=CONTEXT)
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(min=0),
    help="Delete sessions unused this many days. Default: the retention_days setting.",
)
@click.option("--root", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=Path("."), show_default=True, help="Root whose settings apply.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print what was removed as JSON.")
@store_option
def sessions_gc(days: float | None, root: Path, as_json: bool, store: str | None) -> None:
    """Delete sessions past retention, then every content blob no session refers to."""
    from filecache.settings import load_settings

    retention = days if days is not None else load_settings(root.resolve(), {}).retention_days
    with open_existing(store) as opened:
        report = opened.gc(time.time() - retention * 86400)
    payload = {
        "retention_days": retention,
        "sessions_deleted": report.sessions_deleted,
        "blobs_deleted": report.blobs_deleted,
    }
    text = (
        f"deleted {report.sessions_deleted} session(s) unused for {retention:g} days and "
        f"{report.blobs_deleted} unreferenced blob(s)\n"
    )
    _json_or(as_json, payload, text)
