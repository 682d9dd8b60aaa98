"""The pruning planner: which old tool results to degrade or clear, and whether it pays.

Pure: ``plan_prune`` takes a neutral ``Transcript``, an optional ``Ledger`` (from the session),
a ``PrunePolicy``, a token counter and a few callbacks, and returns a frozen ``PrunePlan``;
``apply_plan`` renders the new message list. No I/O here (``pruner.py`` does the archive,
projections and ``Session.forget``).

Passes, in order (docs/design.md, "Pruning"):

1. Recency protection: the newest ``protect_recent`` tokens of tool output stay verbatim.
2. Supersession: a file read is superseded by a later write, edit or outside change of the
   same path, or by a later content read covering all its lines (an outline answer: by any
   later content read of the file, the range the model looked it up for); superseded results
   clear.
3. Keep-alive: a result that a later FileRef or diff (still in the transcript, not cleared)
   relies on stays intact; so does a read of a file named in the protected tail.
4. Tiered degradation, oldest first, until the prompt is back under ``target``: a large file
   read becomes its outline, other large output its head and tail; small results clear (every
   result, with ``degrade`` off); over ``hard_at`` degraded results clear too.
5. Placeholders say what was lost, why, and how to get it back (``render.py``).

Supersession also covers a command's output once the same command ran again
(``shell_outputs``), and (2b) the model's own inputs: the payload of a write or edit, or a
shell heredoc's body, once the file was written again or a later read still verbatim shows it
in full (``input_pruning``); these are actions on the call (``PruneAction.target`` "input"),
weighed by the cost gate like the others and checked again after it.

Invariants:
- Only tool-result bodies change, and the arguments of a superseded write or edit (pass 2b,
  ``input_pruning``: each long string becomes a reference, keys and types kept); every call
  keeps its id, its name and exactly one result, in place.
- Tiers only escalate (verbatim < outline/truncate < clear). A projection seen before
  (``prior``) renders to the same bytes again: prompt-cache friendly and restart-safe.
- Idempotent: planning on the output of a plan (with the same ``prior``) adds nothing.
- The cost gate (on by default) keeps only the actions whose saving, over the turns expected to
  remain, pays for the cached prefix they invalidate (``prune_cost``); one cut per pass, as
  deep as the next pass over its output would make it (``_gate_settled``).

Presets (``PrunePolicy.preset``): ``cost`` bills least under prompt caching (it considers a
cut before every request and the cost gate keeps those that pay); ``context`` makes the same
cuts without the gate, for the smallest prompt (small windows, providers without prompt
caching). ``PrunePolicy()`` is the seeds' defaults (65% trigger, degrade before clearing).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from filecache.core.kinds import CHANGES, FILE_ACCESSES, Kind, Tier, Tool
from filecache.core.render import (
    MARKER,
    OUTLINE_TAG,
    PLACEHOLDER_MARKER,
    TRUNCATION_MARKER,
    answer_of,
    render_cleared,
    render_cleared_ref,
    render_outlined,
    render_truncated,
)
from filecache.errors import ConfigError
from filecache.ledger import Ledger
from filecache.prune.codecs.base import Message, ToolCall, Transcript, render_inputs
from filecache.prune.file_tools import file_name, same_path
from filecache.prune.input_pruning import (
    Superseded,
    cleared_arguments,
    cleared_heredocs,
    is_cleared_input,
    superseded_inputs,
)
from filecache.prune.prune_cost import cut_net, session_growth
from filecache.prune.results import ResultInfo
from filecache.prune.shell_outputs import superseded_outputs
from filecache.prune.transcript import file_access

__all__ = [
    "PRESETS", "PruneAction", "PrunePlan", "PrunePolicy", "ResultInfo", "apply_plan", "plan_prune",
    "tier_of",
]  # fmt: skip

TIERS = {Tier.KEEP: 0, Tier.OUTLINE: 1, Tier.TRUNCATE: 1, Tier.CLEAR: 2}
_CONTENT = ("", Kind.FULL, Kind.PARTIAL)
_BY_READS = (
    "superseded by a later read",
    "superseded by later reads",
)  # lines shown again  # answers that show the lines ("": content, ledger unknown)


@dataclass(frozen=True)
class PrunePolicy:
    """When and how hard to prune. Defaults follow the seeds (see ``docs/pruning.md``).

    Attributes:
        context_window: the model's context, in tokens.
        prune_at: prune when the prompt passes this fraction of the window (neenee: 0.65).
        target: prune down to this fraction, so the next passes do not churn.
        hard_at: over this fraction degraded results clear too, and the cost gate is bypassed
            (the alternative is overflowing the window).
        protect_recent: the newest tool-output tokens kept verbatim (neenee: 6,000).
        min_reclaim: a pass that would reclaim fewer tokens does nothing.
        small_result: results under this many tokens clear instead of degrading
            (neenee's 8,000-character floor, about 2,000 tokens).
        head_lines, tail_lines: what a truncated result keeps.
        cache_aware: gate on prompt-cache economics (on by default).
        cache_read, cache_write: prices of cached and newly cached tokens, relative to 1.
        turns_left: requests expected after this one; None: the gate simulates the requests
            to come (``prune_cost``: as many again as so far, growing as they have; a cut
            saves only until the prompt would pass ``hard_at``, where it is made anyway).
        min_turns_left: with ``turns_left`` None, the gate expects at least this many requests
            to come (early in a session, "as many again as so far" is too few).
        max_turns_left: with ``turns_left`` None, the gate expects at most this many requests
            to come (None: no cap): a cut that pays back only after more requests than this
            is a bet on a session that may end first.
        output_first: degrade other output (bash, ...) before file reads.
        in_use_turns: reads of files named in the last this many assistant turns stay intact
            (0: only those the protected tail names).
        revisit_turns: reads of files the model came back to, named in at least two of the
            last this many assistant turns, stay intact too (0: off). A file named once long
            ago is done with; one named again after it was read is a working file, and the
            model may return to it after a gap longer than ``in_use_turns``.
        keep_edited: a read superseded by a write, edit or outside change stays (the model's
            view of the file after its own edit is built on it); reads covered by a later
            read still clear, and so do outline answers (they show no lines to build on). The
            confirmations of edits to files in use stay too (they say where an edit landed).
        degrade: a large old result first becomes its outline or its head and tail; False:
            every old result that is not kept clears at once.
        inputs: the payload of a write or edit the model holds elsewhere (the file written
            again, or shown in full by a later read still in the transcript) is replaced in the
            model's own call by a short reference (``input_pruning``).
        rerun_outputs: the output of a command (bash, ...) that ran again later is superseded
            (``shell_outputs``): cleared by the supersession pass, when the gate lets it.
    """

    context_window: int = 128_000
    prune_at: float = 0.65
    target: float = 0.5
    hard_at: float = 0.9
    protect_recent: int = 6_000
    min_reclaim: int = 2_000
    small_result: int = 2_000
    head_lines: int = 20
    tail_lines: int = 10
    cache_aware: bool = True
    cache_read: float = 0.1
    cache_write: float = 1.25
    turns_left: int | None = None
    min_turns_left: int = 1
    max_turns_left: int | None = None
    output_first: bool = False
    in_use_turns: int = 0
    revisit_turns: int = 0
    keep_edited: bool = False
    degrade: bool = True
    inputs: bool = True
    rerun_outputs: bool = True

    @classmethod
    def preset(cls, name: str, **overrides: object) -> PrunePolicy:
        """A named preset (``PRESETS``), with ``overrides`` (e.g. ``context_window``).

        Raises:
            ConfigError: an unknown preset name.
        """
        if name not in PRESETS:
            known = ", ".join(PRESETS)
            raise ConfigError(f"unknown preset {name!r}; choose one of {known}")
        return cls(**{**PRESETS[name], **overrides})  # type: ignore[arg-type]


_SMALL: dict[str, object] = {
    # prune from 5% of the window down to nothing but what is protected or in use (reads of
    # files the last 25 turns name, or two of the last 50: files it came back to; reads the
    # model's edits build on); the rest clears without an outline or head-and-tail stage
    "prune_at": 0.05,
    "target": 0.0,
    "protect_recent": 500,
    "min_reclaim": 300,
    "small_result": 500,
    "output_first": True,
    "in_use_turns": 25,
    "revisit_turns": 50,
    "keep_edited": True,
    "degrade": False,
}
PRESETS: dict[str, dict[str, object]] = {
    # least billed under prompt caching: every request is a chance to prune, and the cost
    # gate takes only the cuts that pay for the cache they invalidate (with the seeds'
    # trigger, 65% of the window, it was asked too late: every cut it saw paid, so it never
    # declined one, and on and off billed the same)
    # the requests to come: at least 20 (the dev sessions run 15 to 75; "as many again as so
    # far" made early cuts, the cheapest, look as if they could not pay)
    "cost": {**_SMALL, "cache_aware": True, "min_turns_left": 20},
    # the prompt small: the same rules without the cost gate; for small windows and for
    # providers without prompt caching
    "context": {**_SMALL, "cache_aware": False},
    # PrunePolicy()'s defaults, the seeds' (a 65% trigger, outlines and head-and-tail before
    # clearing, the gate with "as many requests again as so far"): the cost preset before
    "seeds": {},
}


@dataclass(frozen=True, kw_only=True)
class PruneAction:
    """One result's new body."""

    call_id: str
    message_index: int
    tier: str
    text: str
    reason: str
    tokens_before: int
    tokens_after: int
    kind: str = Tool.OTHER  # the call's kind: read / write / edit / change / other
    target: str = "result"  # "input": ``text`` is the call's new arguments (``input_pruning``)


@dataclass(frozen=True, kw_only=True)
class PrunePlan:
    """What a pass decided. ``replacements`` holds every body to render (new and sticky);
    ``inputs`` every call's new arguments (JSON object text), new and sticky."""

    actions: tuple[PruneAction, ...]
    replacements: Mapping[str, str]
    prompt_tokens: int
    reclaimed: int
    triggered: bool
    gate: str = ""
    dropped_by_gate: tuple[str, ...] = field(default=())
    inputs: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.replacements) or bool(self.inputs)


def tier_of(text: str) -> str:
    """The tier a rendered result body shows (a placeholder, an outline, head + tail, kept)."""
    if text.startswith(PLACEHOLDER_MARKER):
        return Tier.CLEAR
    if text.startswith(OUTLINE_TAG):
        return Tier.OUTLINE
    if TRUNCATION_MARKER in text:
        return Tier.TRUNCATE
    return Tier.KEEP


def collect(
    transcript: Transcript,
    ledger: Ledger | None,
    count: Callable[[str], int],
    prior: Mapping[str, tuple[str, str]] | None = None,
) -> list[ResultInfo]:
    """Every tool result with what is known of its call (ledger first, then the transcript).

    A result in ``prior`` (call id -> (tier, text)) is seen as that projection, with its text in
    the transcript as ``original``.
    """
    calls = transcript.calls_by_id()
    infos = []
    for result in transcript.results():
        text, original = result.text, ""
        if prior and result.call_id in prior:
            tier, text = prior[result.call_id]
            original = result.text
        else:
            tier = tier_of(text)
        call = calls.get(result.call_id)
        record = ledger.calls.get(result.call_id) if ledger else None
        access = file_access(call) if call is not None else None
        if record is not None and record.tool in FILE_ACCESSES:
            kind, path = record.tool, record.path
            start, end = record.start or 1, record.end
            version, answer, base = record.version, record.kind, record.base_call_id
            if answer == Kind.OUTLINE and tier == Tier.KEEP and not text.startswith(MARKER):
                # The model was not given filecache's outline but something else in its place
                # (the agent's own view, which a cap kept): the transcript says what it holds.
                answer = ""
        elif access is not None:
            kind, path, start, end = access.kind, access.path, access.start, access.end
            version = None
            answer, base = (Kind.ERROR, None) if result.is_error else answer_of(result.text)
        else:
            kind, path, start, end, version = Tool.OTHER, None, 1, None, None
            # Another tool's result may still be filecache's answer (a shell read served by
            # ``filecache.shell``): a FileRef or diff in it relies on the result it names.
            answer, base = ("", None) if result.is_error else answer_of(result.text)
        tool = call.name if call is not None else "?"
        command = _short_command(call.arguments, call.raw_arguments) if call is not None else ""
        infos.append(
            ResultInfo(
                call_id=result.call_id, message_index=result.message_index, tool=tool, kind=kind,
                path=path, start=start, end=end, version=version, answer=answer,
                base_call_id=base, tokens=count(text), text=text, tier=tier, command=command,
                original=original, deps=record.deps if record is not None else (),
            )
        )  # fmt: skip
    return infos


def _short_command(arguments: Mapping[str, object], raw: str) -> str:
    value = next((arguments[k] for k in ("command", "cmd", "query") if k in arguments), raw)
    text = " ".join(str(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _covers(later: ResultInfo, earlier: ResultInfo) -> bool:
    if later.end is None:
        return later.start <= earlier.start
    if earlier.end is None:
        return False
    return later.start <= earlier.start and later.end >= earlier.end


def _by_name(infos: Sequence[ResultInfo]) -> dict[str, list[int]]:
    """Indices of the results by their path's file name: two paths that are the same path
    (``same_path``) have the same file name, so only those need comparing."""
    index: dict[str, list[int]] = {}
    for n, info in enumerate(infos):
        if info.path is not None:
            index.setdefault(file_name(info.path), []).append(n)
    return index


def _superseded(
    infos: Sequence[ResultInfo], ledger: Ledger | None, through_edits: bool = False
) -> dict[str, str]:
    """call id -> why it is superseded (a later write/edit/change, or covering reads).

    ``through_edits``: a read superseded by a write or edit is still looked for in later reads
    (the reason then names them when they show its lines again)."""
    why: dict[str, str] = {}
    by_name = _by_name(infos)
    for i, info in enumerate(infos):
        if info.kind != Tool.READ or info.path is None or info.tier == Tier.CLEAR:
            continue
        same = by_name[file_name(info.path)]
        shown: list[tuple[int, int | None]] = []  # lines later content reads show
        for n in same[bisect_right(same, i) :]:
            later = infos[n]
            if later.path is None or not same_path(later.path, info.path):
                continue
            if later.kind in CHANGES:
                if info.call_id not in why:
                    verb = {"write": "write", "edit": "edit", "change": "a change seen outside"}
                    why[info.call_id] = f"superseded by {verb[later.kind]} {later.call_id}"
                if not through_edits:
                    break
                shown = []  # only reads of the file as it is now show its lines again
                continue
            # With through_edits, a cleared read does not show the lines again: the edit still
            # builds on the earlier read. (Its placeholder reads as an unknown answer, so an
            # outline answer the pass cleared would otherwise cover the read on the next pass.)
            shows = not (through_edits and later.tier == Tier.CLEAR)
            if later.kind == Tool.READ and later.answer in _CONTENT and shows:
                if _outline(info):  # the map was used: the model read from it
                    why[info.call_id] = f"superseded by a later read {later.call_id} of the file"
                    break
                if _covers(later, info):
                    why[info.call_id] = f"superseded by a later read {later.call_id} of these lines"
                    break
                shown.append((later.start, later.end))
                if _union_covers(shown, info.start, info.end):
                    why[info.call_id] = (
                        f"superseded by later reads up to {later.call_id} of these lines"
                    )
                    break
    if ledger is not None:  # changes seen by rehash/watchers have no result of their own
        for info in infos:
            if info.kind != Tool.READ or info.path is None or info.call_id in why:
                continue
            record = ledger.calls.get(info.call_id)
            for write in ledger.writes.get(info.path, ()):
                if record is not None and write.seq > record.seq and write.tool == Tool.CHANGE:
                    why[info.call_id] = f"superseded by a change seen outside ({write.call_id})"
                    break
    return why


def _outline(info: ResultInfo) -> bool:
    """Whether the result is an outline answer (the ledger's kind; without a ledger, a
    filecache answer whose head line says so). A result this pruner degraded to its outline is
    not: its head line says "outline" too, but the model was given the lines (the pass that
    degraded it did not take it for a map the model used, and the next pass must not either)."""
    if info.tier != Tier.KEEP:
        return False
    if info.answer == Kind.OUTLINE:
        return True
    return info.answer == "filecache" and " outline " in info.text.split("\n", 1)[0]


def _union_covers(spans: Sequence[tuple[int, int | None]], start: int, end: int | None) -> bool:
    """Whether ``spans`` (first line, last line or None: to the end) together show every line
    of ``start..end`` (``end`` None: to the end of the file)."""
    reach = start  # every line before ``reach`` is shown
    for first, last in sorted(spans, key=lambda span: span[0]):
        if first > reach:
            break
        if last is None:
            return True
        reach = max(reach, last + 1)
    return end is not None and reach > end


def _built_on(info: ResultInfo, reason: str) -> bool:
    """Whether ``keep_edited`` keeps a superseded read: the model's view of the file after its
    own edit is built on the lines the read showed, unless later reads showed them again. An
    outline shows no lines to build on (and its line numbers are old after the edit)."""
    return (
        info.kind == Tool.READ  # a command's output superseded by its re-run builds nothing
        and not reason.startswith(_BY_READS)
        and info.answer not in (Kind.OUTLINE, "filecache")
    )


def _protected(infos: Sequence[ResultInfo], budget: int) -> set[str]:
    """The newest results within ``budget`` tokens, and always those of the newest message
    with results (what the model just asked for is never pruned, however large)."""
    if not infos:
        return set()
    newest = infos[-1].message_index
    kept = {i.call_id for i in infos if i.message_index == newest}
    used = sum(i.tokens for i in infos if i.call_id in kept)
    for info in reversed(infos):
        if info.call_id in kept:
            continue
        if used + info.tokens > budget:
            break
        used += info.tokens
        kept.add(info.call_id)
    return kept


_REFERS = (Kind.UNCHANGED, Kind.DIFF)  # answers that name an earlier result


def _relied_on(infos: Sequence[ResultInfo], cleared: set[str]) -> set[str]:
    """Results that a later FileRef or diff still in the transcript (not cleared) relies on.

    With a ledger, an answer's ``deps`` name every result its lines rely on. Without one, the
    answer names only its base, the newest; its lines may also rely on older results (lines
    read before an edit, parts read apart, the base of a diff), so from the base the walk goes
    back through the results of the same path until a write (the model holds all it wrote) or
    a content read of the whole file or of the answer's lines. The result named stays whatever
    tool answered it (a shell read served by filecache is a bash result). A base the transcript
    does not hold under that id (an MCP server names its results by its own ``fc-…`` ids) may
    be any earlier result of the path: all of them stay.
    """
    by_name = _by_name(infos)
    position = {info.call_id: n for n, info in enumerate(infos)}
    alive: set[str] = set()
    for info in infos:
        if not info.base_call_id or info.call_id in cleared or info.tier == Tier.CLEAR:
            continue
        base = position.get(info.base_call_id)
        if base is not None and base < position[info.call_id] and infos[base].tier != Tier.CLEAR:
            alive.add(info.base_call_id)  # the result named, whatever tool answered it (bash)
        if info.path is None:
            continue
        named = [d for d in (info.deps or (info.base_call_id,)) if d in position]
        if info.deps and len(named) == len(info.deps):
            alive.update(named)  # the ledger says exactly which results the lines rely on
            continue
        # A base the transcript does not carry under that id (an MCP server's own ``fc-…``
        # ids, which the client's transcript never shows): any earlier result of the path may
        # be the one named, so every one stays, back to the start.
        unknown = base is None
        start = position[info.call_id] - 1 if base is None else base
        same = by_name.get(file_name(info.path), [])
        for n in reversed(same[: bisect_right(same, start)]):
            earlier = infos[n]
            if (
                earlier.kind not in (Tool.READ, Tool.WRITE, Tool.EDIT)
                or earlier.tier == Tier.CLEAR
                or not same_path(earlier.path or "", info.path)
            ):
                continue
            alive.add(earlier.call_id)
            if unknown:
                continue
            if earlier.kind == Tool.WRITE or (
                earlier.kind == Tool.READ
                and earlier.answer in _CONTENT
                and (earlier.answer == Kind.FULL or _covers(earlier, info))
            ):
                break
    return alive


def _named(message: Message) -> str:
    """What a message names: its text and its calls' arguments."""
    return message.text + " " + " ".join(c.raw_arguments for c in message.tool_calls)


def _files_named(
    infos: Sequence[ResultInfo], protected: set[str], kinds: tuple[str, ...]
) -> Iterator[tuple[ResultInfo, str]]:
    """The results of ``kinds`` that may stay in use, each with its file's name (a name of
    three characters or fewer would be found anywhere)."""
    for info in infos:
        if info.kind in kinds and info.path and info.call_id not in protected:
            name = file_name(info.path)
            if len(name) > 3:
                yield info, name


def _in_use(
    infos: Sequence[ResultInfo], protected: set[str], tail_text: str, kinds: tuple[str, ...]
) -> set[str]:
    """Results of ``kinds`` (reads; with ``keep_edited`` edits too) of files the recent turns
    name: not degraded while the model works on them. An edit's confirmation says where the
    edit landed, which its arguments alone do not when the model never read those lines."""
    return {
        info.call_id for info, name in _files_named(infos, protected, kinds) if name in tail_text
    }


def _revisited(
    infos: Sequence[ResultInfo],
    protected: set[str],
    transcript: Transcript,
    assistants: Sequence[int],
    turns: int,
    kinds: tuple[str, ...],
) -> set[str]:
    """Results of ``kinds`` of files the model came back to: named in one of the last
    ``turns`` assistant turns (``assistants``: their message indexes; text and call arguments)
    that came at least two turns after the result's own (naming it in the very next turn is
    still reading it)."""
    first = max(0, len(assistants) - turns)
    named = [_named(transcript.messages[n]) for n in assistants[first:]]
    used = set()
    for info, name in _files_named(infos, protected, kinds):
        own = bisect_right(assistants, info.message_index) - 1  # the turn that made the call
        if any(name in text for text in named[max(0, own + 2 - first) :]):
            used.add(info.call_id)
    return used


def _truncate(text: str, policy: PrunePolicy, why: str) -> str | None:
    lines = text.split("\n")
    keep = policy.head_lines + policy.tail_lines
    if len(lines) <= keep + 5:
        return None
    cut = lines[policy.head_lines : len(lines) - policy.tail_lines]
    return render_truncated(
        lines[: policy.head_lines], lines[len(lines) - policy.tail_lines :], len(cut),
        sum(len(c) + 1 for c in cut), why,
    )  # fmt: skip


def _cleared(info: ResultInfo, why: str) -> str:
    return render_cleared(_describe(info), info.original or info.text, why)


def _describe(info: ResultInfo) -> str:
    if info.kind == Tool.READ and info.path:
        span = f" {info.start}-{info.end}" if info.end else ""
        return f"read {info.path}{span}"
    if info.kind in (Tool.WRITE, Tool.EDIT) and info.path:
        return f"{info.kind} {info.path}"
    return f"{info.tool} `{info.command}`" if info.command else info.tool


def plan_prune(
    transcript: Transcript,
    ledger: Ledger | None,
    policy: PrunePolicy,
    count: Callable[[str], int],
    *,
    outline_for: Callable[[ResultInfo], str | None] | None = None,
    prior: Mapping[str, tuple[str, str]] | None = None,
    secret: frozenset[str] = frozenset(),
    prior_inputs: Mapping[str, tuple[str, str]] | None = None,
    inputs: bool = True,
    keep_inputs: frozenset[str] = frozenset(),
) -> PrunePlan:
    """Decide this pass (see the module docstring). ``prior``: call id -> (tier, text).

    ``secret``: results of denied files; they clear instead of degrading, so no outline or
    head and tail of their content becomes a (stored) projection. ``prior_inputs``: call id ->
    (tier, arguments) of the inputs replaced before; ``inputs``: whether the format can render
    new ones (``codecs.base.renders_inputs``; ``policy.inputs`` too); ``keep_inputs``: calls
    whose input another part of the request relies on (the gateway's edit echoes): never
    replaced.
    """
    prior = prior or {}
    infos = collect(transcript, ledger, count, prior)
    present = {i.call_id for i in infos}
    sticky = {cid: text for cid, (_, text) in prior.items() if cid in present}
    calls = transcript.calls_by_id()
    sticky_inputs = {cid: text for cid, (_, text) in (prior_inputs or {}).items() if cid in calls}
    msg_tokens = _message_tokens(transcript, count, infos, sticky_inputs)
    total = sum(msg_tokens)
    window = policy.context_window
    if total <= policy.prune_at * window:
        return PrunePlan(
            actions=(),
            replacements=sticky,
            prompt_tokens=total,
            reclaimed=0,
            triggered=False,
            inputs=sticky_inputs,
        )

    protected = _protected(infos, policy.protect_recent)
    superseded = _superseded(infos, ledger, through_edits=policy.keep_edited)
    outputs = [i for i in infos if i.kind == Tool.OTHER]  # of commands (bash, ...), in order
    if policy.rerun_outputs and len(outputs) > 1:  # an output, once its command ran again
        superseded |= superseded_outputs(outputs, calls)
    target = policy.target * window
    actions: dict[str, PruneAction] = {}
    excess = total - target

    def act(info: ResultInfo, tier: str, text: str, reason: str) -> None:
        nonlocal excess
        after = count(text)
        previous = actions.get(info.call_id)
        before_tokens = previous.tokens_after if previous else info.tokens
        if after >= before_tokens:
            return
        actions[info.call_id] = PruneAction(
            call_id=info.call_id,
            message_index=info.message_index,
            tier=tier,
            text=text,
            reason=reason,
            tokens_before=info.tokens,
            tokens_after=after,
            kind=info.kind,
        )
        excess -= before_tokens - after

    candidates = [i for i in infos if i.call_id not in protected and i.tier != Tier.CLEAR]
    for info in candidates:
        if info.call_id in superseded:
            reason = superseded[info.call_id]
            if policy.keep_edited and _built_on(info, reason):
                continue
            # A superseded FileRef gets a placeholder shorter than itself (a one-line FileRef is
            # shorter than the usual one): kept, it would hold its superseded base alive.
            short = info.answer == Kind.UNCHANGED
            text = render_cleared_ref(reason) if short else _cleared(info, reason)
            act(info, Tier.CLEAR, text, reason)
    first_protected = min(
        (i.message_index for i in infos if i.call_id in protected),
        default=len(transcript.messages),
    )
    tail_start = first_protected
    assistants = [i for i, m in enumerate(transcript.messages) if m.role == "assistant"]
    if policy.in_use_turns and assistants:
        tail_start = min(tail_start, assistants[-min(len(assistants), policy.in_use_turns)])
    tail_text = "\n".join(_named(m) for m in transcript.messages[tail_start:] if m.role != "tool")
    relied = _relied_on(infos, set(actions))
    while restored := [c for c in actions if c in relied]:
        for cid in restored:  # a live FileRef or diff still points at it
            del actions[cid]
        relied = _relied_on(infos, set(actions))  # a restored diff is live again
    excess = total - target - sum(a.tokens_before - a.tokens_after for a in actions.values())
    kinds = (Tool.READ, Tool.EDIT) if policy.keep_edited else (Tool.READ,)
    alive = relied | _in_use(infos, protected, tail_text, kinds)
    if policy.revisit_turns:
        alive |= _revisited(infos, protected, transcript, assistants, policy.revisit_turns, kinds)
    if policy.keep_edited:
        by_id = {i.call_id: i for i in infos}
        alive |= {cid for cid, why in superseded.items() if _built_on(by_id[cid], why)}
    if policy.output_first:  # what no later read relies on goes before file content
        candidates = sorted(candidates, key=lambda i: i.kind == Tool.READ)
    for info in candidates:  # tier 1: degrade large results, clear small ones
        if excess <= 0:
            break
        if info.call_id in actions or info.call_id in alive or info.tier != Tier.KEEP:
            continue
        if info.tokens < policy.small_result or info.call_id in secret or not policy.degrade:
            why = "old, cleared to save context"
            act(info, Tier.CLEAR, _cleared(info, why), why)
            continue
        outline = outline_for(info) if outline_for is not None and info.kind == Tool.READ else None
        if outline is not None:
            act(info, Tier.OUTLINE, render_outlined(_describe(info), outline), "old, outlined")
            continue
        truncated = _truncate(info.text, policy, "old output")
        if truncated is not None:
            act(info, Tier.TRUNCATE, truncated, "old, truncated")
        else:
            why = "old, cleared to save context"
            act(info, Tier.CLEAR, _cleared(info, why), why)
    if total > policy.hard_at * window:  # tier 2: under high pressure, clear, oldest first
        for info in candidates:
            if excess <= 0:
                break
            current = actions.get(info.call_id)
            if info.call_id in alive or (current is not None and current.tier == Tier.CLEAR):
                continue
            why = "cleared under context pressure"
            act(info, Tier.CLEAR, _cleared(info, why), why)

    found: dict[str, Superseded] = {}
    if inputs and policy.inputs:
        found = _superseded_inputs(
            infos, actions, relied | keep_inputs, protected, secret, sticky_inputs, calls
        )
    chosen = sorted(actions.values(), key=lambda a: a.message_index)
    chosen += _input_actions(found, infos, calls, count)
    chosen.sort(key=lambda a: a.message_index)
    reclaimed = sum(a.tokens_before - a.tokens_after for a in chosen)
    if reclaimed < policy.min_reclaim:
        return PrunePlan(
            actions=(),
            replacements=sticky,
            prompt_tokens=total,
            reclaimed=0,
            triggered=True,
            gate="under min_reclaim",
            inputs=sticky_inputs,
        )
    gate: str = ""
    dropped: tuple[str, ...] = ()
    if policy.cache_aware and total <= policy.hard_at * window:
        chosen, gate, dropped = _gate_settled(chosen, msg_tokens, policy, transcript)
    chosen = _inputs_still_held(chosen, found, infos)
    reclaimed = sum(a.tokens_before - a.tokens_after for a in chosen)
    if chosen and reclaimed < policy.min_reclaim:  # what the gate kept is not worth a cut
        return PrunePlan(
            actions=(),
            replacements=sticky,
            prompt_tokens=total,
            reclaimed=0,
            triggered=True,
            gate=f"{gate}: under min_reclaim",
            dropped_by_gate=dropped,
            inputs=sticky_inputs,
        )
    replacements = dict(sticky)
    replacements.update({a.call_id: a.text for a in chosen if a.target == "result"})
    new_inputs = dict(sticky_inputs)
    new_inputs.update({a.call_id: a.text for a in chosen if a.target == "input"})
    return PrunePlan(
        actions=tuple(chosen),
        replacements=replacements,
        prompt_tokens=total,
        reclaimed=reclaimed,
        triggered=True,
        gate=gate,
        dropped_by_gate=dropped,
        inputs=new_inputs,
    )


def _superseded_inputs(
    infos: Sequence[ResultInfo],
    actions: Mapping[str, PruneAction],
    relied: set[str],
    protected: set[str],
    secret: frozenset[str],
    done: Mapping[str, str],
    calls: Mapping[str, ToolCall],
) -> dict[str, Superseded]:
    """The writes and edits whose input this pass may replace (``input_pruning``): the read
    that shows the file must stay verbatim in this pass, and no live FileRef or diff relies on
    the call (``relied`` as the result passes left it)."""
    return superseded_inputs(
        infos,
        kept={i.call_id for i in infos if i.tier == Tier.KEEP and i.call_id not in actions},
        relied=relied | _relied_on(infos, set(actions)),
        protected=protected,
        secret=secret,
        done=done,
        commands={
            cid: command
            for cid, call in calls.items()
            if (command := call.arguments.get("command")) and isinstance(command, str)
        },
    )


def _input_actions(
    found: Mapping[str, Superseded],
    infos: Sequence[ResultInfo],
    calls: Mapping[str, ToolCall],
    count: Callable[[str], int],
) -> list[PruneAction]:
    out = []
    by_id = {i.call_id: i for i in infos}
    for cid, why in found.items():
        call, info = calls.get(cid), by_id[cid]
        if call is None or not call.arguments_valid or is_cleared_input(call.raw_arguments):
            continue
        reason = why.reason
        if why.heredocs:
            command = cleared_heredocs(str(call.arguments["command"]), why.heredocs, reason)
            text = None
            if command is not None:
                text = json.dumps({**call.arguments, "command": command}, ensure_ascii=False)
        else:
            text = cleared_arguments(call.arguments, info.path or "", reason)
        if text is None:
            continue
        before, after = count(call.raw_arguments), count(text)
        if after < before:
            out.append(
                PruneAction(
                    call_id=cid, message_index=call.message_index, tier=Tier.CLEAR, text=text,
                    reason=reason, tokens_before=before, tokens_after=after, kind=info.kind,
                    target="input",
                )
            )  # fmt: skip
    return out


def _inputs_still_held(
    chosen: list[PruneAction],
    found: Mapping[str, Superseded],
    infos: Sequence[ResultInfo],
) -> list[PruneAction]:
    """``chosen`` without the input actions that what the gate kept makes unsafe: the read that
    shows the file is cut in this pass after all, or a FileRef or diff the gate left live relies
    on the call (the gate may keep any subset of the actions)."""
    if not any(a.target == "input" for a in chosen):
        return chosen
    cut = {a.call_id for a in chosen if a.target == "result"}
    relied = _relied_on(infos, cut)
    return [
        a
        for a in chosen
        if a.target != "input" or (a.call_id not in relied and found[a.call_id].read not in cut)
    ]


def _message_tokens(
    transcript: Transcript,
    count: Callable[[str], int],
    infos: Sequence[ResultInfo],
    inputs: Mapping[str, str],
) -> list[int]:
    """Each message's tokens as sent: its text, its calls (``inputs``: the arguments of those
    replaced before) and its results (``infos``' counts)."""
    sizes = [
        (count(m.text) if m.text else 0)
        + sum(count(inputs.get(c.id, c.raw_arguments)) + count(c.name) for c in m.tool_calls)
        for m in transcript.messages
    ]
    for info in infos:
        sizes[info.message_index] += info.tokens
    return sizes


def _cost_gate(
    actions: list[PruneAction],
    msg_tokens: Sequence[int],
    policy: PrunePolicy,
    transcript: Transcript,
) -> tuple[list[PruneAction], str, tuple[str, ...]]:
    """Keep the suffix of actions (by message) whose cut pays best; drop the rest.

    Cutting at message k rewrites the cache from k on: ``(write - read) * suffix`` extra now.
    Each removed token saves ``read`` on every later request. With ``policy.turns_left``:
    ``read * reclaimed * turns_left``; without, ``prune_cost.cut_net`` simulates the requests
    to come from the session's growth.
    """
    growth = session_growth([m.role for m in transcript.messages], msg_tokens)
    turns = (
        policy.turns_left
        if policy.turns_left is not None
        else max(growth.turns_left, policy.min_turns_left)
    )
    if policy.turns_left is None and policy.max_turns_left is not None:
        turns = min(turns, policy.max_turns_left)
    total = sum(msg_tokens)
    suffix = [0] * (len(msg_tokens) + 1)
    for k in range(len(msg_tokens) - 1, -1, -1):
        suffix[k] = suffix[k + 1] + msg_tokens[k]
    reclaimed_from = [0] * (len(actions) + 1)
    for k in range(len(actions) - 1, -1, -1):
        reclaimed_from[k] = (
            reclaimed_from[k + 1] + actions[k].tokens_before - actions[k].tokens_after
        )
    best: tuple[float, int] = (0.0, len(actions))
    for start in range(len(actions)):
        reclaimed = reclaimed_from[start]
        cut = actions[start].message_index
        if policy.turns_left is not None:
            cost = (policy.cache_write - policy.cache_read) * max(0, suffix[cut] - reclaimed)
            net = policy.cache_read * reclaimed * turns - cost
        else:
            net = cut_net(
                total=total, suffix=suffix[cut], reclaimed=reclaimed, growth=growth.per_turn,
                turns=turns, limit=policy.hard_at * policy.context_window,
                read=policy.cache_read, write=policy.cache_write,
            )  # fmt: skip
        if net > best[0]:
            best = (net, start)
    net, start = best
    kept = actions[start:]
    dropped = tuple(a.call_id for a in actions[:start])
    if not kept:
        return [], f"cost gate: no cut pays over {turns} turns", dropped
    return kept, f"cost gate: cut at message {kept[0].message_index} nets {net:,.0f}", dropped


def _gate_settled(
    actions: list[PruneAction],
    msg_tokens: Sequence[int],
    policy: PrunePolicy,
    transcript: Transcript,
) -> tuple[list[PruneAction], str, tuple[str, ...]]:
    """The cost gate, then again over what it dropped, with the kept cut made, until it keeps
    nothing more: what the next pass over this one's output would decide. Once the kept cut
    made the prompt smaller, a deeper cut may pay (more requests before the prompt reaches
    ``hard_at``); made now, it is one invalidation of the cache, not two, and planning on the
    output adds nothing (idempotent)."""
    kept, gate, dropped = _cost_gate(actions, msg_tokens, policy, transcript)
    tokens, newly = list(msg_tokens), kept
    while newly and len(kept) < len(actions):
        for action in newly:
            tokens[action.message_index] -= action.tokens_before - action.tokens_after
        newly, deeper, dropped = _cost_gate(
            actions[: len(actions) - len(kept)], tokens, policy, transcript
        )
        if newly:
            kept, gate = newly + kept, deeper
    return kept, gate, dropped


def apply_plan(transcript: Transcript, plan: PrunePlan) -> list[object]:
    """The new message list (the input is never mutated)."""
    out = transcript.with_results_replaced(plan.replacements) if plan.replacements else None
    if plan.inputs:
        return render_inputs(
            transcript, out if out is not None else list(transcript.raw), plan.inputs
        )
    return out if out is not None else list(transcript.raw)
