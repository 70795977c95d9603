'use strict'
// The package's entry point: the native classes (native.js loads the compiled addon) with
// their errors turned into the classes below, and what only JavaScript can add — a Run's
// iterator, the gap-free business write as a JavaScript function, the Mongoose plugin. No
// rule of the library lives here: every number, check and retry is the Rust core's.

const native = require('./native.js')

/**
 * Every error the library throws: `code` is the core's stable code, `kind` its kind, and
 * `written` what the failed call wrote: `nothing_written` (making it again is safe), `written`
 * (the write was made; reading its answer back failed) or `unknown` (a write was sent and its
 * reply never came: find out before making it again where that matters).
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

// One class per kind of the core's `ErrorKind` (its `kind()`), named after it.
const kinds = [
  'InvalidInput',
  'NotFound',
  'AlreadyExists',
  'Conflict',
  'Exhausted',
  'QueueRefused',
  'Contention',
  'Unavailable',
  'Corrupt',
  'BusinessWrite',
]
const errors = { DispenserError }
for (const kind of kinds) {
  const name = `${kind}Error`
  errors[name] = { [name]: class extends DispenserError {} }[name]
}

const HEAD = /^\[dispenser:(\w+):(\w+):(\w+)\] /

/** The native error `e` as the error class of its kind (other errors as they are). */
function translate(e) {
  if (!(e instanceof Error) || e instanceof DispenserError) return e
  const m = HEAD.exec(e.message)
  if (m) {
    const [, kind, code, written] = m
    const Class = errors[`${kind}Error`] || DispenserError
    return new Class(e.message.slice(m[0].length), code, kind, undefined, written)
  }
  // napi-rs refused an argument before the core saw it (a string for a number, …).
  if (e.code === 'InvalidArg' || e.code === 'NumberExpected' || e.code === 'StringExpected' || e.code === 'ObjectExpected') {
    return new errors.InvalidInputError(`invalid argument: ${e.message}`, 'invalid_input', 'InvalidInput')
  }
  return e
}

function rethrow(e) {
  throw translate(e)
}

/** `f` with its errors (thrown, or of the Promise it returns) translated. */
function translating(f) {
  return function (...args) {
    let r
    try {
      r = f.apply(this, args)
    } catch (e) {
      rethrow(e)
    }
    return r instanceof Promise ? r.then(undefined, rethrow) : r
  }
}

/** Every method (static and of instances) of `Class` translates its errors. */
function wrapClass(Class) {
  for (const target of [Class, Class.prototype]) {
    for (const key of Object.getOwnPropertyNames(target)) {
      if (key === 'constructor' || key === 'prototype') continue
      const d = Object.getOwnPropertyDescriptor(target, key)
      if (d && typeof d.value === 'function') {
        Object.defineProperty(target, key, { ...d, value: translating(d.value) })
      }
    }
  }
}

const classes = [
  'Dispenser',
  'Sequence',
  'Run',
  'DailySequence',
  'BlockSequence',
  'StripedSequence',
  'Gapless',
  'Queue',
]
for (const name of classes) wrapClass(native[name])

native.Run.prototype[Symbol.iterator] = function () {
  return this.toArray()[Symbol.iterator]()
}

/**
 * Takes the next number, runs `write(n)` — the business write carrying it, with the
 * application's own driver — and resolves once that write succeeded: the number is used
 * exactly when `write` succeeds. A write that fails with a duplicate key (`code` 11000) on the
 * number makes the core move past it and call `write` again with the next; any other failure
 * releases the number and rejects with a BusinessWriteError whose `cause` is the write's error.
 */
native.Gapless.prototype.issue = async function issue(write) {
  if (typeof write !== 'function') {
    throw new errors.InvalidInputError(
      'invalid business write: give a function (n) => Promise, called with the number',
      'invalid_input',
      'InvalidInput',
    )
  }
  let value
  let failure
  const outcome = async (n) => {
    try {
      value = await write(n)
      return { ok: true }
    } catch (e) {
      failure = e
      const code = e && typeof e.code === 'number' ? e.code : undefined
      return { ok: false, code, message: String((e && e.message) || e) }
    }
  }
  try {
    const issued = await this._issue(outcome)
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
exports.mongoosePlugin = require('./mongoose.js').mongoosePlugin
