"""The ``filecache`` command: thin click commands that call the library and format its answers.

Every command that prints data takes ``--json``; errors exit with their class's ``exit_code``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from filecache.adapters.hosts.host_specs import HOST_NAMES, RUN_NAMES, SPECS
from filecache.cli_errors import cli_message
from filecache.cli_read import CLI_SESSION
from filecache.cli_reports import (
    cache_aware_option,
    check_output_file,
    model_option,
    preset_option,
    write_output,
)
from filecache.core.kinds import Format
from filecache.errors import FileCacheError, RequestError
from filecache.extras import DISTRIBUTION
from filecache.tools import READ_FILE, param_help  # option help: the tool table's words

if TYPE_CHECKING:  # imported by the commands that use them: --help and others stay light
    from filecache.cache import FileCache, Session
    from filecache.replay.host_registry import HostReplay

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT = {"help_option_names": ["-h", "--help"]}


class _Group(click.Group):
    """Turns ``FileCacheError`` into a one-line message, in the CLI's own flags
    (``cli_errors``), and the class's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FileCacheError as exc:
            click.echo(f"filecache: {cli_message(str(exc), ctx.invoked_subcommand)}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(package_name=DISTRIBUTION)
def main() -> None:
    """Delta reads for LLM coding agents: FileRefs and diffs instead of re-sent files."""


def cache_options(fn: F) -> F:
    """``--root``, ``--store`` and ``--session`` (``FILECACHE_SESSION``)."""
    fn = click.option(
        "--session",
        envvar="FILECACHE_SESSION",
        help=f"Session id (one model context); env FILECACHE_SESSION. Default: {CLI_SESSION!r}, "
        "one session per root for every CLI call (so reading a file twice gives a FileRef); "
        "pass a new id for a fresh context.",
    )(fn)
    fn = click.option(
        "--store",
        envvar="FILECACHE_STORE",
        help="SQLite store path, ':memory:' or postgresql:// URL. "
        "Default: <root>/.filecache/cache.db.",
    )(fn)
    fn = click.option(
        "--root",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        default=Path("."),
        show_default=True,
        help="Root directory; paths outside it are refused.",
    )(fn)
    return fn


def _cli_session(cache: FileCache, session: str | None) -> Session:
    """``--session``, else the root's settings' session, else ``CLI_SESSION``."""
    return cache.session(session or cache.engine.settings.session or CLI_SESSION)


def _emit(result: Any, as_json: bool, session: Session) -> None:
    if as_json:
        payload = dataclasses.asdict(result) | {"session": session.id}
        click.echo(json.dumps(payload, indent=2))
    else:
        # color=True: click would strip ANSI escapes when piped, changing the file's content.
        click.echo(result.text, nl=False, color=True)


@main.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--offset", type=int, help=param_help("read_file", "offset"))
@click.option("--limit", type=int, help=param_help("read_file", "limit"))
@click.option(
    "--mode",
    type=click.Choice(READ_FILE.param("mode").enum or ()),
    default="auto",
    show_default=True,
    help=param_help("read_file", "mode"),
)
@click.option("--symbol", help=param_help("read_file", "symbol"))
@click.option("--fresh", is_flag=True, help=param_help("read_file", "fresh"))
@click.option(
    "--raw",
    is_flag=True,
    help="The file's lines as they are, without header or line numbers (read fresh: never a "
    "FileRef or diff).",
)
@click.option("--call-id", help="The tool call id to record (default: generated).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@cache_options
def read(
    path: str,
    offset: int | None,
    limit: int | None,
    mode: str,
    symbol: str | None,
    fresh: bool,
    raw: bool,
    call_id: str | None,
    as_json: bool,
    root: Path,
    store: str | None,
    session: str | None,
) -> None:
    """Read PATH as the session's model should see it: content, FileRef or diff."""
    from filecache.cli_read import run_read  # also run without click (filecache.entry)

    text = run_read(
        path, offset=offset, limit=limit, mode=mode, symbol=symbol, fresh=fresh, raw=raw,
        call_id=call_id, as_json=as_json, root=root, store=store, session=session,
    )  # fmt: skip
    # color=True: click would strip ANSI escapes when piped, changing the file's content.
    click.echo(text, nl=as_json, color=True)


@main.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--symbol", help="Print one definition's source instead (e.g. Queue.pop).")
@click.option("--json", "as_json", is_flag=True, help="Print definitions as JSON.")
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Root directory; paths outside it are refused.",
)
def outline(path: str, symbol: str | None, as_json: bool, root: Path) -> None:
    """Print PATH's outline: definitions with signatures and line ranges."""
    from filecache.cache import FileCache

    with FileCache(root, store=":memory:") as cache:
        s = cache.session()
        if symbol is not None:
            _emit(s.read(path, symbol=symbol), as_json, s)
            return
        result = s.read(path, mode="outline")
        if not as_json:
            click.echo(result.text, nl=False)
            return
        found = cache.engine.outlines.outline_of(result.version, result.path)
        payload = {
            "path": result.path,
            "version": result.version,
            "language": found.language,
            "line_count": found.line_count,
            "errors": found.errors,
            "definitions": [dataclasses.asdict(d) for d in found.definitions],
            "text": result.text,
            "tokens": result.tokens,
            "tokens_full": result.tokens_full,
        }
        click.echo(json.dumps(payload, indent=2))


@main.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--content", help=f"{param_help('write_file', 'content')} Default: standard input.")
@click.option("--call-id", help="The tool call id to record (default: generated).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@cache_options
def write(
    path: str,
    content: str | None,
    call_id: str | None,
    as_json: bool,
    root: Path,
    store: str | None,
    session: str | None,
) -> None:
    """Create or replace PATH (atomically) and record it in the session."""
    from filecache.cache import FileCache

    text = content if content is not None else sys.stdin.read()
    with FileCache(root, store=store) as cache:
        s = _cli_session(cache, session)
        _emit(s.write(path, text, call_id=call_id), as_json, s)


@main.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--old", "old_string", required=True, help=param_help("edit_file", "old_string"))
@click.option("--new", "new_string", required=True, help=param_help("edit_file", "new_string"))
@click.option("--replace-all", is_flag=True, help=param_help("edit_file", "replace_all"))
@click.option("--call-id", help="The tool call id to record (default: generated).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@cache_options
def edit(
    path: str,
    old_string: str,
    new_string: str,
    replace_all: bool,
    call_id: str | None,
    as_json: bool,
    root: Path,
    store: str | None,
    session: str | None,
) -> None:
    """Replace text in PATH: OLD must occur exactly once unless --replace-all."""
    from filecache.cache import FileCache

    with FileCache(root, store=store) as cache:
        s = _cli_session(cache, session)
        result = s.edit(path, old_string, new_string, replace_all=replace_all, call_id=call_id)
        _emit(result, as_json, s)


@main.command(context_settings=CONTEXT)
@click.option(
    "--root",
    "roots",
    multiple=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Directory to serve (repeatable). Default: the current directory.",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for a client that starts the server; http for streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP host.")
@click.option("--port", type=int, default=8000, show_default=True, help="HTTP port.")
@click.option(
    "--store",
    envvar="FILECACHE_STORE",
    help="SQLite store path, ':memory:' or postgresql:// URL. Default: <root>/.filecache/cache.db.",
)
@click.option(
    "--session",
    envvar="FILECACHE_SESSION",
    help="One fixed session id for every connection. Default: a new one per connection.",
)
@click.option(
    "--ref-calls",
    type=click.IntRange(min=0),
    help="A result backs FileRefs/diffs for this many later calls of its connection "
    "(setting mcp_ref_calls, default 50; 0: always send content).",
)
@click.option(
    "--ref-minutes",
    type=click.FloatRange(min=0),
    help="...and for this many minutes (setting mcp_ref_minutes, default 30).",
)
@click.option(
    "--watch",
    is_flag=True,
    help="Tell each session about files changed outside the agent, with the diff (setting watch).",
)
@click.pass_context
def serve(
    ctx: click.Context,
    roots: tuple[Path, ...],
    transport: str,
    host: str,
    port: int,
    store: str | None,
    session: str | None,
    ref_calls: int | None,
    ref_minutes: float | None,
    watch: bool,
) -> None:
    """Run an MCP server with read_file/write_file/edit_file/cache_stats (needs the mcp extra)."""
    try:
        from filecache.adapters.mcp_server import ServeOptions
        from filecache.adapters.mcp_server import serve as run_server
    except ModuleNotFoundError as exc:
        if exc.name != "mcp":  # mcp_required() names the extra's modules "mcp"
            raise
        click.echo(f"filecache: {exc}", err=True)  # what to install
        ctx.exit(2)
    options = ServeOptions(
        roots=roots or (Path("."),),
        store=store,
        session=session,
        max_calls=ref_calls,
        max_minutes=ref_minutes,
        watch=watch,
    )
    run_server(options, transport=transport, host=host, port=port)


def _require_gateway(ctx: click.Context) -> None:
    """Exit 2 with the install hint when the gateway extra (aiohttp) is missing."""
    try:
        # proxy first: it turns a missing aiohttp into the install hint (server.py's own
        # ``from aiohttp import web`` would say only "No module named 'aiohttp'")
        from filecache.adapters.gateway import proxy  # noqa: F401
    except ModuleNotFoundError as exc:
        if exc.name != "aiohttp":  # proxy.py names the extra's modules "aiohttp"
            raise
        click.echo(f"filecache: {exc}", err=True)
        ctx.exit(2)


@main.command(context_settings=CONTEXT)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; beyond loopback it needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8787,
    show_default=True,
    help="Port (0: any free one).",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    metavar="[anthropic=|openai=|/PREFIX=]URL",
    help="Where requests go (repeatable): one URL for everything, per API family, or "
    "per path prefix. Default: ANTHROPIC_BASE_URL or https://api.anthropic.com for "
    "/v1/messages, OPENAI_BASE_URL or https://api.openai.com for the rest.",
)
@click.option(
    "--store",
    envvar="FILECACHE_GATEWAY_STORE",
    help="The conversations' memory: SQLite path, ':memory:' or postgresql:// URL; "
    "env FILECACHE_GATEWAY_STORE. Default: the user's gateway store.",
)
@click.option(
    "--window",
    type=click.IntRange(min=1000),
    help="The model's context window in tokens (pruning pressure). Default: 200000.",
)
@click.option(
    "--token",
    envvar="FILECACHE_GATEWAY_TOKEN",
    help="Required on every request (header x-filecache-token or a /t/TOKEN path "
    "prefix); env FILECACHE_GATEWAY_TOKEN. Needed to bind beyond loopback.",
)
@click.option(
    "--background",
    is_flag=True,
    help="Start (or reuse) this user's background gateway, print its URL and return.",
)
@click.option("--status", is_flag=True, help="List this user's background gateways.")
@click.option("--stop", is_flag=True, help="Stop this user's background gateways.")
@click.option(
    "--memory",
    "memory_report",
    is_flag=True,
    help="Print what the store holds for the gateway (conversations, rows, bytes).",
)
@click.option(
    "--gc",
    "gc_days",
    type=click.FloatRange(min=0),
    metavar="DAYS",
    help="Delete the conversations idle longer than DAYS days from the store, then print "
    "--memory (a starting gateway does this with FILECACHE_GATEWAY_KEEP_DAYS, default 30).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def gateway(
    ctx: click.Context,
    host: str,
    port: int,
    upstreams: tuple[str, ...],
    store: str | None,
    window: int | None,
    token: str | None,
    background: bool,
    status: bool,
    stop: bool,
    memory_report: bool,
    gc_days: float | None,
    as_json: bool,
) -> None:
    """Serve the model API on 127.0.0.1 with filecache's request transform (needs the gateway
    extra): point a host's base URL at the URL it prints."""  # fmt: skip
    import os

    if memory_report or gc_days is not None:
        _gateway_memory(store, gc_days, as_json)
        return

    from filecache.adapters.gateway.routes import parse_specs

    _require_gateway(ctx)
    from filecache.adapters.gateway import server, user_gateway

    env = dict(os.environ)
    try:
        if status or stop or background:
            _background_gateway(env, store, status, stop, as_json)
            return
    except (user_gateway.Refused, OSError, RuntimeError) as exc:
        click.echo(f"filecache: {exc}", err=True)
        ctx.exit(2)
    try:
        specs = parse_specs(list(upstreams))
        server.check_bind(host, token)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    options = server.ServeOptions(host=host, port=port, upstreams=specs, store=store,
                                  window=window, token=token, env=env)  # fmt: skip
    import logging

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="gateway %(message)s")

    def ready(url: str, bound: int) -> None:
        click.echo(json.dumps({"url": url, "port": bound}) if as_json else url)
        sys.stdout.flush()

    try:
        server.serve(options, ready)
    except OSError as exc:  # the port is taken, the address is not this machine's
        click.echo(f"filecache: cannot listen on {host}:{port}: {exc.strerror or exc}", err=True)
        ctx.exit(2)


def _gateway_memory(store: str | None, gc_days: float | None, as_json: bool) -> None:
    """``filecache gateway --memory`` and ``--gc DAYS``: they only read, so a store file that
    was never made is reported empty and not created."""
    from filecache.gateway import open_memory
    from filecache.gateway.memory import gateway_store_path
    from filecache.store.store_url import is_store_url

    location = store if store is not None else str(gateway_store_path())
    if location != ":memory:" and not is_store_url(location) and not Path(location).exists():
        deleted: int | None = 0 if gc_days is not None else None
        out: dict[str, int | None] = {"conversations": 0, "rows": 0, "store_bytes": None}
    else:
        memory = open_memory(store)
        try:
            deleted = memory.gc(gc_days) if gc_days is not None else None
            report = memory.report()
        finally:
            memory.close()
        out = {"conversations": report.conversations, "rows": report.rows,
               "store_bytes": report.store_bytes}  # fmt: skip
    if deleted is not None:
        out["deleted"] = deleted
    size = "" if out["store_bytes"] is None else f", {out['store_bytes'] / 1024:,.0f} KB on disk"
    line = f"{out['conversations']} conversations, {out['rows']} rows{size}"
    if deleted is not None:
        line = f"deleted {deleted} idle conversations; now {line}"
    click.echo(json.dumps(out) if as_json else line)


def _background_gateway(
    env: dict[str, str],
    store: str | None,
    status: bool,
    stop: bool,
    as_json: bool,
) -> None:
    """``filecache gateway --status``, ``--stop`` or ``--background``."""  # fmt: skip
    from filecache.adapters.gateway import user_gateway

    if stop:
        pids = user_gateway.stop_gateways(env)
        out: Any = {"stopped": pids}
        line = f"stopped {len(pids)} gateway(s)" + (f" (pid {pids})" if pids else "")
    elif status:
        out = user_gateway.running_gateways(env)
        line = (
            "\n".join(
                f"pid {g['pid']}  {g['url']}  {g['requests']} requests  "
                f"{g['tokens_before']}->{g['tokens_after']} tokens  "
                f"idle {g['idle_seconds']:.0f} s"
                for g in out
            )
            or "no background gateway is running"
        )
    else:
        running = user_gateway.ensure_gateway(env, store)
        out, line = {"url": running.url, "pid": running.pid}, running.url
    click.echo(json.dumps(out, indent=2 if status or stop else None) if as_json else line)


@main.command(
    context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--window",
    type=click.IntRange(min=1000),
    help="The model's context window in tokens (pruning pressure). Default: 200000.",
)
@click.argument("host", type=click.Choice(RUN_NAMES))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(window: int | None, host: str, args: tuple[str, ...]) -> None:
    """Run HOST (claude, codex, opencode, gemini or kilo) with ARGS through this user's gateway
    (started when none runs). Only this process is pointed at it; if the gateway cannot start,
    the plain host runs, with one line on stderr."""  # fmt: skip
    from filecache.adapters.gateway.run import run_host

    try:
        run_host(host, args, window)
    except FileNotFoundError as exc:
        raise RequestError(f"{exc}; install {host} or put it on PATH") from exc


@main.command(context_settings=CONTEXT)
@click.argument("source", type=click.File("rb"))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write here.")
@click.option("--format", "fmt", type=click.Choice([f.value for f in Format]), help="Detected.")
@click.option("--window", type=int, default=128_000, show_default=True, help="Context tokens.")
@preset_option(
    "cost: least billed under prompt caching; context: the prompt small (small windows, "
    "providers without prompt caching)."
)
@cache_aware_option("Prune")
@click.option("--json", "as_json", is_flag=True, help="Print what was reclaimed as JSON.")
@click.option("--store", envvar="FILECACHE_STORE", help="Store for the archive and projections.")
@click.option(
    "--session",
    envvar="FILECACHE_SESSION",
    help="The filecache session whose reads these are: its ledger guides pruning, and it "
    "forgets what is cleared.",
)
@click.option(
    "--root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=Path("."),
    show_default=True,
    help="The session's root (with --session).",
)
@model_option
def prune(
    source: Any,
    output: Path | None,
    fmt: str | None,
    window: int,
    preset: str,
    cache_aware: bool | None,
    as_json: bool,
    store: str | None,
    session: str | None,
    root: Path,
    model: str | None,
) -> None:
    """Prune SOURCE (a message list, or an object with 'messages'/'input'; '-' for stdin)."""
    from filecache.cache import FileCache
    from filecache.core.json_input import load_json
    from filecache.core.tokens import TokenCounter
    from filecache.figures import prices_for, prune_headline
    from filecache.prune.pruner import prune_messages
    from filecache.prune.pruning import PrunePolicy
    from filecache.settings import load_settings
    from filecache.store.opening import open_store, store_location

    check_output_file(output)
    name = getattr(source, "name", "-")
    data = load_json(source.read(), name if isinstance(name, str) else "-")  # one-line errors
    aware = {} if cache_aware is None else {"cache_aware": cache_aware}
    policy = PrunePolicy.preset(preset, context_window=window, **aware)
    prices = prices_for(model)  # an unknown model fails before the work
    if session is not None:  # a filecache session: its ledger guides the plan, and it forgets
        with FileCache(root, store=store) as cache:  # what the plan clears (ref safety)
            s = cache.session(session)
            result = prune_messages(data, session=s, policy=policy, format=fmt)
            headline = prune_headline(  # this request, counted into the session's figures
                data, result.messages, result.format, cache.engine.counts.tokens.count,
                cache.engine.store, s.id, prices,
            )  # fmt: skip
    else:
        resolved = root.resolve()
        path = store_location(resolved, store)
        deny = load_settings(resolved).deny
        with open_store(root, path) as opened:
            result = prune_messages(
                data, store=opened, policy=policy, format=fmt, deny=deny, root=resolved
            )
        count = TokenCounter().count
        headline = prune_headline(data, result.messages, result.format, count, None, None, prices)
    text = json.dumps(result.messages, ensure_ascii=False, indent=1)
    if output is not None:
        write_output(output, text + "\n")
    else:
        click.echo(text)
    if output is not None and not as_json and result.report is not None:
        click.echo(f"{output}: {result.report.describe()}", err=True)  # -o printed nothing
    if as_json:
        plan = result.plan
        report = {
            "headline": headline.to_json(),
            "format": result.format,
            # against the input as given: this pass's changes and the sticky earlier ones
            **(result.report.to_json() if result.report is not None else {}),
            # this pass's plan: its input had the earlier passes' projections applied
            "prompt_tokens": plan.prompt_tokens,
            "reclaimed": plan.reclaimed,
            "triggered": plan.triggered,
            "gate": plan.gate,
            "actions": [
                {
                    "call_id": a.call_id,
                    "tier": a.tier,
                    "reason": a.reason,
                    "tokens_before": a.tokens_before,
                    "tokens_after": a.tokens_after,
                }
                for a in plan.actions
            ],
        }
        click.echo(json.dumps(report, indent=2), err=output is None)


@main.command("import", context_settings=CONTEXT)
@click.argument(
    "fmt", metavar="FORMAT", type=click.Choice(["claude-code", "swe-agent", "mini-swe-agent"])
)
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the traces (one subdirectory per session).",
)
@click.option(
    "--repo",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A checkout with the files as they were before the sessions (default: rebuild them "
    "from what the logs show).",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def import_(
    fmt: str, sources: tuple[Path, ...], output: Path, repo: Path | None, as_json: bool
) -> None:
    """Convert agent logs (SOURCES: files or directories) into traces for `filecache replay`."""
    from filecache.importers import import_logs

    hidden = not sys.stderr.isatty()
    empty: list[Path] = []
    with click.progressbar(length=0, label="importing", file=sys.stderr, hidden=hidden) as bar:
        results = import_logs(
            fmt, sources, output, repo=repo, progress=lambda _: bar.update(1), empty=empty.append
        )
    if as_json:
        click.echo(json.dumps([r.to_json() for r in results], indent=2))
        return
    for r in results:
        click.echo(f"{r.directory}: {r.messages} messages, {r.file_calls} file tool calls")
        if r.rebuilt:
            partial = f", {len(r.unknown_files)} known only in part" if r.unknown_files else ""
            click.echo(f"  files/ rebuilt from the log: {len(r.files)} files{partial}")
        for path, unknown in r.unknown_files.items():
            click.echo(f"    {path}: {unknown.describe()}")
        if r.unknown_calls:
            click.echo(
                f"  {len(r.unknown_calls)} file tool calls kept as recorded by replay "
                "(the log does not show their files; see 'unknown' in transcript.json)"
            )
        for note in r.notes:
            click.echo(f"  note: {note}")
    for log in empty:
        click.echo(f"{log}: no message in it, no trace")
    click.echo(f"next: filecache replay {output}/*")


@main.command(context_settings=CONTEXT)
@click.argument("root", default=".", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--debounce", type=click.FloatRange(min=0), default=0.2, show_default=True,
    help="Seconds of quiet that end a burst of changes.",
)  # fmt: skip
@click.option("--count", type=click.IntRange(min=1), help="Stop after this many changes.")
@click.option("--duration", type=click.FloatRange(min=0), help="Stop after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change.")
def watch(
    root: Path, debounce: float, count: int | None, duration: float | None, as_json: bool
) -> None:
    """Print files changed under ROOT (debounced; the store's folder and VCS folders ignored)."""
    import threading

    from filecache.watch import Change, Watcher

    done = threading.Event()
    seen = 0

    def show(changes: Sequence[Change]) -> None:
        nonlocal seen
        for change in changes:
            if done.is_set():
                return
            if as_json:
                click.echo(json.dumps({"path": change.path, "kind": change.kind}))
            else:
                click.echo(f"{change.kind} {change.path}")
            seen += 1
            if count is not None and seen >= count:
                done.set()

    with Watcher(root, show, debounce=debounce):
        if not as_json:
            click.echo(f"watching {root.resolve()} (Ctrl-C to stop)", err=True)
        try:
            done.wait(duration)
        except KeyboardInterrupt:
            pass


_HOSTS = HOST_NAMES  # host_specs imports nothing: the CLI's start stays as it was


@main.command(context_settings=CONTEXT)
@click.argument("host", type=click.Choice(_HOSTS))
@click.option("--user", is_flag=True, help="For every project of this user (~/...).")
@click.option("--project", is_flag=True, help="For the project in the current directory.")
@click.option(
    "--local",
    is_flag=True,
    help="Claude Code only: for this project, this developer only (.claude/settings.local.json).",
)
@click.option("--uninstall", is_flag=True, help="Remove filecache's hooks (and only them).")
@click.option(
    "--http",
    is_flag=True,
    help="Claude Code only, Linux: answer each tool call by an http hook to a resident server "
    "on 127.0.0.1 (no process per call); the server starts with the next session or prompt. "
    "The default where no one else can log in to this machine.",
)
@click.option(
    "--http-port",
    type=int,
    default=None,
    help="The http server's port (implies --http; default: 41000 + uid mod 8000, per user).",
)
@click.option(
    "--command",
    "command_hooks",
    is_flag=True,
    help="Claude Code only: a command hook (a process per tool call) for every event; the "
    "default where others can log in, or off Linux.",
)
def install(
    host: str,
    user: bool,
    project: bool,
    local: bool,
    uninstall: bool,
    http: bool,
    http_port: int | None,
    command_hooks: bool,
) -> None:
    """Put filecache inside HOST's own tools (Claude Code: the project by default; Codex and
    opencode: the user by default). Idempotent; merges with the settings already there. One
    installation per host: filecache's hooks of HOST at another scope are removed (the line
    printed names them). --user, --project and --local exclude each other. The hooks run
    this machine's Python by its absolute path: commit a project's file only if every
    teammate's path is the same. Claude Code's hooks are http hooks where only you can log in
    to this machine (Linux), else command hooks: the line printed says which and why."""
    from filecache.adapters.hosts import registry

    chosen = [name for name, on in (("user", user), ("project", project), ("local", local)) if on]
    if len(chosen) > 1:
        given = " and ".join(f"--{name}" for name in chosen)
        raise click.UsageError(f"{given} exclude each other; pass one (or none: the default)")
    scope = chosen[0] if chosen else None

    wants_http = http or http_port is not None
    if uninstall and (wants_http or command_hooks):
        flag = "--command" if command_hooks else "--http"
        raise click.UsageError(f"{flag} and --uninstall exclude each other")
    if wants_http and command_hooks:
        raise click.UsageError("--http and --command exclude each other")
    if command_hooks and host != "claude-code":
        raise click.UsageError("--command is for Claude Code only (its hooks are commands)")
    if uninstall:
        line: str = registry.host_module(host).install(scope=scope, uninstall=True, cwd=Path.cwd())
        click.echo(line + _stopped())
        return
    form = True if wants_http else False if command_hooks else None
    click.echo(registry.install(host, scope=scope, cwd=Path.cwd(), http_port=http_port, http=form))


def _stopped() -> str:
    """Stop the resident hook servers, the http ones included (a host still installed
    restarts them); what to add."""
    from filecache.adapters.hosts import hook_http
    from filecache.adapters.hosts.hook_client import stop_servers

    stopped = [*stop_servers(), *hook_http.stop_servers()]
    return f"; stopped {len(stopped)} resident hook server(s)" if stopped else ""


@main.command(context_settings=CONTEXT)
@click.argument("hosts", nargs=-1, type=click.Choice(_HOSTS))
@click.option("--user", is_flag=True, help="Only the user's hooks (~/...).")
@click.option("--project", is_flag=True, help="Only the project's hooks (current directory).")
@click.option("--local", is_flag=True, help="Only .claude/settings.local.json (Claude Code).")
def uninstall(hosts: tuple[str, ...], user: bool, project: bool, local: bool) -> None:
    """Remove filecache's hooks of HOSTS (default: every host) at every scope: the user's and
    the current project's, whichever interpreter or release installed them and whether or not
    it still exists. Only filecache's entries go; the files stay."""
    from filecache.adapters.hosts import registry

    chosen = [name for name, on in (("user", user), ("project", project), ("local", local)) if on]
    if len(chosen) > 1:
        raise click.UsageError("--user, --project and --local exclude each other; pass one")
    lines = registry.uninstall(Path.cwd(), hosts or registry.HOSTS, chosen[0] if chosen else None)
    for line in lines:
        click.echo(line)
    if not lines:
        click.echo("no filecache hooks found for " + (", ".join(hosts) or "any host") + _stopped())
    else:
        stopped = _stopped()
        if stopped:
            click.echo(stopped.removeprefix("; "))


@main.command(context_settings=CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis as JSON.")
def doctor(as_json: bool) -> None:
    """Say what serves the hosts here: filecache's hooks of every host at every scope (the
    interpreter and script each names, and whether they are still there), the store this
    project's hooks use and whether it can be written, the resident hook servers, and the
    last error in the hook log."""
    from filecache.adapters.hosts.doctor import diagnose, format_diagnosis

    found = diagnose(Path.cwd())
    click.echo(json.dumps(found.to_json(), indent=2) if as_json else format_diagnosis(found))


@main.command(context_settings={**CONTEXT, "ignore_unknown_options": True})
@click.argument("host", type=click.Choice(_HOSTS), required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--status", is_flag=True, help="List this user's resident hook servers.")
@click.option("--stop", is_flag=True, help="Stop this user's resident hook servers.")
@click.option("--json", "as_json", is_flag=True, help="With --status: one JSON object a line.")
def hook(host: str | None, args: tuple[str, ...], status: bool, stop: bool, as_json: bool) -> None:
    """The hook HOST runs for each tool call: the payload on stdin, the answer on stdout.

    It never fails: on any internal error it logs one line and prints nothing, so HOST keeps
    its own output. This form runs in this process; ``filecache install HOST`` writes the
    faster ``PYTHON -I -S .../hosts/hook_client.py HOST`` (PYTHON and the client by their
    absolute paths), a thin client of the resident hook server (``--status`` lists those
    servers, ``--stop`` ends them; they start again on the next hook call)."""
    from filecache.adapters.hosts import hook_client

    if status or stop:
        if host is not None:
            raise click.UsageError("--status and --stop take no HOST")
        _hook_servers(hook_client, stop=stop, as_json=as_json)
        return
    if host is None:
        raise click.UsageError("missing HOST (one of " + ", ".join(_HOSTS) + ")")
    from filecache.adapters.hosts import registry

    out: bytes = registry.run_hook(host, list(args), sys.stdin.buffer.read())
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()


def _hook_servers(hook_client: Any, *, stop: bool, as_json: bool) -> None:
    if stop:
        pids = hook_client.stop_servers()
        shown = ", ".join(str(p) for p in pids)
        click.echo(f"stopped {len(pids)} hook server(s)" + (f" (pid {shown})" if pids else ""))
        return
    found = 0
    for path in hook_client.server_sockets():
        answer = hook_client.ping(path)
        if answer is None:
            continue
        found += 1
        info = json.loads(answer[1])
        if as_json:
            click.echo(json.dumps(info))
        else:
            click.echo(f"pid {info['pid']}  filecache {info['version']}  {info['calls']} calls  "
                       f"idle {info['idle_seconds']:.0f}/{info['idle_limit']:.0f} s  "
                       f"{info['socket']}")  # fmt: skip
    if not found and not as_json:
        click.echo("no hook server is running")


@main.group(context_settings=CONTEXT)
def archive() -> None:
    """Originals of tool results that pruning changed."""


@archive.command("show", context_settings=CONTEXT)
@click.argument("call_id")
@click.option("--session", envvar="FILECACHE_SESSION", help="Only this session's archive.")
@click.option("--store", envvar="FILECACHE_STORE", help="Store path (default: ./.filecache).")
def archive_show(call_id: str, session: str | None, store: str | None) -> None:
    """Print the original text of CALL_ID's result."""
    from filecache.cli_reports import open_existing
    from filecache.prune.pruner import NOT_ARCHIVED

    with open_existing(store) as opened:  # read-only: no store is made
        text = opened.archive_get(call_id, session)
    if text is None:
        raise RequestError(f"no archived result for {call_id}; check the id and --store")
    if text.startswith(NOT_ARCHIVED):  # a denied file's result: only a marker was kept
        raise RequestError(f"{call_id}: {text.removeprefix(NOT_ARCHIVED).rstrip(']')}")
    click.echo(text, nl=False, color=True)


def _claude_code_replay() -> HostReplay:
    from filecache.adapters.hosts.claude_replay import replay_claude_code

    return replay_claude_code


def _register_reports() -> None:
    from filecache.cli_reports import replay, sessions, stats
    from filecache.core.host_labels import register_host
    from filecache.replay.host_registry import register_host_replay

    for command in (replay, stats, sessions):
        main.add_command(command)
    # filecache.replay and filecache.stats never import the adapters: the CLI, above them,
    # connects them (host_specs' table of hosts: the names stats gives their sessions).
    register_host_replay("claude-code", _claude_code_replay)
    for spec in SPECS:
        register_host(spec.name, spec.display)


_register_reports()
