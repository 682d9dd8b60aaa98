// filecache inside opencode: `read` and `bash` reads answered by filecache (a FileRef naming the
// call whose result shows the lines, or a diff), `edit`/`write` recorded, and what the model
// still holds read from the messages opencode is about to send.
//
// Installed by `filecache install opencode` as `["file://<this file>", {"python": "<abs>"}]` in
// opencode.json's "plugin" list. It starts one resident Python process per opencode process
// (`python -m filecache.adapters.hosts.opencode serve`, JSON lines on its stdin/stdout; it
// exits when opencode does), so a read costs one round trip, not a Python start.
//
// Invariants:
// - opencode's own output is the fallback: on any error, a timeout, a dead process or an answer
//   of null, the tool result is left exactly as opencode made it.
// - What the model holds is what `experimental.chat.messages.transform` shows before each
//   request: the completed tool results that are not compacted. filecache is told when any call
//   it answered is missing (opencode pruned or compacted it) and forgets what relied on it; a
//   FileRef or diff still in the context whose named result opencode pruned gets that result
//   back (it is sent uncompacted in this request), so no reference in the request dangles.
// Owned state: the child process and the pending requests (this module; one per opencode
// process), and per opencode session the call ids filecache answered in this process.

import { spawn } from "node:child_process"

const TIMEOUT_MS = 8000 // a first call also waits for the child to start; then it is fast
const MAX_STARTS = 3 // a child that keeps dying is given up on: opencode's output stands
const REFERENCE =
  /^\[filecache\] .* (?:unchanged|changed|changed outside the agent) since your results? (\S+?(?: and \S+?)*) \(/gm

export const FilecachePlugin = async (input, options) => {
  const python = (options && options.python) || "python3"
  const root = input.directory
  const bridge = new Bridge(python)
  bridge.start()
  const answered = new Map() // opencode session id -> Set of call ids sent to filecache
  const synced = new Set() // sessions whose held results were reported in this process

  const note = (sessionID, callID) => {
    if (!answered.has(sessionID)) answered.set(sessionID, new Set())
    answered.get(sessionID).add(callID)
  }

  return {
    "tool.execute.after": async (call, result) => {
      if (!result || typeof result.output !== "string") return
      const request = toolRequest(call, result, root)
      if (!request) return
      note(call.sessionID, call.callID)
      const answer = await bridge.ask(request)
      if (answer && typeof answer.output === "string") result.output = answer.output
    },
    "experimental.chat.messages.transform": async (_input, output) => {
      const sessions = heldResults(output && output.messages)
      for (const [sessionID, present] of sessions) {
        const mine = answered.get(sessionID) || new Set()
        const lost = [...mine].some((id) => !present.has(id))
        if (synced.has(sessionID) && !lost) continue
        synced.add(sessionID)
        await bridge.ask({ op: "keep", session: sessionID, root, present: [...present] })
        for (const id of mine) if (!present.has(id)) mine.delete(id)
      }
    },
    dispose: async () => bridge.stop(),
  }
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

// Per session in the request: the call ids whose results the model will see in full. A
// compacted result that a FileRef or diff still in the request names is sent again (its
// compacted mark is dropped from this request's copy of the part), repeated until no
// reference in the request names a compacted result.
function heldResults(messages) {
  const sessions = new Map()
  if (!Array.isArray(messages)) return sessions
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
    if (!(part.state.time && part.state.time.compacted)) sessions.get(part.sessionID).add(part.callID)
  }
  return sessions
}

function namedResults(text) {
  const ids = []
  if (typeof text !== "string" || !text.includes("[filecache] ")) return ids
  for (const match of text.matchAll(REFERENCE)) ids.push(...match[1].split(" and "))
  return ids
}

// The resident filecache process: JSON lines, one answer per request, matched by id.
class Bridge {
  constructor(python) {
    this.python = python
    this.child = null
    this.starts = 0
    this.next = 1
    this.pending = new Map()
    this.buffer = ""
    this.orphans = [] // calls whose answer was lost with a dead child: forgotten on restart
  }

  start() {
    if (this.child || this.starts >= MAX_STARTS) return this.child
    this.starts += 1
    let child
    try {
      child = spawn(this.python, ["-I", "-m", "filecache.adapters.hosts.opencode", "serve"], {
        stdio: ["pipe", "pipe", "ignore"],
        env: process.env,
      })
    } catch {
      return null
    }
    child.on("error", () => this.lost(child))
    child.on("exit", () => this.lost(child))
    child.stdin.on("error", () => this.lost(child))
    this.child = child
    for (const orphan of this.orphans.splice(0)) this.send({ ...orphan, op: "forget", id: 0 })
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk) => this.receive(chunk))
    child.unref()
    if (child.stdin.unref) child.stdin.unref()
    if (child.stdout.unref) child.stdout.unref()
    return child
  }

  lost(child) {
    if (this.child !== child) return
    this.child = null
    this.buffer = ""
    for (const [, pending] of this.pending) pending(null)
    this.pending.clear()
  }

  // The answer to `request` never arrived: what filecache may have recorded for its call must
  // not be relied on (the model gets opencode's output instead).
  orphan(request) {
    if (!request.call) return
    const forget = { op: "forget", session: request.session, root: request.root, call: request.call }
    if (!this.child || !this.send({ ...forget, id: 0 })) this.orphans.push(forget)
  }

  receive(chunk) {
    this.buffer += chunk
    let newline
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, newline)
      this.buffer = this.buffer.slice(newline + 1)
      let answer
      try {
        answer = JSON.parse(line)
      } catch {
        continue
      }
      const pending = this.pending.get(answer.id)
      if (pending) {
        this.pending.delete(answer.id)
        pending(answer)
      }
    }
  }

  ask(request) {
    const child = this.child || this.start()
    if (!child) return Promise.resolve(null)
    const id = this.next++
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        if (!this.pending.delete(id)) return
        resolve(null)
        this.orphan(request) // the answer may still land, too late
      }, TIMEOUT_MS)
      if (timer.unref) timer.unref()
      this.pending.set(id, (answer) => {
        clearTimeout(timer)
        if (answer === null) this.orphan(request) // the child died with the request
        resolve(answer && !answer.error ? answer : null)
      })
      if (!this.send({ ...request, id })) {
        this.pending.delete(id)
        clearTimeout(timer)
        resolve(null)
      }
    })
  }

  send(message) {
    try {
      return this.child.stdin.write(JSON.stringify(message) + "\n") || true
    } catch {
      return false
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
