'use strict'
// The package's entry point: the native classes (native.js loads the compiled addon), with
// what only JavaScript can add around each call — the errors as classes, the options checked
// (an unknown key is refused), the `signal` that aborts a call, the answers as JavaScript
// numbers for a dispenser connected with `numbers: 'number'` and serialisable by
// JSON.stringify, a Run's iterator, the gap-free business write as a JavaScript function, the
// Mongoose plugin. No rule of the library lives here: every number, check and retry is the
// Rust core's.

const native = require('./native.js')

/**
 * Every error the library throws: `code` is the core's stable code, `kind` its kind in
 * snake_case, and `written` what the failed call wrote: `nothing_written` (making it again is
 * safe), `written` (the write was made; reading its answer back failed) or `unknown` (a write
 * was sent and its reply never came: find out before making it again where that matters).
 */
class DispenserError extends Error {
  constructor(message, code, kind, options, written = 'nothing_written') {
    super(message, options)
    this.name = new.target.name
    this.code = code
    this.kind = kind
    this.written = written
  }
}

// One class per kind of the core's `ErrorKind`, named after it; `kind` is its snake_case name.
const KINDS = {
  invalid_input: 'InvalidInputError',
  not_found: 'NotFoundError',
  already_exists: 'AlreadyExistsError',
  conflict: 'ConflictError',
  exhausted: 'ExhaustedError',
  queue_refused: 'QueueRefusedError',
  contention: 'ContentionError',
  unavailable: 'UnavailableError',
  corrupt: 'CorruptError',
  business_write: 'BusinessWriteError',
}
const errors = { DispenserError }
for (const name of Object.values(KINDS)) {
  errors[name] = { [name]: class extends DispenserError {} }[name]
}

/**
 * A call aborted by its `signal`: `code` and `kind` are `aborted`, `cause` the signal's
 * reason, and `written` says whether its write may have been sent (`unknown`) or not
 * (`nothing_written`: aborted before it started, or a call that only reads).
 */
class AbortError extends DispenserError {}

function invalid(message) {
  return new errors.InvalidInputError(message, 'invalid_input', 'invalid_input')
}

const HEAD = /^\[dispenser:(\w+):(\w+):(\w+)\] /

/** The native error `e` as the error class of its kind (other errors as they are). */
function translate(e) {
  if (!(e instanceof Error) || e instanceof DispenserError) return e
  const m = HEAD.exec(e.message)
  if (m) {
    const [, kind, code, written] = m
    const Class = errors[KINDS[kind]] || DispenserError
    return new Class(e.message.slice(m[0].length), code, kind, undefined, written)
  }
  // napi-rs refused an argument before the core saw it (a string for a number, …).
  if (e.code === 'InvalidArg' || e.code === 'NumberExpected' || e.code === 'StringExpected' || e.code === 'ObjectExpected') {
    return invalid(`invalid argument: ${e.message}`)
  }
  return e
}

// ---------------------------------------------------------------------------------------
// The options each call takes. Every options object is checked against its type's keys (the
// interfaces of native.d.ts, which napi-rs generates from the Rust sources: a test keeps the
// two equal); an unknown key is refused, naming the closest known one.

const KEYS = {
  ConnectOptions: ['database', 'collection', 'caller', 'operationTimeoutMs', 'coalesce', 'strategy', 'numbers'],
  SpecInput: ['start', 'step', 'min', 'max', 'cycle', 'format', 'signal'],
  SignalOptions: ['signal'],
  ForceOptions: ['force', 'signal'],
  ListOptions: ['matching', 'after', 'limit', 'named', 'scopesOf', 'signal'],
  HistoryOptions: ['kind', 'since', 'after', 'limit', 'signal'],
  DoctorInput: ['tasks', 'increments', 'swaps', 'timeLimitMs', 'signal'],
  AdoptSourceInput: ['mongooseSequence', 'scoped', 'mongoengine', 'counter', 'highest', 'collection', 'database'],
  CounterSourceInput: ['collection', 'filter', 'field'],
  HighestSourceInput: ['collection', 'field'],
  AlterInput: ['step', 'min', 'max', 'cycle', 'format'],
  BlockOptionsInput: ['size', 'prefetch', 'growTo', 'rangeShare', 'signal'],
  GaplessOptionsInput: ['collection', 'field', 'start', 'leaseSeconds', 'maxLeaseSeconds', 'waitSeconds', 'voidField', 'voidExtra', 'signal'],
  GaplessAlterInput: ['maxLeaseSeconds'],
  AuditInput: ['from', 'signal'],
  QueueSpecInput: ['min', 'max', 'format', 'timeZone', 'daily', 'signal'],
  TakeOptions: ['count', 'requestId', 'caller', 'signal'],
  CallOptions: ['desk', 'serial', 'incarnation', 'signal'],
  DeskOptions: ['desk', 'serial', 'incarnation', 'signal'],
  CancelOptions: ['serial', 'incarnation', 'requestId', 'caller', 'signal'],
  QueueAlterInput: ['max'],
}

/** Options objects inside options objects: the type of each such key. */
const NESTED = {
  AdoptSourceInput: { counter: 'CounterSourceInput', highest: 'HighestSourceInput' },
}

/** Keys renamed (vocabulary of every surface), each with its replacement. */
const RENAMED = {
  GaplessOptionsInput: { leaseMs: 'leaseSeconds', maxLeaseMs: 'maxLeaseSeconds', waitMs: 'waitSeconds' },
  GaplessAlterInput: { maxLeaseMs: 'maxLeaseSeconds' },
  AuditInput: { start: 'from' },
}

/**
 * Every method of the native classes and what its arguments are: `args` names the type of
 * each options object among them (`null`: not one); the last that takes `signal` carries the
 * call's. `reads`: it writes nothing (an abort or a refused answer then wrote nothing).
 * `sync`: it answers at once (no Promise, no signal). `omit`: keys of its type it does not
 * take. `key`: its answer is a bigint past 2^53 - 1 in number mode where that key's would be
 * (`LOOSE`). Every method of the classes is here (a test checks it); getters are not.
 */
const R = { reads: true }
const S = { sync: true }
const API = {
  Dispenser: {
    connect: { static: true, args: [null, 'ConnectOptions'] },
    withCaller: S,
    create: { args: [null, 'SpecInput'] },
    ensure: { args: [null, 'SpecInput'] },
    open: { args: [null, 'SignalOptions'], ...R },
    peek: { args: [null, 'SignalOptions'], ...R },
    list: { args: ['ListOptions'], ...R },
    delete: { args: [null, 'SignalOptions'] },
    ping: { args: ['SignalOptions'], ...R },
    doctor: { args: ['DoctorInput'] },
    history: { args: [null, 'HistoryOptions'], ...R },
    adopt: { args: [null, 'AdoptSourceInput', 'SignalOptions'] },
    openBlocks: { args: [null, 'BlockOptionsInput'], ...R },
    ensureStriped: { args: [null, null, 'SpecInput'] },
    createStriped: { args: [null, null, 'SpecInput'] },
    openStriped: { args: [null, 'SignalOptions'], ...R },
    deleteStriped: { args: [null, 'SignalOptions'] },
    ensureScope: { args: [null, null, 'SignalOptions'] },
    createScope: { args: [null, null, 'SignalOptions'] },
    openScope: { args: [null, null, 'SignalOptions'], ...R },
    deleteScopesBefore: { args: [null, null, 'SignalOptions'] },
    openDaily: S,
    ensureGapless: { args: [null, 'GaplessOptionsInput'] },
    createGapless: { args: [null, 'GaplessOptionsInput'] },
    deleteGapless: { args: [null, 'ForceOptions'] },
    openGapless: { args: [null, 'SignalOptions'], ...R },
    listGapless: { args: ['ListOptions'], omit: ['scopesOf'], ...R },
    createQueue: { args: [null, 'QueueSpecInput'] },
    ensureQueue: { args: [null, 'QueueSpecInput'] },
    openQueue: { args: [null, 'SignalOptions'], ...R },
    listQueues: { args: ['ListOptions'], omit: ['scopesOf'], ...R },
    deleteQueue: { args: [null, 'ForceOptions'] },
  },
  Sequence: {
    next: { args: ['SignalOptions'] },
    nextN: { args: [null, 'SignalOptions'] },
    history: { args: ['HistoryOptions'], omit: ['kind'], ...R },
    peek: { args: ['SignalOptions'], ...R },
    advanceTo: { args: [null, 'SignalOptions'] },
    reset: { args: [null, 'ForceOptions'] },
    alter: { args: ['AlterInput', 'ForceOptions'] },
    delete: { args: ['SignalOptions'] },
    adopt: { args: ['AdoptSourceInput', 'SignalOptions'] },
    intoBlocks: { args: ['BlockOptionsInput'], omit: ['signal'], ...S },
    stats: S,
    remainingHint: { sync: true, key: 'remaining' },
  },
  Run: { toArray: S },
  DailySequence: {
    today: S,
    next: { args: ['SignalOptions'] },
    deleteScopesBefore: { args: [null, 'SignalOptions'] },
    stats: S,
  },
  BlockSequence: {
    next: { args: ['SignalOptions'] },
    tryNext: S,
    settle: { args: ['SignalOptions'], ...R },
    held: S,
    blockSize: S,
    isClosed: S,
    close: { args: ['SignalOptions'] },
    stats: S,
  },
  StripedSequence: {
    withBlocks: { args: ['BlockOptionsInput'], omit: ['signal'], ...S },
    next: { args: ['SignalOptions'] },
    history: { args: ['HistoryOptions'], omit: ['kind'], ...R },
    peek: { args: ['SignalOptions'], ...R },
    advanceTo: { args: [null, 'SignalOptions'] },
    reset: { args: [null, 'ForceOptions'] },
    alter: { args: ['AlterInput', 'ForceOptions'] },
    delete: { args: ['SignalOptions'] },
    close: { args: ['SignalOptions'] },
    stats: S,
  },
  Gapless: {
    _issue: { args: [null, 'SignalOptions'], label: 'issue' },
    history: { args: ['HistoryOptions'], omit: ['kind'], ...R },
    peek: { args: ['SignalOptions'], ...R },
    flush: { args: ['SignalOptions'] },
    alter: { args: ['GaplessAlterInput', 'SignalOptions'] },
    void: { args: [null, null, 'SignalOptions'] },
    release: { args: [null, null, 'ForceOptions'] },
    delete: { args: ['ForceOptions'] },
    audit: { args: ['AuditInput'], ...R },
    stats: S,
  },
  Queue: {
    withCaller: S,
    take: { args: ['TakeOptions'] },
    call: { args: ['CallOptions'] },
    recall: { args: ['DeskOptions'] },
    finish: { args: ['DeskOptions'] },
    cancel: { args: ['CancelOptions'] },
    waitingTicket: { args: [null, 'SignalOptions'], ...R },
    alter: { args: ['QueueAlterInput', 'SignalOptions'] },
    delete: { args: ['ForceOptions'] },
    history: { args: ['HistoryOptions'], omit: ['kind'], ...R },
    peek: { args: ['SignalOptions'], ...R },
  },
}

/** The edit distance of `a` and `b` (insertions, deletions, substitutions, transpositions). */
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

/**
 * The known key closest to `key` (case, `_` and `-` aside), when one is close enough: a few
 * letters apart, or one the start of the other (`start_sequence`, `start_seq`).
 */
function closest(key, known) {
  const plain = (k) => k.toLowerCase().replace(/[_-]/g, '')
  let best
  let bestDistance = Infinity
  for (const k of known) {
    const [a, b] = [plain(key), plain(k)]
    const dd = Math.min(a.length, b.length) >= 4 && (a.startsWith(b) || b.startsWith(a)) ? 1 : distance(a, b)
    if (dd < bestDistance) [best, bestDistance] = [k, dd]
  }
  return bestDistance <= Math.max(1, Math.min(3, Math.floor(key.length / 3))) ? best : undefined
}

/**
 * Refuses a key of `options` that `known` lacks: "unknown option `maxx` of `ensure`; did you
 * mean `max`?" (`renamed` names a key's replacement).
 */
function checkKeys(options, known, where, renamed = {}) {
  if (options === null || options === undefined || typeof options !== 'object' || Array.isArray(options)) return
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue
    const instead = renamed[key] || closest(key, known)
    const hint = instead
      ? `; did you mean \`${instead}\`?${renamed[key] ? ` (\`${key}\` was renamed)` : ''}`
      : `; it takes ${known.length ? known.map((k) => `\`${k}\``).join(', ') : 'no option'}`
    throw invalid(`unknown option \`${key}\` of ${where}${hint}`)
  }
}

/** Checks the options objects among `args` for the call `spec` describes. */
function checkOptions(spec, label, args) {
  if (!spec.args) return
  spec.args.forEach((type, i) => {
    if (!type) return
    const omit = spec.omit || []
    const known = KEYS[type].filter((k) => !omit.includes(k))
    const options = args[i]
    checkKeys(options, known, `\`${label}\``, RENAMED[type])
    for (const [key, inner] of Object.entries(NESTED[type] || {})) {
      if (options && options[key] !== undefined) checkKeys(options[key], KEYS[inner], `\`${label}\`'s \`${key}\``)
    }
  })
}

// ---------------------------------------------------------------------------------------
// Numbers: bigints by default; with `numbers: 'number'`, the answers of a dispenser and of
// every handle it opens are JavaScript numbers.

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)
const safe = (b) => b <= MAX_SAFE && b >= -MAX_SAFE

/** Keys that stay bigints past 2^53 - 1 in number mode: bounds, and what is left. */
const LOOSE = new Set(['min', 'max', 'remaining', 'exhaustedInSecs', 'capacity'])

/** The handles (native objects) of a dispenser connected with `numbers: 'number'`. */
const numberMode = new WeakSet()

/** The native classes, to tell a handle from an answer. */
const CLASSES = ['Dispenser', 'Sequence', 'Run', 'DailySequence', 'BlockSequence', 'StripedSequence', 'Gapless', 'Queue']
const isHandle = (v) => CLASSES.some((c) => v instanceof native[c])

/** The refusal of a number past 2^53 - 1 in number mode. */
function unsafe(value, label, reads, key) {
  const where = key ? ` in \`${key}\`` : ''
  const made = reads ? '' : '; the call was made: what it issued is not used (a gap)'
  const e = invalid(
    `\`${label}\` answered ${value}${where}, past Number.MAX_SAFE_INTEGER (2^53 - 1), which a JavaScript number cannot hold exactly: this dispenser was connected with numbers: 'number'; connect with numbers: 'bigint' (the default) for the whole 64-bit range${made}`,
  )
  e.code = 'unsafe_integer'
  e.written = reads ? 'nothing_written' : 'written'
  return e
}

/** `b` as a number, or the refusal. */
function toNumber(b, label, reads, key) {
  if (safe(b)) return Number(b)
  throw unsafe(b, label, reads, key)
}

/** JSON.stringify's view of an answer: bigints up to 2^53 - 1 as numbers, past it as strings. */
function jsonable(v) {
  if (typeof v === 'bigint') return safe(v) ? Number(v) : String(v)
  if (Array.isArray(v)) return v.map(jsonable)
  if (v !== null && typeof v === 'object') {
    if (typeof v.toJSON === 'function' && Object.getPrototypeOf(v) !== Object.prototype) return v.toJSON()
    const out = {}
    for (const [k, x] of Object.entries(v)) out[k] = jsonable(x)
    return out
  }
  return v
}

function toJSON() {
  return jsonable(this)
}

/**
 * An answer as the application gets it: handles of a number-mode dispenser marked so; every
 * answer object given a `toJSON`; in number mode, every bigint a number (or refused).
 */
function answer(v, numbers, label, reads, key) {
  if (typeof v === 'bigint') {
    if (!numbers) return v
    if (key !== undefined && LOOSE.has(key) && !safe(v)) return v
    return toNumber(v, label, reads, key)
  }
  if (v === null || typeof v !== 'object') return v
  if (isHandle(v)) {
    if (numbers) {
      if (v instanceof native.Run) {
        toNumber(v.first, label, reads, 'first')
        toNumber(v.last, label, reads, 'last')
      }
      numberMode.add(v)
    }
    return v
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) v[i] = answer(v[i], numbers, label, reads, key)
  } else {
    for (const k of Object.keys(v)) v[k] = answer(v[k], numbers, label, reads, k)
  }
  Object.defineProperty(v, 'toJSON', { value: toJSON, enumerable: false, writable: true, configurable: true })
  return v
}

// ---------------------------------------------------------------------------------------
// Aborting: `{ signal }`.

/** The AbortSignal among `args` for the call `spec` describes (the last options that take one). */
function signalOf(spec, label, args) {
  if (!spec.args) return undefined
  let signal
  spec.args.forEach((type, i) => {
    if (type && KEYS[type].includes('signal') && args[i] && args[i].signal !== undefined && args[i].signal !== null) {
      signal = args[i].signal
    }
  })
  if (signal === undefined) return undefined
  if (typeof signal !== 'object' || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw invalid(`invalid \`signal\` of \`${label}\`: give an AbortSignal (\`new AbortController().signal\`, \`AbortSignal.timeout(ms)\`)`)
  }
  return signal
}

function aborted(signal, label, written) {
  const why = written === 'unknown' ? 'its write may have been sent' : 'nothing was written'
  return new AbortError(`\`${label}\` was aborted: ${why}`, 'aborted', 'aborted', { cause: signal.reason }, written)
}

/** Calls `f` so that `signal` aborts it: rejected at once, the core's future dropped. */
function abortable(f, signal, label, reads) {
  if (signal.aborted) return Promise.reject(aborted(signal, label, 'nothing_written'))
  const token = native._abortToken()
  native._armAbort(token)
  let running
  try {
    running = f()
  } finally {
    native._disarmAbort()
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      const started = native._abort(token)
      reject(aborted(signal, label, started && !reads ? 'unknown' : 'nothing_written'))
    }
    signal.addEventListener('abort', onAbort, { once: true })
    running.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (e) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}

// ---------------------------------------------------------------------------------------
// Every method of the native classes, wrapped.

/** `f`, the native method `name` of a class, as the application calls it. */
function wrapped(f, name, spec) {
  const label = spec.label || name
  const reads = Boolean(spec.reads)
  return function (...args) {
    const numbers = spec.static ? Boolean(args[1] && args[1].numbers === 'number') : numberMode.has(this)
    let r
    try {
      checkOptions(spec, label, args)
      const signal = spec.sync ? undefined : signalOf(spec, label, args)
      r = signal ? abortable(() => f.apply(this, args), signal, label, reads) : f.apply(this, args)
    } catch (e) {
      if (spec.sync) throw translate(e)
      return Promise.reject(translate(e))
    }
    if (!(r instanceof Promise)) return answer(r, numbers, label, true, spec.key)
    return r.then(
      (v) => answer(v, numbers, label, reads, spec.key),
      (e) => {
        throw translate(e)
      },
    )
  }
}

for (const name of CLASSES) {
  const Class = native[name]
  const methods = API[name] || {}
  for (const target of [Class, Class.prototype]) {
    for (const key of Object.getOwnPropertyNames(target)) {
      if (key === 'constructor' || key === 'prototype') continue
      const d = Object.getOwnPropertyDescriptor(target, key)
      const spec = methods[key] || {}
      if (d && typeof d.value === 'function') {
        Object.defineProperty(target, key, { ...d, value: wrapped(d.value, key, spec) })
      } else if (d && typeof d.get === 'function') {
        // A getter: an answer too (a Run's first, last, count and step; a handle's `altered`).
        const get = d.get
        Object.defineProperty(target, key, {
          ...d,
          get() {
            return answer(get.call(this), numberMode.has(this), key, true)
          },
        })
      }
    }
  }
}

native.Run.prototype[Symbol.iterator] = function () {
  return this.toArray()[Symbol.iterator]()
}

/** A run serialises as the array of its numbers (past 2^53 - 1: strings). */
native.Run.prototype.toJSON = function () {
  return this.toArray().map(jsonable)
}

/**
 * Takes the next number, runs `write(n)` — the business write carrying it, with the
 * application's own driver — and resolves once that write succeeded: the number is used
 * exactly when `write` succeeds. A write that fails with a duplicate key (`code` 11000) on the
 * number makes the core move past it and call `write` again with the next; any other failure
 * releases the number and rejects with a BusinessWriteError whose `cause` is the write's error.
 * `options.signal` aborts it.
 */
native.Gapless.prototype.issue = async function issue(write, options) {
  if (typeof write !== 'function') {
    throw invalid('invalid business write: give a function (n) => Promise, called with the number')
  }
  const numbers = numberMode.has(this)
  let value
  let failure
  const outcome = async (n) => {
    try {
      value = await write(numbers ? toNumber(n, 'issue', false) : n)
      return { ok: true }
    } catch (e) {
      failure = e
      const code = e && typeof e.code === 'number' ? e.code : undefined
      return { ok: false, code, message: String((e && e.message) || e) }
    }
  }
  try {
    const issued = await this._issue(outcome, options)
    return { number: issued.number, skipped: issued.skipped, value }
  } catch (e) {
    const t = translate(e)
    if (t instanceof errors.BusinessWriteError && failure !== undefined) t.cause = failure
    throw t
  }
}

// Named one by one, so that `import { Dispenser } from 'dispenser'` finds them too.
exports.version = native.version
exports.Dispenser = native.Dispenser
exports.Sequence = native.Sequence
exports.Run = native.Run
exports.DailySequence = native.DailySequence
exports.BlockSequence = native.BlockSequence
exports.StripedSequence = native.StripedSequence
exports.Gapless = native.Gapless
exports.Queue = native.Queue
exports.DispenserError = DispenserError
exports.InvalidInputError = errors.InvalidInputError
exports.NotFoundError = errors.NotFoundError
exports.AlreadyExistsError = errors.AlreadyExistsError
exports.ConflictError = errors.ConflictError
exports.ExhaustedError = errors.ExhaustedError
exports.QueueRefusedError = errors.QueueRefusedError
exports.ContentionError = errors.ContentionError
exports.UnavailableError = errors.UnavailableError
exports.CorruptError = errors.CorruptError
exports.BusinessWriteError = errors.BusinessWriteError
exports.AbortError = AbortError
// For the Mongoose plugin and the tests: the options' keys, and their check.
Object.defineProperty(exports, '_options', { value: { KEYS, NESTED, RENAMED, API, checkKeys, closest }, enumerable: false })
exports.mongoosePlugin = require('./mongoose.js').mongoosePlugin
