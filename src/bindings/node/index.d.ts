// The package's types: the native classes (native.d.ts, generated from the Rust sources by
// napi-rs), what index.js adds to them, the error classes and the Mongoose plugin.
import type { SignalOptions } from './native'
export * from './native'
export { mongoosePlugin, MongoosePluginOptions, SequenceMethods, SequenceStatics } from './mongoose'

/** What `Gapless.issue` resolves to: the number used and what the business write returned. */
export interface Issued<T> {
  /** The number the successful business write carries. */
  number: bigint
  /** Numbers found used or voided and moved past. */
  skipped: number
  /** What the business write resolved to. */
  value: T
}

declare module './native' {
  interface Gapless {
    /**
     * Takes the next number, runs `write(n)` — the business write that carries it, with the
     * application's own driver — and resolves once that write succeeded: the number is used
     * exactly when `write` succeeds. A duplicate key (`code` 11000) on the number makes the
     * core move past it and call `write` again with the next; any other failure releases the
     * number and rejects with a `BusinessWriteError` whose `cause` is the write's error.
     */
    issue<T>(write: (n: bigint) => Promise<T> | T, options?: SignalOptions): Promise<Issued<T>>
  }
  interface Run {
    /** The run's numbers, in order. */
    [Symbol.iterator](): Iterator<bigint>
    /** `JSON.stringify`'s view: the numbers, in order (past 2^53 - 1: strings). */
    toJSON(): Array<number | string>
  }
}

/** A kind of the core's errors, in snake_case (the class is its name in PascalCase + `Error`). */
export type ErrorKindName =
  | 'invalid_input'
  | 'not_found'
  | 'already_exists'
  | 'conflict'
  | 'exhausted'
  | 'queue_refused'
  | 'contention'
  | 'unavailable'
  | 'corrupt'
  | 'business_write'

/** Every error the library throws. */
export declare class DispenserError extends Error {
  /** The core's stable code: `no_such_sequence`, `exhausted`, `spec_conflict`, … */
  readonly code: string
  /** The core's kind in snake_case (`not_found`, `exhausted`, …; `aborted` for an AbortError). */
  readonly kind: ErrorKindName | 'aborted' | (string & {})
  /**
   * What the failed call wrote: `nothing_written` (making it again is safe), `written` (the
   * write was made; reading its answer back failed) or `unknown` (its reply never came).
   */
  readonly written: 'nothing_written' | 'written' | 'unknown'
}
/** The input was refused (a name, a spec, an argument); nothing was written. */
export declare class InvalidInputError extends DispenserError {}
/** The sequence or queue does not exist. */
export declare class NotFoundError extends DispenserError {}
/** One of that name exists already. */
export declare class AlreadyExistsError extends DispenserError {}
/** The stored state refuses the change (another spec, backwards, a held ticket remapped). */
export declare class ConflictError extends DispenserError {}
/** A non-cyclic sequence has fewer numbers left than asked. */
export declare class ExhaustedError extends DispenserError {}
/** A queue's line refuses the operation (full, nobody waits, …). */
export declare class QueueRefusedError extends DispenserError {}
/** Every try of the retry budget lost a race; nothing was drawn. */
export declare class ContentionError extends DispenserError {}
/** The database failed or did not answer in time, or the handle was closed. */
export declare class UnavailableError extends DispenserError {}
/** A stored document cannot be read. */
export declare class CorruptError extends DispenserError {}
/** The business write of a gap-free number failed; the number was released. */
export declare class BusinessWriteError extends DispenserError {}
/**
 * A call aborted by its `signal`: `code` and `kind` `aborted`, `cause` the signal's reason,
 * `written` `unknown` when its write may have been sent, else `nothing_written`.
 */
export declare class AbortError extends DispenserError {}
