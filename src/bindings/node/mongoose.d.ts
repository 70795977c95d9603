import type { AdoptSourceInput, AsNumbers, Dispenser, Int, SpecInput } from './native'

/**
 * The options of `schema.plugin(mongoosePlugin, options)`. mongoose-sequence's names are
 * accepted with their meaning (each beside the plugin's own); giving both names of one option
 * is refused, as is any other key.
 */
export interface MongoosePluginOptions {
  /** The dispenser the numbers come from, or a Promise of it. */
  dispenser: Dispenser | AsNumbers<Dispenser> | Promise<Dispenser | AsNumbers<Dispenser>>
  /** The path that gets the number: a Number or BigInt path (added as a Number path when the schema lacks it). Defaults to `_id`. */
  field?: string
  /** The sequence's name. Defaults to `<collection>.<field>`, one per model and field. */
  sequence?: string
  /** The spec the sequence is created with (`max` and `cycle` included). */
  spec?: Omit<SpecInput, 'signal'>
  /** Field names: one counter per combination of their values (the sequence's scopes). */
  scope?: string | string[]
  /** The number is used if and only if the save succeeds (a gap-free sequence). */
  gapless?: boolean
  /** Gap-free mode: the longest a save may take from its number to the end of its insert, in ms. Defaults to 30 000. */
  saveTimeoutMs?: number
  /**
   * What to adopt on first use (per model and process), so that no number documents carry is
   * issued again: `'mongoose-sequence'` (its counters; the default when its option names are
   * used), `'highest'` (the documents' highest number), a source as `Dispenser.adopt` takes
   * it, or `false` (the default otherwise: a collection that holds numbers at or past the
   * sequence's next is refused).
   */
  adopt?: 'mongoose-sequence' | 'highest' | false | AdoptSourceInput
  /** No automatic numbering: `doc.setNext(id)` numbers and saves. Defaults to false. */
  manual?: boolean
  /** A new document that already carries a number: `'refuse'` it (the default) or `'keep'` it (the sequence then moves past it). */
  existing?: 'refuse' | 'keep'
  /** Several schemas may number from this sequence (each must say so). Defaults to false. */
  shared?: boolean
  /**
   * Plain mode: hand numbers out from a block client reserving this many at a time (it grows
   * under load), or `null`: one draw per save (concurrent saves share writes). Defaults to 10
   * without `scope` or `existing: 'keep'`, else `null`; not with `gapless` nor with
   * `existing: 'keep'`. `mongoosePlugin.close()` gives the blocks back.
   */
  block?: number | null
  /** mongoose-sequence's `inc_field`: `field`. */
  inc_field?: string
  /** mongoose-sequence's `id`: `sequence` (and the id of its counters, adopted). */
  id?: string
  /** mongoose-sequence's `reference_fields`: `scope`, sorted by name as it keeps them. */
  reference_fields?: string | string[]
  /** mongoose-sequence's `start_seq`: `spec.start`. */
  start_seq?: Int
  /** mongoose-sequence's `inc_amount`: `spec.step`. */
  inc_amount?: Int
  /** mongoose-sequence's `disable_hooks`: `manual`. */
  disable_hooks?: boolean
  /** mongoose-sequence's `exclusive`: `false` is `shared: true`. */
  exclusive?: boolean
  /** mongoose-sequence's `collection_name`: where its counters are, to adopt them. Defaults to `counters`. */
  collection_name?: string
}

/** The document methods the plugin adds (type a model's documents with them). */
export interface SequenceMethods {
  /** Numbers the document from the sequence `id` (its name, mongoose-sequence id or field) and saves it. */
  setNext(id: string): Promise<this>
  setNext(id: string, callback: (error: Error | null, doc?: unknown) => void): void
}

/** The model statics the plugin adds. */
export interface SequenceStatics {
  /**
   * Starts the sequence `id` (a scope: `reference`, a document or its scope fields' values;
   * every scope without it) again at its start: `reset(start, { force: true })`, so numbers
   * already issued are issued again. Resolves to the states afterwards.
   */
  counterReset(id: string, reference?: object): Promise<unknown[]>
  counterReset(id: string, callback: (error: Error | null, states?: unknown[]) => void): void
  counterReset(id: string, reference: object, callback: (error: Error | null, states?: unknown[]) => void): void
}

/** Numbers new documents on save (see the guide's Node.js chapter). */
export declare const mongoosePlugin: {
  (schema: any, options: MongoosePluginOptions): void
  /**
   * Closes the block clients of every plugin in this process, giving back the numbers they
   * hold and did not hand out (when no other process drew since; else they are a gap); the
   * next save opens a new one. A program that ends by running out of work does it by itself
   * (`beforeExit`); call it before `process.exit()` or in a signal handler.
   */
  close(): Promise<{ givenBack: bigint; lost: bigint }>
}
