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
