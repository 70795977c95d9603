/* The shapes of the core's answers (its JSON views, keys in camelCase): every integer is a
   bigint, exact over the whole 64-bit range; times are RFC 3339 strings. This file heads
   native.d.ts (package.json: napi.dtsHeaderFile). */

/** An integer argument: a number (a safe integer) or a bigint. */
export type Int = number | bigint

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

/** An entry of a listing that could not be read, in its place. */
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
  maxLeaseMs: bigint
  uniqueIndex: boolean
  lease: { number: bigint; holder: string; expires: string; waiters: boolean } | null
  leaseExpired: boolean
  serverTime: string
  voided: Array<{ number: bigint; reason: string; at: string }>
}

/** What a release of a gap-free number did. */
export type Released =
  | { kind: 'voided'; number: bigint }
  | { kind: 'used'; first: bigint; last: bigint }

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
