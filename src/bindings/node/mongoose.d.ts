import type { Dispenser, SpecInput } from './native'

/** The options of `schema.plugin(mongoosePlugin, options)`. */
export interface MongoosePluginOptions {
  /** The dispenser the numbers come from, or a Promise of it. */
  dispenser: Dispenser | Promise<Dispenser>
  /** The path that gets the number (added as a Number path when the schema lacks it). */
  field: string
  /** The sequence's name. Defaults to `field`. */
  sequence?: string
  /** The spec the sequence is created with (`max` and `cycle` included). */
  spec?: SpecInput
  /** Field names: one counter per combination of their values (the sequence's scopes). */
  scope?: string | string[]
  /** The number is used if and only if the save succeeds (a gap-free sequence). */
  gapless?: boolean
  /** Gap-free mode: the longest a save may take from its number to the end of its insert, in ms. Defaults to 30 000. */
  saveTimeoutMs?: number
}

/** Numbers new documents on save (see the guide's Node.js chapter). */
export declare function mongoosePlugin(schema: any, options: MongoosePluginOptions): void
