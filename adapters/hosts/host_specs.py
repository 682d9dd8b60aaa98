"""The hosts filecache serves, as one table: a ``HostSpec`` per host.

Everything that names the hosts is derived from ``SPECS``: the registry (``registry.HOSTS``,
``host_module``, the default scope), the hook client (the host names it accepts, how long it
waits for the resident server), the CLI's choices (``install``, ``uninstall``, ``hook``),
``stats``' host labels (registered by the CLI: ``stats`` sits below the adapters), the
installers' events and timeouts, and what the model is told with the first short answer
(``base.HostSession.short_or_own``). A new host is its module and one ``HostSpec`` here
(``tests/adapters/hosts/test_host_specs.py`` shows it).

This module imports nothing (not even ``typing``): the hook client loads it from its own folder
in a bare ``python -I -S`` start, where every import is a cost on each tool call. ``told``
imports ``filecache.core.render`` when called.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy knows the name)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["HOST_NAMES", "RUN_NAMES", "SPECS", "HostSpec", "spec"]


class HostSpec:
    """One host.

    Attributes:
        name: the CLI's name for it, and the prefix of its stored sessions' ids
            (``base.host_session_id``).
        display: the name a user knows it by (install lines, ``stats``, the model's note).
        scopes: where ``filecache install`` can put it, the default first.
        events: the hook events installed, each with its tool matcher (None: no matcher).
        hook_timeout: seconds the host gives one hook call, as installed (None: the host's
            plugin keeps its own).
        answer_timeout: seconds the hook client waits for the resident server's answer: below
            ``hook_timeout``, so the client gives up before the host kills it.
        answers: the shape a short answer takes in the host's result.
        transcript: where the host records what the model holds (read before each answer).
        told: what the model is told with the first short answer of a context (None: nothing).
        notice: the output field that shows the user a line once when the savings stop in a
            session (``registry.run_hook``; None: the hook log only).
        module: the host's module in this package (``registry.host_module`` imports it: a host
            module imports this table, so the table names its module rather than importing it).
        run: the program ``filecache run`` starts through the gateway (None: the gateway cannot
            point this host at itself yet); ``adapters/gateway/hosts.py`` has its plan.
    """

    __slots__ = (
        "answer_timeout", "answers", "display", "events", "hook_timeout", "module", "name",
        "notice", "run", "scopes", "told", "transcript",
    )  # fmt: skip

    def __init__(
        self,
        *,
        name: str,
        display: str,
        scopes: tuple[str, ...],
        events: Mapping[str, str | None],
        hook_timeout: int | None,
        answer_timeout: float,
        answers: str,
        transcript: str,
        told: Callable[[], str] | None,
        module: str,
        notice: str | None = None,
        run: str | None = None,
    ) -> None:
        self.name = name
        self.display = display
        self.scopes = scopes
        self.events = events
        self.hook_timeout = hook_timeout
        self.answer_timeout = answer_timeout
        self.answers = answers
        self.transcript = transcript
        self.told = told
        self.module = module
        self.notice = notice
        self.run = run

    def __repr__(self) -> str:
        return f"HostSpec({self.name!r})"


def _for_host_tools() -> str:
    from filecache.core.render import host_instructions

    return host_instructions("Claude Code")


def _for_gemini_reads() -> str:
    from filecache.core.render import host_instructions

    return (
        host_instructions("Gemini CLI", read="read_file", shell="run_shell_command",
                          numbered=False, shell_reads=True)
        + " Gemini CLI shows these answers as the call's error: they are not failures."
    )  # fmt: skip


def _for_opencode() -> str:
    from filecache.core.render import host_instructions

    return host_instructions("opencode", read="read", shell="bash", numbered=False)


def _for_kilo() -> str:
    from filecache.core.render import host_instructions

    return host_instructions("Kilo CLI", read="read", shell="bash", numbered=False)


def _for_shell_reads() -> str:
    from filecache.core.render import shell_instructions

    return shell_instructions()


# opencode's plugin, which Kilo (an opencode fork) loads as it is
_OPENCODE_PLUGIN_EVENTS: Mapping[str, str | None] = {
    "tool.execute.after": "read|bash|edit|write|apply_patch|multiedit",
    "experimental.chat.messages.transform": None,
}
_OPENCODE_PLUGIN_TRANSCRIPT = "the messages of each request, handed over by the plugin"

SPECS: tuple[HostSpec, ...] = (
    HostSpec(
        name="claude-code",
        display="Claude Code",
        scopes=("project", "local", "user"),
        events={
            "PostToolUse": "Read|Edit|MultiEdit|Write|NotebookEdit|Bash",
            "PostToolUseFailure": "Bash",
            "PreCompact": None,
            "PostCompact": None,
            "SessionStart": None,
            "UserPromptSubmit": None,
        },
        hook_timeout=30,
        answer_timeout=25.0,
        answers="PostToolUse hookSpecificOutput.updatedToolOutput, in the Read or Bash "
        "result's own shape",
        transcript="the JSONL file at the hook's transcript_path (a subagent's beside it)",
        told=_for_host_tools,
        module="claude_code",
        notice="systemMessage",
        run="claude",
    ),
    HostSpec(
        name="codex",
        display="Codex CLI",
        scopes=("user", "project"),
        events={
            "PostToolUse": "Bash|apply_patch",
            "PreCompact": None,
            "PostCompact": None,
            "SessionStart": None,
        },  # fmt: skip
        hook_timeout=10,
        answer_timeout=8.0,
        answers='PostToolUse {"decision": "block", "reason": TEXT}: TEXT is the exec_command '
        "output the model gets",
        transcript="the rollout JSONL at the hook's transcript_path",
        told=_for_shell_reads,
        module="codex",
        run="codex",
        notice="systemMessage",  # printed by Codex as a warning, never sent to the model
    ),
    HostSpec(
        name="opencode",
        display="opencode",
        scopes=("user", "project"),
        events=_OPENCODE_PLUGIN_EVENTS,
        hook_timeout=None,
        answer_timeout=25.0,
        answers="the plugin replaces the numbered lines of a read result (or a bash output)",
        transcript=_OPENCODE_PLUGIN_TRANSCRIPT,
        told=_for_opencode,
        module="opencode",
        run="opencode",
    ),
    HostSpec(
        name="gemini-cli",
        display="Gemini CLI",
        scopes=("user", "project"),
        events={
            "AfterTool": "^(read_file|write_file|replace|run_shell_command|invoke_agent)$",
            "BeforeTool": "^invoke_agent$",
            "BeforeAgent": None,
            "SessionStart": None,
        },  # fmt: skip
        hook_timeout=30,
        answer_timeout=25.0,
        answers='AfterTool {"decision": "deny", "reason": TEXT}: the model gets {"error": TEXT} '
        "as the call's result (0.61 reads no tool_output)",
        transcript="the session JSONL at the hook's transcript_path (calls recorded per batch)",
        told=_for_gemini_reads,
        module="gemini_cli",
        notice="systemMessage",  # shown in the terminal (coreEvents), never sent to the model
        run="gemini",
    ),
    HostSpec(  # an opencode fork: opencode's plugin and Python side, so opencode's events and
        name="kilo",  # wording (tests/adapters/hosts/test_host_kilo_unit.py holds them equal)
        display="Kilo CLI",
        scopes=("user", "project"),
        events=_OPENCODE_PLUGIN_EVENTS,
        hook_timeout=None,
        answer_timeout=25.0,
        answers="opencode's plugin replaces the numbered lines of a read result (or a bash output)",
        transcript=_OPENCODE_PLUGIN_TRANSCRIPT,
        told=_for_kilo,
        module="kilo",
        run="kilo",
    ),
)

HOST_NAMES: tuple[str, ...] = tuple(s.name for s in SPECS)
RUN_NAMES: tuple[str, ...] = tuple(s.run for s in SPECS if s.run)
"""The programs ``filecache run`` takes, in the table's order."""


def spec(name: str) -> HostSpec:
    """The spec of host ``name``.

    Raises:
        ValueError: no such host.
    """
    for found in SPECS:
        if found.name == name:
            return found
    raise ValueError(f"unknown host {name!r}; use one of {', '.join(HOST_NAMES)}")
