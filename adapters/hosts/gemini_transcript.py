"""What a Gemini CLI context holds, from its session file (the hook's ``transcript_path``).

Gemini CLI (0.61) records a session as JSON lines under
``~/.gemini/tmp/<project>/chats/session-*.jsonl``:

- the first line is the session's metadata (``sessionId``, ``projectHash``, ...);
- a message record (``id``, ``type`` ``user``/``gemini``/``info``/..., ``content``) adds the
  message or, when a message with that ``id`` is already there, replaces it (a ``gemini``
  message is written once when the model's turn ends and again with its ``toolCalls`` once the
  calls completed: ``{id, name, args, result: [functionResponse parts], status}``);
- ``{"$set": {...}}`` updates the metadata; with ``messages`` it replaces the whole list (Gemini
  CLI writes its in-memory history back after a compression, a tool-output masking or a
  truncation: what the model holds from then on);
- ``{"$rewindTo": ID}`` drops that message and every later one.

Call ids: Gemini CLI names a call ``<tool>__<id>`` (the id the API gave, or one it made up) and
strips the ``<tool>__`` prefix from every ``functionCall`` and ``functionResponse`` it sends, so
the id the model sees (``wire_id``) is the recorded id without it.

``parse`` is pure (text in, a frozen ``GeminiTranscript`` out); ``load`` reads the file, and in
a long-lived process (the resident hook server) only what was appended since its last read
(the readers kept per file, under one lock; a file rewritten or replaced is read again).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["GeminiCall", "GeminiTranscript", "load", "parse", "response_text", "wire_id"]


@dataclass(frozen=True)
class GeminiCall:
    """One completed tool call as recorded: the id the model sees, the tool's name, its
    arguments (canonical JSON) and the text the model got (``output``, or ``error``)."""

    id: str
    name: str
    args: str
    text: str


@dataclass(frozen=True)
class GeminiTranscript:
    """``calls``: every completed tool call any record of the file names, in the order they were
    first recorded, with the text the model first got (a later compression or masking does not
    remove a call from here, so its length only grows); ``held``: the text of each result the
    model's history holds now, by the id the model sees."""

    calls: tuple[GeminiCall, ...]
    held: dict[str, str]


def wire_id(call_id: str, name: str) -> str:
    """The id the model sees for Gemini CLI's call id ``call_id`` of tool ``name``."""
    prefix = f"{name.strip() or 'generic_tool'}__"
    return call_id[len(prefix) :] if call_id.startswith(prefix) else call_id


def canonical_args(args: Any) -> str:
    return json.dumps(args if isinstance(args, dict) else {}, sort_keys=True, ensure_ascii=False)


def response_text(response: Any) -> str | None:
    """What the model reads of a ``functionResponse``'s ``response``: its ``output`` (a
    success) or its ``error`` (a failure, or an ``AfterTool`` hook's ``deny`` reason)."""
    if not isinstance(response, dict):
        return None
    for key in ("output", "error"):
        value = response.get(key)
        if isinstance(value, str):
            return value
    return None


class _Reader:
    """The records read so far: the message list as the records leave it, and every call
    named (``_note_calls``). ``feed`` takes more lines (a file grows by appends only)."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        self.calls: dict[str, GeminiCall] = {}
        self.offset = 0  # bytes of the file read (complete lines only)

    def feed(self, lines: list[str]) -> None:
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line
            if isinstance(record, dict):
                self._record(record)

    def _record(self, record: dict[str, Any]) -> None:
        update = record.get("$set")
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            self.order, self.by_id = [], {}
            for message in update["messages"]:
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self.order.append(message["id"])
                    self.by_id[message["id"]] = message
                    _note_calls(message, self.calls)
            return
        rewind = record.get("$rewindTo")
        if isinstance(rewind, str):
            if rewind in self.by_id:
                cut = self.order.index(rewind)
                for gone in self.order[cut:]:
                    self.by_id.pop(gone, None)
                self.order = self.order[:cut]
            return
        key = record.get("id")
        if isinstance(key, str) and isinstance(record.get("type"), str):
            if key not in self.by_id:
                self.order.append(key)
            self.by_id[key] = record
            _note_calls(record, self.calls)

    def transcript(self) -> GeminiTranscript:
        held: dict[str, str] = {}
        for key in self.order:
            message = self.by_id[key]
            if message.get("type") != "user" or not isinstance(message.get("content"), list):
                continue
            for part in message["content"]:
                response = part.get("functionResponse") if isinstance(part, dict) else None
                if not isinstance(response, dict) or not isinstance(response.get("id"), str):
                    continue
                shown = response_text(response.get("response"))
                if shown is not None:
                    held[wire_id(response["id"], str(response.get("name") or ""))] = shown
        return GeminiTranscript(tuple(self.calls.values()), held)


def _note_calls(message: dict[str, Any], calls: dict[str, GeminiCall]) -> None:
    if message.get("type") != "gemini":
        return
    for call in message.get("toolCalls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            continue
        name = str(call.get("name") or "")
        key = wire_id(call["id"], name)
        shown = _result_text(call.get("result"))
        if shown is not None and key not in calls:
            calls[key] = GeminiCall(key, name, canonical_args(call.get("args")), shown)


def parse(text: str) -> GeminiTranscript:
    """The calls and held results of a session file's text (see the module docstring)."""
    reader = _Reader()
    reader.feed(text.splitlines())
    return reader.transcript()


def _result_text(result: Any) -> str | None:
    for part in result if isinstance(result, list) else []:
        response = part.get("functionResponse") if isinstance(part, dict) else None
        if isinstance(response, dict):
            return response_text(response.get("response"))
    return None


# The resident hook server answers every call of a session: it keeps what it read of each
# session file and reads only what was appended since (a process per call reads it whole).
_READERS: dict[str, tuple[tuple[int, int], _Reader, list[str]]] = {}
_READERS_LOCK = threading.Lock()
_MAX_READERS = 64


def load(path: str | None) -> GeminiTranscript:
    """The transcript at ``path``; empty when there is none (nothing is held). Reads only the
    bytes appended since this process last read the same file (same inode, the same bytes at
    the probe points: ``regular_files.probe``), a line at a time (a line over ``MAX_LINE`` is
    skipped like a torn one); a FIFO or a device is refused at once."""
    from filecache.adapters.hosts.regular_files import complete_lines, open_regular, probe

    if not path:
        return GeminiTranscript((), {})
    try:
        file, size = open_regular(path)
        with file:
            st = os.fstat(file.fileno())
            with _READERS_LOCK:
                known = _READERS.get(path)
                reader = known[1] if known is not None else _Reader()
                if known is not None and (
                    known[0] != (st.st_dev, st.st_ino)
                    or reader.offset > size
                    or probe(file, reader.offset) != known[2]
                ):
                    reader = _Reader()  # rewritten or replaced: read it again
                for line, after in complete_lines(file, reader.offset, size):
                    if line is not None:
                        reader.feed([line.decode("utf-8", "surrogateescape")])
                    reader.offset = after
                if path not in _READERS and len(_READERS) >= _MAX_READERS:
                    _READERS.pop(next(iter(_READERS)))
                _READERS[path] = ((st.st_dev, st.st_ino), reader, probe(file, reader.offset))
                return reader.transcript()
    except OSError:
        return GeminiTranscript((), {})
