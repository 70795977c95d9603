/* The shapes of the core's answers (its JSON views, keys in camelCase): every integer is a
   bigint, exact over the whole 64-bit range (with `numbers: 'number'`: see AsNumbers); times
   are RFC 3339 strings. Every answer object has a `toJSON` (bigints past 2^53 - 1 as strings,
   the others as numbers). This file heads native.d.ts (package.json: napi.dtsHeaderFile). */

/** An integer argument: a number (a safe integer) or a bigint. */
export type Int = number | bigint

/** What the integers the API answers are (`Dispenser.connect`'s `numbers`). */
export type Numbers = 'bigint' | 'number'

/**
 * The keys whose values stay bigints past 2^53 - 1 with `numbers: 'number'`: the bounds of a
 * sequence or queue and what is left of it (an unbounded sequence's `max` is 2^63 - 1).
 */
export type LooseKey = 'min' | 'max' | 'remaining' | 'exhaustedInSecs' | 'capacity'

/**
 * `T` as a dispenser connected with `numbers: 'number'` answers it: every bigint a number,
 * except a `LooseKey`'s, which is a number up to 2^53 - 1 and a bigint past it. (A number
 * issued past 2^53 - 1 is refused with an InvalidInputError, code `unsafe_integer`.)
 */
export type AsNumbers<T> = T extends bigint
  ? number
  : T extends Promise<infer U>
    ? Promise<AsNumbers<U>>
    : T extends Queue
      ? NumbersQueue
      : T extends Gapless
        ? NumbersGapless
        : T extends (...args: infer A) => infer R
          ? (...args: A) => AsNumbers<R>
          : T extends object
            ? { [K in keyof T]: K extends LooseKey ? Loose<T[K]> : AsNumbers<T[K]> }
            : T

/** A bound or what is left: a number up to 2^53 - 1, a bigint past it. */
type Loose<T> = T extends bigint ? number | bigint : AsNumbers<T>

/** A Queue whose answers are numbers (`take`'s answer follows its `count`). */
export type NumbersQueue = {
  [K in Exclude<keyof Queue, 'take'>]: AsNumbers<Queue[K]>
} & {
  take<O extends TakeOptions = TakeOptions>(
    options?: O,
  ): Promise<O extends { count: Int } ? Array<AsNumbers<Ticket>> : AsNumbers<Ticket>>
}

/** A Gapless whose answers are numbers (`issue` calls its business write with a number). */
export type NumbersGapless = {
  [K in Exclude<keyof Gapless, 'issue'>]: AsNumbers<Gapless[K]>
} & {
  issue<T>(
    write: (n: number) => Promise<T> | T,
    options?: SignalOptions,
  ): Promise<{ number: number; skipped: number; value: T }>
}

/** What an adopt did to one sequence (`Dispenser.adopt`, `Sequence.adopt`). */
export interface Adopted {
  /** The sequence (for scoped mongoose-sequence counters, the scope `template@key`). */
  name: string
  /** The last number the source issued; `null` when it holds none. */
  highest: bigint | null
  /** Whether the sequence moved (false: it was past the source already, or nothing found). */
  moved: boolean
  /** The sequence's state afterwards: its next number is past `highest`. */
  state: SequenceState
}

/** A sequence's stored state (`peek`, and the answers of its admin operations). */
export interface SequenceState {
  name: string
  /** The last number issued. */
  value: bigint
  /** The number issued next; `null` when a non-cyclic sequence is exhausted. */
  next: bigint | null
  remaining: bigint
  step: bigint
  min: bigint
  max: bigint
  cycle: boolean
  cycles: bigint
  version: bigint
  createdAt: string | null
  updatedAt: string | null
  format: string | null
  start: bigint | null
  stripe: { index: bigint; count: bigint } | null
  incarnation: string | null
  usage: {
    fractionUsed: number
    remaining: bigint
    ratePerSec: number | null
    exhaustedInSecs: bigint | null
    wrapsPerDay: number | null
    historySecs: bigint | null
    issuedByDay: Record<string, bigint>
  }
}

/** An entry of a listing that could not be read, in its place (`kind` in snake_case). */
export interface ListingError {
  name: string | null
  error: { code: string; kind: string; message: string }
}

/** What a handle did so far. */
export interface Stats {
  issued: bigint
  writes: bigint
  conflicts: bigint
  retries: bigint
  roundTrips: bigint
  fallbacks: bigint
  optimisticWrites: bigint
  pessimisticWrites: bigint
  blockRefills: bigint
  waits: bigint
  batches: bigint
  batchedCalls: bigint
  coalescedCalls: bigint
  maxBatch: bigint
}

/** What closing a block client did with the numbers it held. */
export interface CloseReport {
  givenBack: bigint
  lost: bigint
}

/** One admin operation, as the history recorded it. */
export interface HistoryEntry {
  id: string
  kind: 'sequence' | 'queue'
  name: string
  op: string
  params: unknown
  who: string | null
  at: string
  clock: 'server' | 'client'
  before: unknown
  after: unknown
  outcome: string
  error: string | null
  endedAt: string | null
  cursor: string
}

/** A gap-free sequence's state. */
export interface GaplessState {
  name: string
  collection: string
  field: string
  voidField: string
  next: bigint
  /** The longest lease, in seconds (a fraction: 300, 0.25): a number in either mode. */
  maxLeaseSeconds: number
  uniqueIndex: boolean
  lease: { number: bigint; holder: string; expires: string; waiters: boolean } | null
  leaseExpired: boolean
  serverTime: string
  voided: Array<{ number: bigint; reason: string; at: string }>
}

/** What a release of a gap-free number did (the same shape on every surface). */
export type Released =
  | { outcome: 'voided'; number: bigint }
  | { outcome: 'used'; first: bigint; last: bigint }

/** A gap-free audit: every number used or voided exactly once? */
export interface Audit {
  clean: boolean
  numbers: bigint
  first: bigint | null
  last: bigint | null
  missing: bigint
  gaps: Array<[bigint, bigint]>
  duplicated: bigint
  duplicates: Array<[bigint, bigint]>
  notInteger: bigint
  voided: bigint
  voids: Array<bigint>
  malformed: bigint
  malformedDocs: Array<[string, string]>
}

/** A ticket, as a take, call, recall, finish or cancel answers it. */
export interface Ticket {
  ticket: bigint
  label: string
  serial: bigint
  taken: bigint
  served: bigint
  waiting: bigint
  position: bigint | null
  estimatedWaitSeconds: bigint | null
  desk: string | null
  replayed: boolean
  at: string
  version: bigint
  /** The queue's incarnation: with `serial`, the ticket's identity. */
  incarnation: string
}

/** A queue's state. */
export interface QueueState {
  name: string
  min: bigint
  max: bigint
  capacity: bigint
  labelFormat: string | null
  tz: string
  daily: boolean
  day: string | null
  taken: bigint
  served: bigint
  waiting: bigint
  cancelled: bigint
  nowServing: bigint | null
  nowServingLabel: string | null
  nextTicket: bigint
  nextTicketLabel: string
  full: boolean
  rounds: bigint
  recentCalls: Array<{ ticket: bigint; label: string; serial: bigint; desk: string | null; at: string; recall: boolean; waitSeconds: bigint | null }>
  desks: Array<{ desk: string | null; ticket: bigint; label: string; serial: bigint; at: string }>
  waitingList: Array<{ ticket: bigint; label: string; serial: bigint }>
  estimatedWaitSeconds: bigint | null
  averageWaitSeconds: bigint | null
  p90WaitSeconds: bigint | null
  takenToday: bigint
  servedToday: bigint
  hourly: Array<{ hour: string; taken: bigint; served: bigint; waiting: bigint }>
  version: bigint
  incarnation: string
  createdAt: string
  updatedAt: string
}

/** What `doctor` found: `fit` when the server keeps the guarantees, else the `reason`. */
export interface DoctorReport {
  fit: boolean
  reason: string | null
  server: Record<string, unknown>
  writeConcern: Record<string, unknown>
  operations: Array<{ name: string; what: string; ok: boolean; detail: string | null }>
  probe: Record<string, unknown>
}

/** A setting an `ensure` found changed since by an alter: kept as stored, the asked value not applied. */
export interface Altered {
  setting: string
  stored: string
  asked: string
}

/**
 * Which binding artifact the generated loader actually loaded: `'native'` for
 * a native addon, otherwise the `platformArchABI` of the WASI flavor. Every
 * flavor napi-rs can build is listed, because `NAPI_RS_NATIVE_LIBRARY_PATH`
 * can point the loader at a WASI artifact this package does not build itself.
 */
export declare const __napiBindingTarget: 'native' | 'wasm32-wasi' | 'wasm32-wasip1'

/**
 * A block client: numbers from blocks reserved in one write each, handed out from memory.
 * Close it to give back what it reserved and did not hand out.
 */
export declare class BlockSequence {
  /** The sequence's name. */
  get name(): string
  /**
   * The next number (from memory, or after a reservation).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  next(options?: SignalOptions | undefined | null): Promise<bigint>
  /** The next number if one is in memory now, else `null` (never waits). */
  tryNext(): bigint | null
  /**
   * Waits until no reservation is in flight.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  settle(options?: SignalOptions | undefined | null): Promise<void>
  /** How many reserved numbers it holds, not yet handed out. */
  held(): bigint
  /** The size of its next reservation. */
  blockSize(): bigint
  /** Whether it was closed. */
  isClosed(): boolean
  /**
   * Stops it and gives back what it reserved and did not hand out, when that is safe.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  close(options?: SignalOptions | undefined | null): Promise<CloseReport>
  /** What it did so far. */
  stats(): Stats
}

/** A sequence whose numbering restarts every day. */
export declare class DailySequence {
  /** The template's name. */
  get template(): string
  /** Today's date in the sequence's time zone (`YYYY-MM-DD`). */
  today(): string
  /**
   * Issues the next number of today's scope.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  next(options?: SignalOptions | undefined | null): Promise<ScopedNumber>
  /**
   * Deletes the days before `before` (`YYYY-MM-DD`), never today or later; returns how many.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  deleteScopesBefore(before: string, options?: SignalOptions | undefined | null): Promise<bigint>
  /** What this sequence did so far, over every day. */
  stats(): Stats
}

/**
 * One collection of sequences on one MongoDB deployment. Cheap to share: every handle it
 * opens uses its connection pool.
 */
export declare class Dispenser {
  /**
   * Moves the sequence `name` past every number `source` issued — mongoose-sequence's
   * counter (or, `scoped`, each of its counters into a scope of `name`), mongoengine's, a
   * counter of your own, or the highest number documents carry — so that none is handed
   * out again; never backwards; recorded in the history as `adopt`.
   *
   * # Cancel safety
   *
   * Each sequence is moved by one write: aborted part way, some may have moved (adopt
   * again: it never goes backwards).
   */
  adopt(name: string, source: AdoptSourceInput, options?: SignalOptions | undefined | null): Promise<Array<Adopted>>
  /**
   * A block client on the existing sequence `name`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  openBlocks(name: string, options?: BlockOptionsInput | undefined | null): Promise<BlockSequence>
  /**
   * Connects (lazily: nothing is sent until the first operation) to the deployment at
   * `uri`. With `numbers: 'number'`, the dispenser and every handle it opens answer
   * JavaScript numbers instead of bigints (see the guide).
   *
   * # Cancel safety
   *
   * Nothing to cancel: it sends nothing.
   */
  static connect<N extends Numbers = 'bigint'>(uri: string, options?: ConnectOptions & { numbers?: N }): Promise<N extends 'number' ? AsNumbers<Dispenser> : Dispenser>
  /** The same dispenser acting as `caller`. */
  withCaller(caller: string): Dispenser
  /** What the integers it answers are: `"bigint"` or `"number"` (`connect`'s `numbers`). */
  get numbers(): Numbers
  /** Who this dispenser acts as; `null` for the unnamed caller. */
  get caller(): string | null
  /** The database holding the documents. */
  get database(): string
  /** The collection holding the sequence documents. */
  get collection(): string
  /**
   * Creates a new sequence; fails `AlreadyExists` when the name is taken.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  create(name: string, spec?: SpecInput | undefined | null): Promise<Sequence>
  /**
   * Creates the sequence, or opens it when everything a create writes is equal (start,
   * step, bounds, cycle and `format`); fails `Conflict`, naming what differs, otherwise.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ensure(name: string, spec?: SpecInput | undefined | null): Promise<Sequence>
  /**
   * Opens an existing sequence.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  open(name: string, options?: SignalOptions | undefined | null): Promise<Sequence>
  /**
   * Reads a sequence's stored state.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  peek(name: string, options?: SignalOptions | undefined | null): Promise<SequenceState>
  /**
   * The sequences, by name, or a page of them (`options`).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  list(options?: ListOptions | undefined | null): Promise<Array<SequenceState | ListingError>>
  /**
   * Deletes a sequence by name (also one whose document no longer decodes).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  delete(name: string, options?: SignalOptions | undefined | null): Promise<void>
  /**
   * Checks that the server answers.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ping(options?: SignalOptions | undefined | null): Promise<void>
  /**
   * Examines the server: does it keep the guarantees the library relies on?
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  doctor(options?: DoctorInput | undefined | null): Promise<DoctorReport>
  /**
   * The history of the admin operations on a sequence (its stripes included), a gap-free
   * sequence or a queue.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  history(name: string, options?: HistoryOptions | undefined | null): Promise<Array<HistoryEntry>>
  /**
   * Makes the gap-free sequence `name`, or opens it when it exists with the same settings;
   * makes sure the business collection has a unique index on the field.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ensureGapless(name: string, options: GaplessOptionsInput): Promise<Gapless>
  /**
   * Makes the gap-free sequence `name`; fails `AlreadyExists` when it exists.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  createGapless(name: string, options: GaplessOptionsInput): Promise<Gapless>
  /**
   * Deletes the gap-free sequence `name` (its state; the business collection and its
   * documents stay); refused (a ConflictError, code `lease_held`) while a holder's lease
   * runs, unless `{ force: true }` (recorded in the history).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  deleteGapless(name: string, options?: ForceOptions | undefined | null): Promise<void>
  /**
   * Opens the existing gap-free sequence `name` with the settings it was created with.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  openGapless(name: string, options?: SignalOptions | undefined | null): Promise<Gapless>
  /**
   * One page of the gap-free sequences' states, by name (one whose document cannot be
   * read as `{ name, error }` in its place).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  listGapless(options?: ListOptions | undefined | null): Promise<Array<GaplessState | ListingError>>
  /**
   * Creates the queue `name`; fails `AlreadyExists` when it exists.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  createQueue(name: string, spec?: QueueSpecInput | undefined | null): Promise<Queue>
  /**
   * Creates the queue `name`, or opens it when it exists with the same spec.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ensureQueue(name: string, spec?: QueueSpecInput | undefined | null): Promise<Queue>
  /**
   * Opens the existing queue `name`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  openQueue(name: string, options?: SignalOptions | undefined | null): Promise<Queue>
  /**
   * One page of the queues' statuses, by name.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  listQueues(options?: ListOptions | undefined | null): Promise<Array<QueueState | ListingError>>
  /**
   * Deletes the queue `name`; refused (a ConflictError, code `queue_in_use`) while people
   * wait, unless `{ force: true }` (recorded in the history).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  deleteQueue(name: string, options?: ForceOptions | undefined | null): Promise<void>
  /**
   * Opens the scope `scope` of `template` (`template@scope`), creating it from the
   * template's shape when missing.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ensureScope(template: string, scope: string, options?: SignalOptions | undefined | null): Promise<Sequence>
  /**
   * Creates the scope `scope` of `template`; fails `AlreadyExists` when it exists.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  createScope(template: string, scope: string, options?: SignalOptions | undefined | null): Promise<Sequence>
  /**
   * Opens the existing scope `scope` of `template`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  openScope(template: string, scope: string, options?: SignalOptions | undefined | null): Promise<Sequence>
  /**
   * Deletes the scopes of `template` whose key sorts before `before`; returns how many.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  deleteScopesBefore(template: string, before: string, options?: SignalOptions | undefined | null): Promise<bigint>
  /** A sequence whose numbering restarts every day in the IANA time zone `timeZone`. */
  openDaily(template: string, timeZone: string): DailySequence
  /**
   * Creates the striped sequence `name` of `stripes` stripes, or opens it when it exists
   * with the same layout and spec.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  ensureStriped(name: string, stripes: number, spec?: SpecInput | undefined | null): Promise<StripedSequence>
  /**
   * Creates the striped sequence `name`; fails `AlreadyExists` when it exists.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  createStriped(name: string, stripes: number, spec?: SpecInput | undefined | null): Promise<StripedSequence>
  /**
   * Opens the existing striped sequence `name`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  openStriped(name: string, options?: SignalOptions | undefined | null): Promise<StripedSequence>
  /**
   * Deletes every stripe of `name`; returns how many.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  deleteStriped(name: string, options?: SignalOptions | undefined | null): Promise<number>
}

/** A gap-free sequence. */
export declare class Gapless {
  /** The sequence's name. */
  get name(): string
  /**
   * The settings the `ensure` that opened this handle found changed since by an alter,
   * each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
   * Empty for a handle from `create` or `open`, or when everything matched.
   */
  get altered(): Array<Altered>
  /** The business collection whose documents carry the numbers. */
  get collection(): string
  /** The field that carries the number. */
  get field(): string
  /** The field marking void documents. */
  get voidField(): string
  /**
   * `Gapless.issue` without its JavaScript half: `write(n)` resolves to the outcome of the
   * business write (the wrapper catches its error) rather than rejecting.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  _issue(write: ((arg: bigint) => Promise<WriteOutcome>), options?: SignalOptions | undefined | null): Promise<IssuedNumber>
  /**
   * Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
   * `after`, `limit`).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  history(options?: HistoryOptions | undefined | null): Promise<Array<HistoryEntry>>
  /**
   * The state: the next number, the lease, the voided numbers.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  peek(options?: SignalOptions | undefined | null): Promise<GaplessState>
  /**
   * Confirms at once the last number this handle used.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  flush(options?: SignalOptions | undefined | null): Promise<void>
  /**
   * Changes the sequence's settings (`maxLeaseSeconds`: the longest lease); resolves to
   * the state afterwards.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  alter(change: GaplessAlterInput, options?: SignalOptions | undefined | null): Promise<GaplessState>
  /**
   * Voids the next number on purpose, with a reason.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  void(number: Int, reason: string, options?: SignalOptions | undefined | null): Promise<void>
  /**
   * Ends a holder's lease on `number`: voided if it was not written, else moved past.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  release(number: Int, reason: string, options?: ForceOptions | undefined | null): Promise<Released>
  /**
   * Deletes this gap-free sequence (its state; the business collection and its documents
   * stay); refused (a ConflictError, code `lease_held`) while a holder's lease runs, unless
   * `{ force: true }` (recorded in the history).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  delete(options?: ForceOptions | undefined | null): Promise<void>
  /**
   * Checks the business collection: every number from `from` used or voided exactly once.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  audit(options?: AuditInput | undefined | null): Promise<Audit>
  /** What this handle did so far. */
  stats(): Stats
}

/** A ticket queue. */
export declare class Queue {
  /** The queue's name. */
  get name(): string
  /**
   * The same queue acting as `caller`: the name its takes' request ids are scoped to and
   * its history records.
   */
  withCaller(caller: string): Queue
  /**
   * The settings the `ensure` that opened this handle found changed since by an alter,
   * each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
   * Empty for a handle from `create` or `open`, or when everything matched.
   */
  get altered(): Array<Altered>
  /**
   * Takes the next ticket; with `count`, that many consecutive tickets, all or nothing (a
   * family), as an array.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  take<O extends TakeOptions = TakeOptions>(options?: O): Promise<O extends { count: Int } ? Array<Ticket> : Ticket>
  /**
   * Calls the oldest waiting ticket (or `ticket`), from a desk.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  call(options?: CallOptions | undefined | null): Promise<Ticket>
  /**
   * Announces again the ticket a desk shows.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  recall(options?: DeskOptions | undefined | null): Promise<Ticket>
  /**
   * A desk is done with the ticket it shows, and shows none.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  finish(options?: DeskOptions | undefined | null): Promise<Ticket>
  /**
   * Cancels a waiting ticket, named by its serial or by its take's request id; the write
   * checks that very ticket still waits.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  cancel(options: CancelOptions): Promise<Ticket>
  /**
   * The ticket that waits with `number` (read once): act on it by its serial.
   *
   * # Cancel safety
   *
   * It only reads.
   */
  waitingTicket(number: Int, options?: SignalOptions | undefined | null): Promise<Ticket>
  /**
   * Changes the queue's range.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  alter(change: QueueAlterInput, options?: SignalOptions | undefined | null): Promise<QueueState>
  /**
   * Deletes the queue.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  delete(options?: ForceOptions | undefined | null): Promise<void>
  /**
   * Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
   * `after`, `limit`).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  history(options?: HistoryOptions | undefined | null): Promise<Array<HistoryEntry>>
  /**
   * The queue's status: who waits, what each desk shows, the recent calls.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  peek(options?: SignalOptions | undefined | null): Promise<QueueState>
}

/**
 * A contiguous run of numbers reserved by one write: `first`, then `count − 1` more,
 * `step` apart, to `last`.
 */
export declare class Run {
  /** The first number. */
  get first(): bigint
  /** The last number. */
  get last(): bigint
  /** How many numbers. */
  get count(): bigint
  /** The distance between two numbers of the run. */
  get step(): bigint
  /** Every number of the run, in order. */
  toArray(): Array<bigint>
}

/**
 * A handle on one sequence. Any number of concurrent calls may share it: their draws are
 * coalesced into shared writes.
 */
export declare class Sequence {
  /**
   * `Dispenser.adopt` for this sequence.
   *
   * # Cancel safety
   *
   * As `Dispenser.adopt`.
   */
  adopt(source: AdoptSourceInput, options?: SignalOptions | undefined | null): Promise<Array<Adopted>>
  /**
   * A block client on this sequence (the handle stays usable: the core's `into_blocks`
   * takes a clone of it).
   */
  intoBlocks(options?: BlockOptionsInput | undefined | null): BlockSequence
  /** The sequence's name. */
  get name(): string
  /**
   * The settings the `ensure` that opened this handle found changed since by an alter,
   * each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
   * Empty for a handle from `create` or `open`, or when everything matched.
   */
  get altered(): Array<Altered>
  /**
   * Issues the next number.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  next(options?: SignalOptions | undefined | null): Promise<bigint>
  /**
   * Issues a contiguous run of `n` numbers in one write (with `cycle`, fewer near the wrap).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  nextN(n: Int, options?: SignalOptions | undefined | null): Promise<Run>
  /**
   * Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
   * `after`, `limit`).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  history(options?: HistoryOptions | undefined | null): Promise<Array<HistoryEntry>>
  /**
   * Reads the sequence's state now.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  peek(options?: SignalOptions | undefined | null): Promise<SequenceState>
  /**
   * Moves the sequence past `n` (never backwards).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  advanceTo(n: Int, options?: SignalOptions | undefined | null): Promise<SequenceState>
  /**
   * Sets the number issued next; backwards only with `force`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  reset(next: Int, options?: ForceOptions | undefined | null): Promise<SequenceState>
  /**
   * Changes the sequence's shape or format while it is in use.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  alter(change: AlterInput, options?: ForceOptions | undefined | null): Promise<SequenceState>
  /**
   * Deletes the sequence.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  delete(options?: SignalOptions | undefined | null): Promise<void>
  /** What this handle did so far. */
  stats(): Stats
  /** How many numbers are left before the wrap or the bound, as last seen by this handle. */
  remainingHint(): bigint
}

/** A striped sequence: draws spread over its stripes, each number unique. */
export declare class StripedSequence {
  /** The sequence's name. */
  get name(): string
  /**
   * The settings the `ensure` that opened this handle found changed since by an alter,
   * each `{ setting, stored, asked }`: the stored value is kept, the asked one not applied.
   * Empty for a handle from `create` or `open`, or when everything matched.
   */
  get altered(): Array<Altered>
  /** How many stripes. */
  get stripes(): number
  /** The same sequence drawn through block clients, one per stripe. */
  withBlocks(options?: BlockOptionsInput | undefined | null): StripedSequence
  /**
   * Issues the next number from one of the stripes.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  next(options?: SignalOptions | undefined | null): Promise<bigint>
  /**
   * Who changed it, when, how: the recorded operations, oldest first (`options`: `since`,
   * `after`, `limit`).
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  history(options?: HistoryOptions | undefined | null): Promise<Array<HistoryEntry>>
  /**
   * Every stripe's state.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  peek(options?: SignalOptions | undefined | null): Promise<Array<SequenceState>>
  /**
   * Moves every stripe past `n`.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  advanceTo(n: Int, options?: SignalOptions | undefined | null): Promise<Array<SequenceState>>
  /**
   * Sets the number issued next, each stripe within its own class.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  reset(next: Int, options?: ForceOptions | undefined | null): Promise<Array<SequenceState>>
  /**
   * Changes every stripe's shape or format.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  alter(change: AlterInput, options?: ForceOptions | undefined | null): Promise<Array<SequenceState>>
  /**
   * Deletes every stripe; returns how many.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  delete(options?: SignalOptions | undefined | null): Promise<number>
  /**
   * Closes its block clients (when it draws through blocks), giving back what they held.
   *
   * # Cancel safety
   *
   * The core's call runs to its end unless the call's `signal` aborts it, which drops it
   * where it waits, as a worker or process that exits meanwhile does: that leaves what
   * dropping the core's call leaves.
   */
  close(options?: SignalOptions | undefined | null): Promise<CloseReport>
  /** What it did so far. */
  stats(): Stats
}

/**
 * Where numbers were issued before: exactly one of `mongooseSequence`, `mongoengine`,
 * `counter` and `highest`; `database` (all) and `collection` (mongoose-sequence and
 * mongoengine) say where it is when not the default.
 */
export interface AdoptSourceInput {
  /**
   * mongoose-sequence's counter of this `id` (its `id` option; the field's name by
   * default): `{id, reference_value, seq}` in the collection `counters`.
   */
  mongooseSequence?: string
  /**
   * With `mongooseSequence`: its counters kept per `reference_fields`, each into the scope
   * of the sequence (a template) named by its reference values. Defaults to false.
   */
  scoped?: boolean
  /**
   * mongoengine's `SequenceField` counter `"<sequence_name>.<field>"`: `{_id, next}` in the
   * collection `mongoengine.counters`.
   */
  mongoengine?: string
  /**
   * A counter document of your own: the one `filter` matches holds the last number issued
   * in `field`.
   */
  counter?: CounterSourceInput
  /**
   * The highest number (for a sequence counting down: the lowest) the documents of a
   * collection carry in a field.
   */
  highest?: HighestSourceInput
  /**
   * The collection of mongoose-sequence's counters (its `collection_name`, `counters` by
   * default) or of mongoengine's (`mongoengine.counters`).
   */
  collection?: string
  /** The database holding the source. Defaults to the dispenser's. */
  database?: string
}

/** What `Sequence.alter` changes; fields left out stay as they are. */
export interface AlterInput {
  /** The new step. */
  step?: Int
  /** The new lower bound. */
  min?: Int
  /** The new upper bound. */
  max?: Int
  /** Whether to wrap. */
  cycle?: boolean
  /** The new serial format; `null` removes it. */
  format?: string | undefined | null
}

/** Which numbers an audit checks. */
export interface AuditInput {
  /** The first number expected. Defaults to the smallest found. */
  from?: Int
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** How a block client reserves (`Dispenser.openBlocks`' options). */
export interface BlockOptionsInput {
  /** How many numbers one reservation asks for. Defaults to 100. */
  size?: Int
  /**
   * The share of a block that, once handed out, starts reserving the next one in the
   * background; `null` reserves only when a block is empty. Defaults to 0.5.
   */
  prefetch?: number | undefined | null
  /**
   * The largest a prefetched block may grow to keep ahead of fast callers; `null` keeps
   * blocks at their size. Defaults to 1 000 000.
   */
  growTo?: Int | undefined | null
  /**
   * The most of what is left one reservation takes, in (0, 1]; `null`: no such bound.
   * Defaults to 0.01.
   */
  rangeShare?: number | undefined | null
  /** Aborts the call (`openBlocks` only: see `SignalOptions`). */
  signal?: AbortSignal
}

/** A call's desk and, to call out of order, the ticket (by its identity). */
export interface CallOptions {
  /** The desk that calls (it then shows the ticket). Defaults to the desk without a name. */
  desk?: string
  /**
   * Call the waiting ticket of this serial rather than the oldest (checked in the same
   * write to be that ticket and to wait; a number read off a board: `waitingTicket`).
   */
  serial?: Int
  /** With `serial`: the queue's incarnation the ticket was taken from (`ticket.incarnation`). */
  incarnation?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** The ticket a cancel names: its serial, or the request id of the take that got it. */
export interface CancelOptions {
  /** The ticket's serial (`ticket.serial`). */
  serial?: Int
  /** With `serial`: the queue's incarnation the ticket was taken from. */
  incarnation?: string
  /** The request id of the take that got the ticket (a give-up). */
  requestId?: string
  /** Whose request id it is. Defaults to the dispenser's caller. */
  caller?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** Where the documents live and how the dispenser acts (`Dispenser.connect`'s options). */
export interface ConnectOptions {
  /** The database holding the sequence documents. Defaults to `"dispenser"`. */
  database?: string
  /** The collection holding the sequence documents. Defaults to `"dispensers"`. */
  collection?: string
  /** Who is acting: the name queue request ids are scoped to and the history records. */
  caller?: string
  /** The longest one database operation may take, in milliseconds. Defaults to 10 000. */
  operationTimeoutMs?: number
  /** Whether concurrent draws on one handle share writes. Defaults to true. */
  coalesce?: boolean
  /**
   * How numbers are drawn: `"inc"` (the conditional increment, the default) or `"cas"`
   * (read, then compare-and-set).
   */
  strategy?: 'inc' | 'cas'
  /**
   * What the integers the API answers are: `"bigint"` (the default: exact over the whole
   * 64-bit range) or `"number"` (JavaScript numbers; a number issued past
   * `Number.MAX_SAFE_INTEGER` is refused). See the guide's chapter on Node.js.
   */
  numbers?: Numbers
}

/** A counter document of your own. */
export interface CounterSourceInput {
  /** Its collection. */
  collection: string
  /**
   * Matches the one counter document: JSON values (extended JSON for other types:
   * `{ $oid: "…" }`).
   */
  filter: Record<string, unknown>
  /** Its field holding the last number issued. */
  field: string
}

/** The desk a recall or finish acts for, and the ticket it must still show. */
export interface DeskOptions {
  /** The desk. Defaults to the desk without a name. */
  desk?: string
  /** Only while the desk shows the ticket of this serial. */
  serial?: Int
  /** With `serial`: the queue's incarnation the ticket was taken from. */
  incarnation?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** How long and how hard `Dispenser.doctor` examines the server. */
export interface DoctorInput {
  /** How many tasks write at once (2 to 64). Defaults to 8. */
  tasks?: number
  /** How many conditional increments each task sends. Defaults to 200. */
  increments?: number
  /** How many compare-and-set wins each task collects. Defaults to 100. */
  swaps?: number
  /** The longest the whole examination may take, in milliseconds. Defaults to 10 000. */
  timeLimitMs?: number
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/**
 * `force`: the one option of every operation that can be forced (a reset backwards, an
 * alter that strands numbers, a release of a live lease, a delete while something is held).
 */
export interface ForceOptions {
  /** Do it even so. Defaults to false. */
  force?: boolean
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** What `Gapless.alter` changes; fields left out stay as they are. */
export interface GaplessAlterInput {
  /** The longest lease, in seconds (a fraction allowed; 1 ms to a day). */
  maxLeaseSeconds?: number
}

/** Where a gap-free sequence's numbers are carried and how long a holder may keep one. */
export interface GaplessOptionsInput {
  /** The business collection (in the dispenser's database) whose documents carry the numbers. */
  collection: string
  /** The field of those documents that carries the number (dots for a nested field). */
  field: string
  /** The first number. Defaults to 1. */
  start?: Int
  /** How long a caller's lease on a number lasts, in seconds (a fraction allowed). */
  leaseSeconds?: number
  /** The longest lease any caller may take, in seconds. */
  maxLeaseSeconds?: number
  /** How long a call waits for other holders, in seconds. */
  waitSeconds?: number
  /** The field marking void documents. Defaults to `voided`. */
  voidField?: string
  /**
   * More fields written into every void document (`{ status: "VOID", total: 0 }`): JSON
   * values. Defaults to none.
   */
  voidExtra?: Record<string, unknown>
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** The documents' highest number. */
export interface HighestSourceInput {
  /** The collection of the documents. */
  collection: string
  /** The field they carry their numbers in. */
  field: string
}

/** Which history entries to read. */
export interface HistoryOptions {
  /**
   * `"sequence"` (the default), `"gapless"` or `"queue"` (`Dispenser.history` only: a
   * handle reads its own).
   */
  kind?: string
  /** Only entries at or after this time: an RFC 3339 string (`date.toISOString()`). */
  since?: string
  /** Only entries after this cursor (the last entry's `cursor`). */
  after?: string
  /** At most this many entries (1 to 1000). Defaults to 100. */
  limit?: number
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/**
 * The number a successful business write carries, and how many numbers the call found used
 * or voided and moved past.
 */
export interface IssuedNumber {
  /** The number used. */
  number: bigint
  /** Numbers moved past (already used or voided). */
  skipped: number
}

/**
 * Which names a listing holds: matching `matching`, after `after`, at most `limit`, among
 * `named`, the scopes of `scopesOf`; every name when left out.
 */
export interface ListOptions {
  /** Name patterns (`*` any run of characters, `?` one). Defaults to every name. */
  matching?: Array<string>
  /** Names after this one (byte order). Defaults to the first. */
  after?: string
  /** At most this many. Defaults to every one. */
  limit?: number
  /** Only these names (those that exist). */
  named?: Array<string>
  /** Only the scopes of this template (`list` only). */
  scopesOf?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** What `Queue.alter` changes. */
export interface QueueAlterInput {
  /** The highest ticket. */
  max?: Int
}

/** A queue's range, label format, time zone and daily restart. */
export interface QueueSpecInput {
  /** The lowest ticket (shown last in a round). Defaults to 0. */
  min?: Int
  /** The highest ticket. Defaults to 99. */
  max?: Int
  /** How tickets are shown (`A-{n:03}`). Defaults to the number. */
  format?: string
  /** The IANA time zone of the queue's day and hours. Defaults to `UTC`. */
  timeZone?: string
  /** Whether each local day starts again at the first ticket. Defaults to false. */
  daily?: boolean
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** A number and the scope (for a daily sequence, the date `YYYY-MM-DD`) it was drawn in. */
export interface ScopedNumber {
  /** The scope key. */
  scope: string
  /** The number, unique within its scope. */
  number: bigint
}

/** The options of a call that has no other: `signal`, to abort it. */
export interface SignalOptions {
  /**
   * Aborts the call: its Promise rejects at once with an `AbortError` whose `written` says
   * whether its write may have been sent.
   */
  signal?: AbortSignal
}

/** A sequence's shape: the first number, the step, the bounds and whether it wraps. */
export interface SpecInput {
  /** The first number issued. Defaults to 1. */
  start?: Int
  /** The distance between consecutive numbers (negative: descending). Defaults to 1. */
  step?: Int
  /** The lowest number. Defaults to 0. */
  min?: Int
  /** The highest number. Defaults to 2^63 − 1. */
  max?: Int
  /** Whether to wrap to `min` past `max` instead of failing `Exhausted`. Defaults to false. */
  cycle?: boolean
  /**
   * A plain sequence's serial format (`"INV-{n:06}"`), written in the same insert and
   * compared by `ensure`. Defaults to none; a striped sequence has none.
   */
  format?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** A take's count (a family), request id (to retry it safely) and caller. */
export interface TakeOptions {
  /**
   * Takes this many consecutive tickets, all or nothing (a family), and answers them as
   * an array. Without it, one ticket, answered as it is.
   */
  count?: Int
  /** The same id again answers the same tickets and takes nothing more. */
  requestId?: string
  /** Whose request id it is. Defaults to the dispenser's caller. */
  caller?: string
  /** Aborts the call (see `SignalOptions`). */
  signal?: AbortSignal
}

/** The version of the core library. */
export declare function version(): string

/** What one run of the business write came to, as the JavaScript wrapper reports it. */
export interface WriteOutcome {
  /** Whether the write succeeded. */
  ok: boolean
  /** The error's numeric `code` (11000: a duplicate key), when it has one. */
  code?: number
  /** The error's message. */
  message?: string
}
