// filecache inside opencode: `read` and `bash` reads answered by filecache (a FileRef naming the
// call whose result shows the lines, or a diff), `edit`/`write` recorded, and what the model
// still holds read from the messages opencode is about to send.
//
// Installed by `filecache install opencode` as `["file://<this file>", {"python": "<abs>"}]` in
// opencode.json's "plugin" list. It starts one resident Python process per opencode process
// (`python -m filecache.adapters.hosts.opencode serve`, JSON lines on its stdin/stdout; it
// exits when opencode does), so a read costs one round trip, not a Python start. Kilo CLI (an
// opencode fork) runs this same plugin, installed with {"host": "kilo"}: the resident is then
// `filecache.adapters.hosts.kilo`, which keeps Kilo's sessions apart from opencode's.
//
// Invariants:
// - opencode's own output is the fallback: on any error, a timeout, a dead process that a new one
//   could not stand in for, or an answer of null, the tool result is left exactly as opencode
//   made it.
// - A dead resident is replaced within the call that finds it dead, and a slow one is never
//   doubled (Bridge).
// - What the model holds is what `experimental.chat.messages.transform` shows before each
//   request: the completed tool results that are not compacted. filecache is told the first
//   time a session is seen in this process (a resumed session: `run --continue`, a reopened
//   TUI) and whenever a result it was told of or answered is missing (opencode pruned or
//   compacted it), and forgets what relied on it. A FileRef or diff still in the context whose
//   named result opencode pruned gets that result back (it is sent uncompacted in this
//   request); one whose named result the request lacks (a compaction summarised it and kept
//   the answer) is sent as the lines it stood for (`expand`), so no reference in the request
//   dangles, whichever process answered it.
// Owned state: the child process and the pending requests (this module; one per opencode
// process), and per opencode session the call ids filecache was told of or answered in this
// process and the expanded answers.

import { spawn } from "node:child_process"

const TIMEOUT_MS = 8000 // a first call also waits for the child to start; then it is fast
const MAX_STARTS = 3 // a child that keeps dying is given up on: opencode's output stands
// Requests a resident may get twice with the effect of once, so they are sent again to a new
// resident when the one that had them died: filecache answers a read (or a bash read) whose call
// id it answered before again from scratch (Session.read), and a re-hash or `keep` changes
// nothing the second time. Not `edit`/`write`: adopted against the version the model holds, a
// second one is not the first; they go again only to replace a write that failed.
const REPEATABLE = new Set(["read", "bash", "changed", "keep"])
// opencode's code mode (OPENCODE_EXPERIMENTAL_CODE_MODE; Kilo's: KILO_EXPERIMENTAL_CODE_MODE):
// the model writes a script for its code tool, and each tool the script calls runs
// `tool.execute.after` with the call id of the code tool's call and `/<n>` (`${callID}/${n}`:
// opencode 1.18.33 and Kilo 7.7.7 both), a result that goes to the script, not to the model. A
// FileRef or diff handed to a script that expects the file's text would break it, so such a call
// keeps the host's output, nothing relies on it, and the user is told once per session. (In
// those versions a script reaches only MCP tools, which filecache never answers; the model's own
// read, bash, edit and write stay its direct calls, with the provider's ids, and are served.)
const SCRIPTED_NOTICE =
  "filecache leaves the tool calls of the model's scripts alone (code mode: their results go " +
  "to the script, not to the model); opencode's own results stand for them."

function scriptedCall(call) {
  return typeof call.callID === "string" && call.callID.includes("/")
}

// What a dangling answer becomes when filecache cannot say (its process is gone): no reference.
const GONE =
  "[cleared tool result: this answer relied on an earlier result that is no longer in your " +
  "context; read the file again for its text]"
const REFERENCE =
  /^\[filecache\] .* (?:unchanged|changed|changed outside the agent) since your results? (\S+?(?: and \S+?)*) \(/gm

export const FilecachePlugin = async (input, options) => {
  const python = (options && options.python) || "python3"
  const named = options && typeof options.host === "string" ? options.host : ""
  const host = /^[a-z][a-z0-9_]*$/.test(named) ? named : "opencode" // a module name, nothing else
  const root = input.directory
  const toldScripted = new Set() // sessions told that filecache leaves scripts' calls alone
  const bridge = new Bridge(python, `filecache.adapters.hosts.${host}`, (text) =>
    tellUser(input, text),
  )
  bridge.start()
  // opencode session id -> the call ids filecache may rely on: those of the last `keep` and
  // those answered since. A session first seen in this process has none: it is synced at once.
  const known = new Map()
  const expanded = new Map() // session id + call id -> the text sent instead of a dangling answer

  const note = (sessionID, callID) => {
    if (!known.has(sessionID)) return // not synced yet: the first request syncs it
    known.get(sessionID).add(callID)
  }

  // A short answer in the request whose named result the request lacks: its lines instead (the
  // same text on every request), or, when filecache cannot say, a placeholder.
  const expand = async (sessionID, part) => {
    const key = sessionID + "\0" + part.callID
    if (!expanded.has(key)) {
      const answer = await bridge.ask({ op: "expand", session: sessionID, root,
                                        call: part.callID, tool: part.tool,
                                        output: part.state.output })
      const text = answer && typeof answer.output === "string" ? answer.output : GONE
      expanded.set(key, text)
    }
    part.state.output = expanded.get(key)
  }

  return {
    "tool.execute.after": async (call, result) => {
      if (!result || typeof result.output !== "string") return
      const request = toolRequest(call, result, root)
      if (!request) return
      if (scriptedCall(call)) {
        if (!toldScripted.has(call.sessionID)) {
          toldScripted.add(call.sessionID)
          tellUser(input, host === "kilo" ? SCRIPTED_NOTICE.replace("opencode's", "Kilo's")
                                          : SCRIPTED_NOTICE)
        }
        return
      }
      note(call.sessionID, call.callID)
      const answer = await bridge.ask(request)
      if (answer && typeof answer.output === "string") result.output = answer.output
    },
    "experimental.chat.messages.transform": async (_input, output) => {
      const { sessions, dangling } = heldResults(output && output.messages)
      for (const [sessionID, parts] of dangling) {
        for (const part of parts) await expand(sessionID, part)
      }
      for (const [sessionID, present] of sessions) {
        const mine = known.get(sessionID)
        if (mine && ![...mine].some((id) => !present.has(id))) continue
        await bridge.ask({ op: "keep", session: sessionID, root, present: [...present] })
        known.set(sessionID, new Set(present))
      }
    },
    dispose: async () => bridge.stop(),
  }
}

// A line for the user (filecache serves nothing in a session, and why; the resident says it once
// per session): on stderr (`opencode run` shows it) and as a toast in the TUI. Never to the model.
function tellUser(input, text) {
  try {
    process.stderr.write(text + "\n")
  } catch {}
  try {
    const shown = input.client && input.client.tui && input.client.tui.showToast({
      body: { title: "filecache", message: text, variant: "warning" },
    })
    if (shown && shown.catch) shown.catch(() => {})
  } catch {}
}

// The request for one finished tool call, or null when filecache has nothing to do with it.
function toolRequest(call, result, root) {
  const args = call.args || {}
  const base = { session: call.sessionID, root, call: call.callID }
  const meta = result.metadata || {}
  switch (call.tool) {
    case "read":
      if (typeof args.filePath !== "string") return null
      return { ...base, op: "read", path: args.filePath, offset: args.offset, limit: args.limit,
               output: result.output }
    case "bash":
      if (typeof args.command !== "string") return null
      return { ...base, op: "bash", command: args.command, workdir: args.workdir ?? null,
               exit: typeof meta.exit === "number" ? meta.exit : null, output: result.output }
    case "edit":
      if (typeof args.filePath !== "string") return null
      return { ...base, op: "edit", path: args.filePath, old: String(args.oldString ?? ""),
               new: String(args.newString ?? ""), all: Boolean(args.replaceAll) }
    case "write":
      if (typeof args.filePath !== "string" || typeof args.content !== "string") return null
      return { ...base, op: "write", path: args.filePath, content: args.content }
    case "apply_patch":
    case "multiedit":
      return { ...base, op: "changed" } // files changed in ways read back from disk
    default:
      return null
  }
}

// Per session in the request: the call ids whose results the model will see in full
// (`sessions`), and the parts whose FileRef or diff names a result the request lacks
// (`dangling`). A compacted result that a FileRef or diff still in the request names is sent
// again (its compacted mark is dropped from this request's copy of the part), repeated until no
// reference in the request names a compacted result.
function heldResults(messages) {
  const sessions = new Map()
  const dangling = new Map()
  if (!Array.isArray(messages)) return { sessions, dangling }
  const parts = []
  for (const message of messages) {
    const sessionID = message && message.info && message.info.sessionID
    if (sessionID && !sessions.has(sessionID)) sessions.set(sessionID, new Set())
    for (const part of (message && message.parts) || []) {
      if (part && part.type === "tool" && part.state && part.state.status === "completed") {
        parts.push(part)
      }
    }
  }
  const byCall = new Map(parts.map((p) => [p.callID, p]))
  let changed = true
  while (changed) {
    changed = false
    for (const part of parts) {
      if (part.state.time && part.state.time.compacted) continue
      for (const id of namedResults(part.state.output)) {
        const named = byCall.get(id)
        if (named && named.state.time && named.state.time.compacted) {
          delete named.state.time.compacted
          changed = true
        }
      }
    }
  }
  for (const part of parts) {
    if (!sessions.has(part.sessionID)) sessions.set(part.sessionID, new Set()) // a session with no result yet
    if (part.state.time && part.state.time.compacted) continue
    sessions.get(part.sessionID).add(part.callID)
    if (namedResults(part.state.output).some((id) => !byCall.has(id))) {
      if (!dangling.has(part.sessionID)) dangling.set(part.sessionID, [])
      dangling.get(part.sessionID).push(part)
    }
  }
  return { sessions, dangling }
}

function namedResults(text) {
  const ids = []
  if (typeof text !== "string" || !text.includes("[filecache] ")) return ids
  for (const match of text.matchAll(REFERENCE)) ids.push(...match[1].split(" and "))
  return ids
}

// The resident filecache process: JSON lines, one answer per request, matched by id.
//
// A call that finds the resident dead replaces it at once: when the request's write failed
// (the child never had all of it), or the child exited or closed its stdout before answering,
// a new resident gets the request once more if that cannot apply it twice (REPEATABLE, or never
// received). A timeout is not a death: a slow child is never doubled. A request that still got
// no answer is forgotten by the resident (`orphan`) and opencode's output stands.
class Bridge {
  constructor(python, module, say = () => {}) {
    this.python = python
    this.module = module // the resident: filecache.adapters.hosts.<host>
    this.say = say // shows the user a resident's `notice`
    this.child = null
    this.starts = 0
    this.next = 1
    this.pending = new Map() // id -> settle(outcome, answer) of the current child's requests
    this.orphans = [] // calls whose answer was lost with a dead child: forgotten on restart
  }

  start() {
    if (this.child || this.starts >= MAX_STARTS) return this.child
    this.starts += 1
    let child
    try {
      child = spawn(this.python, ["-I", "-m", this.module, "serve"], {
        stdio: ["pipe", "pipe", "ignore"],
        env: process.env,
      })
    } catch {
      return null
    }
    child.on("error", () => this.lost(child))
    child.on("exit", () => this.lost(child))
    child.stdin.on("error", () => this.lost(child))
    child.stdout.on("close", () => this.lost(child))
    let buffer = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk) => {
      buffer += chunk
      let newline
      while ((newline = buffer.indexOf("\n")) >= 0) {
        if (this.child === child) this.receive(buffer.slice(0, newline))
        buffer = buffer.slice(newline + 1)
      }
    })
    this.child = child
    for (const forget of this.orphans.splice(0)) this.tell(child, forget)
    child.unref()
    if (child.stdin.unref) child.stdin.unref()
    if (child.stdout.unref) child.stdout.unref()
    return child
  }

  // `child` died (or is dying): every request pending in it is lost.
  lost(child) {
    if (this.child !== child) return
    this.child = null
    const pending = [...this.pending.values()]
    this.pending.clear()
    for (const settle of pending) settle("lost")
    try {
      child.stdin.end() // a child still running reads to the end of its input and exits
    } catch {}
  }

  receive(line) {
    let answer
    try {
      answer = JSON.parse(line)
    } catch {
      return
    }
    if (answer && typeof answer.notice === "string") this.say(answer.notice)
    const settle = this.pending.get(answer && answer.id)
    if (settle) settle("answered", answer)
  }

  // The answer to `request`, or null: opencode's output stands.
  async ask(request) {
    const first = await this.attempt(request)
    const again =
      first.outcome === "unsent" || (first.outcome === "lost" && REPEATABLE.has(request.op))
    const last = again ? await this.attempt(request) : first // to the new resident, once
    const received = (sent) => sent.outcome === "lost" || sent.outcome === "timeout" // maybe
    if (last.outcome !== "answered" && (received(first) || received(last))) this.orphan(request)
    return last.answer && !last.answer.error ? last.answer : null
  }

  // One send of `request` to the resident (started if there is none): resolves to {outcome,
  // answer}, outcome one of "answered"; "unsent" (the write failed: the child never had all of
  // it, and is taken for dead); "lost" (the child ended first: it may have applied it);
  // "timeout" (the child may still answer); "none" (no child could be started).
  attempt(request) {
    const child = this.child || this.start()
    if (!child) return Promise.resolve({ outcome: "none", answer: null })
    const id = this.next++
    return new Promise((resolve) => {
      let settled = false
      const settle = (outcome, answer = null) => {
        if (settled) return
        settled = true
        this.pending.delete(id)
        clearTimeout(timer)
        resolve({ outcome, answer })
      }
      const timer = setTimeout(() => settle("timeout"), TIMEOUT_MS)
      if (timer.unref) timer.unref()
      this.pending.set(id, settle)
      this.send(child, { ...request, id }, () => {
        settle("unsent")
        this.lost(child)
      })
    })
  }

  // The answer to `request` never arrived: what filecache may have recorded for its call must
  // not be relied on (the model gets opencode's output instead). Told to the resident (a new
  // one if it died), or to the next one started.
  orphan(request) {
    if (!request.call) return
    const forget = { op: "forget", session: request.session, root: request.root, call: request.call }
    const child = this.child || this.start()
    if (child) this.tell(child, forget)
    else this.orphans.push(forget)
  }

  // `forget` sent without waiting for its answer; kept for the next child if it was not written.
  tell(child, forget) {
    this.send(child, { ...forget, id: 0 }, () => this.orphans.push(forget))
  }

  // Writes one line to `child`; `failed()` when it could not be written whole.
  send(child, message, failed = () => {}) {
    try {
      child.stdin.write(JSON.stringify(message) + "\n", (error) => error && failed())
    } catch {
      failed()
    }
  }

  stop() {
    const child = this.child
    this.child = null
    if (child) {
      try {
        child.stdin.end()
      } catch {}
    }
  }
}
