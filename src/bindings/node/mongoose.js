'use strict'
// The Mongoose plugin: a number from a dispenser sequence assigned to a new document when it
// is saved, as mongoose-sequence does — per scope of document fields, with the sequence's own
// max and cycle — or, in gap-free mode, a number that is used if and only if the save succeeds.
//
//   schema.plugin(mongoosePlugin, { dispenser, field: 'number' })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'ticket', spec: { max: 99, cycle: true } })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'n', sequence: 'orders', scope: ['shop'] })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'number', gapless: true })
//   schema.plugin(mongoosePlugin, { dispenser, inc_field: 'number' })  // mongoose-sequence's
//                                      // options: its counters adopted on first use
//
// Every number comes from the Rust core: plain mode hands numbers out from a block client
// (`block`, 10 by default without `scope` or `existing: 'keep'`; `block: null` draws with
// `Sequence.next()`, concurrent saves sharing writes), gap-free mode issues through
// `Gapless.issue`, whose business write is the save's own insert, a switch-over adopts through
// `Dispenser.adopt`. The plugin says which sequence, where the number goes, and refuses to
// number again what is numbered already.

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** The plugin's own options. */
const OWN = ['dispenser', 'field', 'sequence', 'spec', 'scope', 'gapless', 'saveTimeoutMs', 'adopt', 'manual', 'existing', 'shared', 'block']

/** The block size of a plugin that does not say, where blocks are the default (`block: null`: none). */
const DEFAULT_BLOCK = 10

/** mongoose-sequence's options, each with the plugin's option that means the same. */
const MONGOOSE_SEQUENCE = {
  inc_field: 'field',
  id: 'sequence',
  reference_fields: 'scope',
  start_seq: 'spec.start',
  inc_amount: 'spec.step',
  disable_hooks: 'manual',
  exclusive: 'shared (its opposite)',
  collection_name: "adopt: { mongooseSequence, collection }",
  parallel_hooks: null,
}

/** The numeric types a path may have: what the plugin writes there. */
const PATH_TYPES = ['Number', 'BigInt']

const lib = () => require('./index.js')

function refuse(message) {
  const { InvalidInputError } = lib()
  return new InvalidInputError(`invalid mongoosePlugin options: ${message}`, 'invalid_input', 'invalid_input')
}

function invalid(message) {
  const { InvalidInputError } = lib()
  return new InvalidInputError(message, 'invalid_input', 'invalid_input')
}

function conflict(message, code) {
  const { ConflictError } = lib()
  return new ConflictError(message, code, 'conflict')
}

/** `n` (a bigint or a number) as the schema path's type wants it. */
function asPathValue(schema, field, n) {
  const path = schema.path(field)
  const big = BigInt(n)
  if (path && path.instance === 'BigInt') return big
  if (big > MAX_SAFE || big < -MAX_SAFE) {
    throw invalid(
      `number ${big} of field ${JSON.stringify(field)} is past 2^53 - 1, which a Number path cannot hold exactly; make the path a BigInt`,
    )
  }
  return Number(big)
}

/** The scope key of `doc`: its `fields`' values, each URI-encoded, joined by `/`. */
function scopeKey(doc, fields) {
  return fields
    .map((f) => {
      const v = doc.get(f)
      if (v === undefined || v === null) {
        throw invalid(`scope field ${JSON.stringify(f)} of the document is ${v}; a scoped number needs a value there`)
      }
      return encodeURIComponent(String(v))
    })
    .join('/')
}

/** A number a document holds (a number, Long, Int32, Decimal128, bigint) as a bigint, if whole. */
function whole(v) {
  if (v === null || v === undefined) return undefined
  if (typeof v === 'bigint') return v
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : undefined
  const text = String(v)
  return /^-?\d+$/.test(text) ? BigInt(text) : undefined
}

/**
 * The whole number at or below (`down`: at or above) a number a document holds: what it
 * stands in the way of (a fraction counts as the whole number it passed).
 */
function reach(v, down) {
  const n = whole(v)
  if (n !== undefined) return n
  const f = typeof v === 'number' ? v : Number(String(v))
  if (!Number.isFinite(f)) return undefined
  return BigInt(down ? Math.ceil(f) : Math.floor(f))
}

/** The value of the dotted path `field` of a plain document. */
function valueAt(d, field) {
  return field.split('.').reduce((x, k) => (x === null || x === undefined ? x : x[k]), d)
}

// Which sequence names each dispenser's plugins number, and for which schema: a second schema
// on one sequence is refused unless both say `shared` (mongoose-sequence's "Counter already
// defined").
const claims = new WeakMap()

function claim(dispenser, name, owner) {
  let names = claims.get(dispenser)
  if (!names) claims.set(dispenser, (names = new Map()))
  const other = names.get(name)
  if (other && other !== owner && !(other.shared && owner.shared)) {
    throw conflict(
      `Counter already defined: sequence ${JSON.stringify(name)} numbers another schema's documents already; give this one its own \`sequence\`, or \`shared: true\` on both (mongoose-sequence's \`exclusive: false\`) to share it`,
      'sequence_claimed',
    )
  }
  if (!other) names.set(name, owner)
}

/** The options, checked: both names of one option are refused, as are unknown keys. */
function resolve(schema, options) {
  const { _options } = lib()
  if (options === null || typeof options !== 'object') throw refuse('give an options object: { dispenser, field, … }')
  const o = options
  for (const key of Object.keys(o)) {
    if (OWN.includes(key) || key in MONGOOSE_SEQUENCE) continue
    const near = _options.closest(key, [...OWN, ...Object.keys(MONGOOSE_SEQUENCE)])
    throw refuse(`unknown option \`${key}\`${near ? `; did you mean \`${near}\`?` : `; it takes ${OWN.map((k) => `\`${k}\``).join(', ')} (or mongoose-sequence's)`}`)
  }
  if (o.parallel_hooks !== undefined) {
    throw refuse('mongoose-sequence\'s `parallel_hooks` has no equivalent: the plugin numbers in an async pre-save hook that Mongoose awaits; leave it out')
  }
  const both = (own, theirs) => {
    if (o[own] !== undefined && o[theirs] !== undefined) throw refuse(`\`${own}\` and mongoose-sequence's \`${theirs}\` are one option: give one`)
  }
  both('field', 'inc_field')
  both('sequence', 'id')
  both('scope', 'reference_fields')
  both('manual', 'disable_hooks')
  both('shared', 'exclusive')
  const spec = { ...(o.spec || {}) }
  if (o.spec !== undefined && (o.spec === null || typeof o.spec !== 'object')) throw refuse('`spec` must be an object: { start, step, min, max, cycle, format }')
  _options.checkKeys(o.spec, _options.KEYS.SpecInput.filter((k) => k !== 'signal'), 'the mongoosePlugin `spec`')
  for (const [theirs, own] of [['start_seq', 'start'], ['inc_amount', 'step']]) {
    if (o[theirs] === undefined) continue
    if (spec[own] !== undefined) throw refuse(`\`spec.${own}\` and mongoose-sequence's \`${theirs}\` are one option: give one`)
    spec[own] = o[theirs]
  }
  const mongooseSequence = Object.keys(o).some((k) => k in MONGOOSE_SEQUENCE)
  if (!o.dispenser) throw refuse('`dispenser` is required: a Dispenser, or a Promise of one')
  const field = o.field ?? o.inc_field ?? '_id'
  if (typeof field !== 'string' || field === '') throw refuse('`field` must be the name of a path')
  const name = o.sequence ?? o.id
  if (name !== undefined && (typeof name !== 'string' || name === '')) throw refuse('`sequence` must be a name')
  const fields = o.scope ?? o.reference_fields
  let scope = fields === undefined || fields === null ? [] : Array.isArray(fields) ? [...fields] : [fields]
  if (scope.some((f) => typeof f !== 'string' || f === '')) throw refuse('`scope` must be field names')
  // mongoose-sequence keeps its scoped counters' reference values by field name, sorted.
  if (o.reference_fields !== undefined) scope = scope.sort()
  const manual = Boolean(o.manual ?? o.disable_hooks)
  const shared = o.shared ?? (o.exclusive === undefined ? false : !o.exclusive)
  const existing = o.existing ?? 'refuse'
  if (existing !== 'refuse' && existing !== 'keep') throw refuse('`existing` is "refuse" (the default) or "keep"')
  // What to adopt on first use: given, or mongoose-sequence's counters when its names are used.
  let adopt = o.adopt ?? (mongooseSequence ? 'mongoose-sequence' : false)
  if (adopt !== false && adopt !== 'mongoose-sequence' && adopt !== 'highest' && (adopt === null || typeof adopt !== 'object')) {
    throw refuse('`adopt` is "mongoose-sequence", "highest", false, or a source as `Dispenser.adopt` takes it ({ mongooseSequence }, { mongoengine }, { counter }, { highest })')
  }
  if (typeof adopt === 'object' && adopt) {
    _options.checkKeys(adopt, _options.KEYS.AdoptSourceInput, 'the mongoosePlugin `adopt`')
    adopt = { ...adopt }
  }
  if (o.collection_name !== undefined && adopt !== 'mongoose-sequence') {
    throw refuse('mongoose-sequence\'s `collection_name` says where its counters are, for adopting them: it goes with `adopt: "mongoose-sequence"` (the default with mongoose-sequence\'s options)')
  }
  if (o.gapless) {
    if (scope.length > 0) throw refuse('`gapless` numbers one sequence; `scope` is not supported with it')
    if (Object.keys(spec).some((k) => k !== 'start')) throw refuse('a gap-free sequence counts up by 1 from `spec.start`; it takes no other spec')
    if (manual) throw refuse('`gapless` numbers in the save itself; `manual` is not supported with it')
    if (existing === 'keep') throw refuse('`gapless` numbers come from the sequence only; `existing: "keep"` is not supported with it')
    if (adopt !== false && o.adopt !== undefined) {
      throw refuse('a gap-free sequence moves past the numbers documents carry by itself (their unique index); `adopt` is not supported with it')
    }
    adopt = false
  }
  const block = blockSize(o, scope, existing)
  const path = schema.path(field)
  if (path && !PATH_TYPES.includes(path.instance)) {
    throw refuse(`the path ${JSON.stringify(field)} is a ${path.instance}; the plugin writes numbers into a Number path (up to 2^53 - 1) or a BigInt path`)
  }
  if (!path) schema.add({ [field]: Number })
  return {
    dispenser: o.dispenser,
    field,
    name,
    // mongoose-sequence's counter id: its `id`, else the field's name.
    counterId: o.id ?? field,
    countersCollection: o.collection_name ?? 'counters',
    spec,
    scope,
    manual,
    shared,
    existing,
    adopt,
    gapless: Boolean(o.gapless),
    saveTimeoutMs: o.saveTimeoutMs,
    block,
  }
}

/**
 * The block size the plugin hands numbers out with (`null`: a draw per save), checked. Blocks
 * are the default only where they cannot issue a number a document already holds: not with
 * `existing: 'keep'` (a kept number inside another process's block would be handed out again
 * by it), nor with `scope` (a block per scope per process), nor in gap-free mode.
 */
function blockSize(o, scope, existing) {
  if (o.block === undefined) return o.gapless || scope.length > 0 || existing === 'keep' ? null : DEFAULT_BLOCK
  if (o.block === null) return null
  if (typeof o.block !== 'number' || !Number.isSafeInteger(o.block) || o.block < 1) {
    throw refuse(`\`block\` must be a block size of 1 or more, or null (a draw per save), not ${typeof o.block === 'string' ? JSON.stringify(o.block) : String(o.block)}`)
  }
  if (o.gapless) throw refuse('a gap-free sequence takes each number in its save; `block` is for plain mode')
  if (existing === 'keep') {
    throw refuse("`block` and `existing: 'keep'` do not go together: a kept number inside another process's block would be handed out again by that process; leave `block` out (a draw per save)")
  }
  return o.block
}

// Every numbering entry with a block client open in this process (`mongoosePlugin.close()`
// and the process's `beforeExit` give their numbers back).
const withBlocks = new Set()
// Whether the process's `beforeExit` gives them back (registered with the first block).
let closingAtExit = false

// One entry per dispenser and sequence (or scope) in this process, whichever models number
// from it (`shared`): they share its block client, so their numbers rise together.
const entries = new WeakMap()

/** The entry of the sequence (or scope) `sequence`'s name on `d`, made on first use. */
function entryFor(d, sequence) {
  let byName = entries.get(d)
  if (!byName) entries.set(d, (byName = new Map()))
  let entry = byName.get(sequence.name)
  if (!entry) byName.set(sequence.name, (entry = { sequence, blocks: null }))
  return entry
}

/**
 * Around an operation that moves the sequence `name` (or its scopes) on `d` forward, or back:
 * this process's blocks of it are given back before it and closed after it (a block a save
 * opened meanwhile), so that none of their numbers is handed out after it returned.
 */
async function withoutBlocks(d, name, operation) {
  // Looked up at each pass: a save may make the first entry of `d` while the operation runs.
  const of = () => [...(entries.get(d)?.values() ?? [])].filter((e) => e.sequence.name === name || e.sequence.name.startsWith(`${name}@`))
  await Promise.all(of().map(giveBack))
  const result = await operation()
  await Promise.all(of().map(giveBack))
  return result
}

/** Gives back what one entry's block client holds; the next save opens a new one. */
async function giveBack(entry) {
  const blocks = entry.blocks
  entry.blocks = null
  withBlocks.delete(entry)
  if (!blocks) return { givenBack: 0n, lost: 0n }
  return blocks.close()
}

/**
 * Closes the block clients of every plugin in this process, giving back the numbers they hold
 * and did not hand out (when no other process drew since; else those numbers are a gap). The
 * next save opens a new one. Resolves to the totals: `{ givenBack, lost }` (bigints).
 */
async function close() {
  const reports = await Promise.all([...withBlocks].map(giveBack))
  return reports.reduce((a, r) => ({ givenBack: a.givenBack + BigInt(r.givenBack), lost: a.lost + BigInt(r.lost) }), { givenBack: 0n, lost: 0n })
}

/** The next number of an entry: from its block client (opened on first use), else drawn. */
async function nextOf(entry, size) {
  if (!size) return entry.sequence.next()
  for (;;) {
    let blocks = entry.blocks
    if (!blocks) {
      blocks = entry.blocks = entry.sequence.intoBlocks({ size })
      withBlocks.add(entry)
      if (!closingAtExit) {
        // A program that ends by running out of work gives its blocks back; one that ends
        // with process.exit() or a signal calls mongoosePlugin.close() first, or leaves a gap.
        closingAtExit = true
        process.on('beforeExit', () => {
          if (withBlocks.size > 0) close().catch(() => {})
        })
      }
    }
    try {
      const n = blocks.tryNext()
      return n !== null ? n : await blocks.next()
    } catch (e) {
      // Closed by a give-back (counterReset, close()) while this save waited: the next one.
      if (e && e.code === 'closed' && entry.blocks !== blocks) continue
      throw e
    }
  }
}

/**
 * Numbers new documents on save (see the guide's Node.js chapter for every option, and the
 * switch-over from mongoose-sequence).
 */
function mongoosePlugin(schema, options) {
  const o = resolve(schema, options)
  const owner = { shared: o.shared, ids: [o.name, o.counterId, o.field].filter(Boolean) }
  if (o.name !== undefined) {
    // A name given: claimed now, as mongoose-sequence claims its id.
    claim(o.dispenser, o.name, owner)
  }

  let dispenser
  const connected = () => (dispenser ??= Promise.resolve(o.dispenser))
  /** The sequence's name for `model`: the one given, else `<collection>.<field>`. */
  const nameOf = (model) => o.name ?? `${model.collection.collectionName}.${o.field}`

  if (o.gapless) {
    installGapless(schema, o, nameOf, connected, owner)
    return
  }

  // Per model: the sequence, adopted once; per scope: its entry (its handle, checked once, and
  // the block client opened on it). Concurrent saves share an entry, so their draws share
  // writes (or a block).
  const models = new WeakMap()
  const prepared = (model) => {
    let p = models.get(model)
    if (!p) {
      p = prepare(model)
      p.catch(() => models.delete(model))
      models.set(model, p)
    }
    return p
  }
  const prepare = async (model) => {
    const d = await connected()
    const name = nameOf(model)
    claim(o.dispenser, name, owner)
    const template = await d.ensure(name, o.spec)
    const adopt = (source) => withoutBlocks(d, name, () => d.adopt(name, source))
    if (o.adopt === 'mongoose-sequence') {
      await adopt({
        mongooseSequence: o.counterId,
        collection: o.countersCollection,
        database: model.db.name,
        ...(o.scope.length > 0 ? { scoped: true } : {}),
      })
    } else if (o.adopt === 'highest' && o.scope.length === 0) {
      await adopt({ highest: { collection: model.collection.collectionName, field: o.field }, database: model.db.name })
    } else if (o.adopt && typeof o.adopt === 'object') {
      await adopt(o.adopt)
    }
    return { d, name, template, scopes: new Map(), checked: new Set() }
  }

  /**
   * The entry that numbers `doc`'s scope, `{ sequence, blocks }`, its handle checked against
   * what the collection holds.
   */
  const entryOf = async (doc) => {
    const model = doc.constructor
    const p = await prepared(model)
    const key = o.scope.length > 0 ? scopeKey(doc, o.scope) : ''
    let h = p.scopes.get(key)
    if (!h) {
      h = (async () => {
        const s = key === '' ? p.template : await p.d.ensureScope(p.name, key)
        const filter = Object.fromEntries(o.scope.map((f) => [f, doc.get(f)]))
        await checkNumbered(model, s, p.name, filter, p.d)
        return entryFor(p.d, s)
      })()
      h.catch(() => p.scopes.delete(key))
      p.scopes.set(key, h)
    }
    return h
  }

  /**
   * Refuses to number a collection whose field holds a number at or past the sequence's next
   * (for a sequence counting down: at or below), unless told to adopt the documents' highest.
   * Once per model and scope per process (a refusal is checked again on the next save).
   */
  const checkNumbered = async (model, s, name, filter, d) => {
    const shape = await s.peek()
    if (shape.cycle) return // a cyclic sequence repeats by design
    const down = BigInt(shape.step) < 0n
    const query = { ...filter, [o.field]: { $type: ['int', 'long', 'double', 'decimal'] } }
    const top = await model.collection.findOne(query, { sort: { [o.field]: down ? 1 : -1 }, projection: { [o.field]: 1 } })
    const held = top ? reach(valueAt(top, o.field), down) : undefined
    if (held === undefined) return
    // The collection first, the sequence's next after: a number another process drew (or
    // reserved in a block) and saved meanwhile is then behind the next read, not past it.
    const state = await s.peek()
    if (state.next === null) return
    const next = BigInt(state.next)
    if (down ? held > next : held < next) return
    if (o.adopt === 'highest') {
      await withoutBlocks(d, s.name, () => s.advanceTo(held))
      return
    }
    const where = o.scope.length > 0 ? ` (scope ${JSON.stringify(s.name)})` : ''
    throw conflict(
      `collection ${JSON.stringify(model.collection.collectionName)} already holds number ${held} in ${JSON.stringify(o.field)}, ${down ? 'at or below' : 'at or past'} ${next}, the next number of sequence ${JSON.stringify(name)}${where}: numbering it would issue those numbers again. Adopt what numbered them first: the plugin's option \`adopt: 'mongoose-sequence'\` (its counters) or \`adopt: 'highest'\` (the documents' highest number), or \`dispenser.adopt(${JSON.stringify(name)}, { highest: { collection: ${JSON.stringify(model.collection.collectionName)}, field: ${JSON.stringify(o.field)} } })\`; nothing was saved`,
      'already_numbered',
    )
  }

  /** Draws the next number of `doc`'s sequence (and scope) and sets it. */
  const assign = async (doc) => {
    const n = await nextOf(await entryOf(doc), o.block)
    doc.set(o.field, asPathValue(schema, o.field, n))
  }

  /** A new document's own number, kept: the sequence (or scope) moves past it. */
  const keep = async (doc, value) => {
    const n = whole(value)
    if (n === undefined) throw invalid(`the document's ${JSON.stringify(o.field)} holds ${value}, not a whole number`)
    const { sequence: s } = await entryOf(doc)
    const state = await s.peek()
    if (state.cycle) return
    if (state.next !== null && (BigInt(state.step) < 0n ? n <= BigInt(state.next) : n >= BigInt(state.next))) await s.advanceTo(n)
  }

  const numberedBySetNext = new WeakSet()
  if (!o.manual) {
    schema.pre('save', async function numberOnSave() {
      if (!this.isNew || numberedBySetNext.has(this)) return
      const current = this.get(o.field)
      if (current !== undefined && current !== null) {
        if (o.existing === 'keep') return keep(this, current)
        throw invalid(
          `the new document already carries ${current} in ${JSON.stringify(o.field)}; the plugin numbers new documents and overwrites nothing: leave the field out, or give the plugin \`existing: 'keep'\` to keep such numbers (the sequence then moves past them)`,
        )
      }
      await assign(this)
    })
  }

  // mongoose-sequence's `doc.setNext(id)` and `Model.counterReset(id, reference)`, for every
  // plugin on the schema: each finds its plugin by `id` (the sequence's name, its
  // mongoose-sequence id, or the field's name).
  let sequences = schemaSequences.get(schema)
  if (!sequences) schemaSequences.set(schema, (sequences = []))
  sequences.push({
    owner,
    matches: (id, model) => owner.ids.includes(id) || nameOf(model) === id,
    setNext: async (doc) => {
      await assign(doc)
      numberedBySetNext.add(doc)
      try {
        return await doc.save()
      } finally {
        numberedBySetNext.delete(doc)
      }
    },
    reset: async (model, reference) => {
      const p = await prepared(model)
      const start = o.spec.start ?? 1
      let handles
      if (o.scope.length === 0) {
        handles = [p.template]
      } else if (reference) {
        const get = typeof reference.get === 'function' ? (f) => reference.get(f) : (f) => valueAt(reference, f)
        handles = [await p.d.ensureScope(p.name, scopeKey({ get }, o.scope))]
      } else {
        const scopes = await p.d.list({ scopesOf: p.name })
        handles = await Promise.all(scopes.map((s) => p.d.openScope(p.name, s.name.slice(p.name.length + 1))))
      }
      const states = []
      for (const h of handles) {
        const key = h.name === p.name ? '' : h.name.slice(p.name.length + 1)
        // No number of this process's blocks is handed out after the reset returned (other
        // processes' block clients keep theirs: see the guide).
        states.push(await withoutBlocks(p.d, h.name, () => h.reset(start, { force: true })))
        // Reset on purpose: the documents that hold its numbers no longer stop it.
        if (!p.scopes.has(key)) p.scopes.set(key, Promise.resolve(entryFor(p.d, h)))
      }
      return states
    },
  })
  if (sequences.length === 1) installMethods(schema, sequences)
}

/** The plugins of each schema, for its `setNext` and `counterReset`. */
const schemaSequences = new WeakMap()

/** `fn`'s Promise, or `callback(error, value)` when the caller gave one (mongoose-sequence's style). */
function settle(promise, callback) {
  if (typeof callback !== 'function') return promise
  promise.then((v) => callback(null, v), (e) => callback(e))
  return undefined
}

function installMethods(schema, sequences) {
  const find = (id, model) => {
    const found = sequences.find((s) => s.matches(id, model))
    if (!found) throw invalid(`no sequence ${JSON.stringify(id)} numbers this schema; its sequences: ${sequences.map((s) => s.owner.ids.join(' / ')).join(', ')}`)
    return found
  }
  /** Numbers this document from the sequence `id` and saves it (mongoose-sequence's setNext). */
  schema.method('setNext', function setNext(id, callback) {
    const run = async () => find(id, this.constructor).setNext(this)
    return settle(run(), callback)
  })
  /**
   * Starts the sequence `id` (one scope: `reference`, a document or its scope fields' values;
   * every scope without it) again at its start: the core's `reset(start, { force: true })`,
   * so numbers are issued again — as mongoose-sequence's counterReset does.
   */
  schema.static('counterReset', function counterReset(id, reference, callback) {
    if (typeof reference === 'function') [reference, callback] = [undefined, reference]
    const run = async () => find(id, this).reset(this, reference)
    return settle(run(), callback)
  })
}

/**
 * Gap-free mode: `Gapless.issue` runs the save's own insert as its business write. The
 * pre-save hook waits for the number and lets the insert go; the post-save hooks report how
 * the insert ended, which ends the issue. A duplicate key on the number (a void, or a stale
 * holder's document) fails this save and makes the core move past that number.
 */
function installGapless(schema, o, nameOf, connected, owner) {
  const sequences = new WeakMap()
  const sequence = (doc) => {
    const model = doc.constructor
    let g = sequences.get(model)
    if (!g) {
      g = (async () => {
        const d = await connected()
        const collection = model.collection
        if (doc.db && doc.db.name && doc.db.name !== d.database) {
          throw refuse(
            `the model's database ${JSON.stringify(doc.db.name)} is not the dispenser's ${JSON.stringify(d.database)}: a gap-free sequence's documents live in the dispenser's database`,
          )
        }
        const name = nameOf(model)
        claim(o.dispenser, name, owner)
        return d.ensureGapless(name, { collection: collection.collectionName, field: o.field, start: o.spec.start })
      })()
      g.catch(() => sequences.delete(model))
      sequences.set(model, g)
    }
    return g
  }

  const pending = new WeakMap()
  // Longest a save may take between its number and the end of its insert (an insert whose
  // end is never reported would otherwise hold the sequence).
  const lease = o.saveTimeoutMs || 30_000

  schema.pre('save', async function issueOnSave() {
    if (!this.isNew) return
    const doc = this
    const current = doc.get(o.field)
    if (current !== undefined && current !== null) {
      throw invalid(
        `the new document already carries ${current} in ${JSON.stringify(o.field)}; a gap-free number comes from the sequence only: leave the field out`,
      )
    }
    const g = await sequence(doc)
    await new Promise((numbered, failed) => {
      let calls = 0
      const issuing = g.issue(
        (n) =>
          new Promise((ended, endedWithError) => {
            calls += 1
            if (calls > 1) {
              // The core moved past a number another document carries; this save already
              // failed on it, so this number is not used: released.
              endedWithError(new Error('the save failed on a number another document carries; save again'))
              return
            }
            try {
              doc.set(o.field, asPathValue(schema, o.field, n))
            } catch (e) {
              endedWithError(e)
              failed(e)
              return
            }
            const timer = setTimeout(() => endedWithError(new Error(`the save did not end within ${lease} ms`)), lease)
            pending.set(doc, {
              ended: () => {
                clearTimeout(timer)
                ended()
              },
              endedWithError: (e) => {
                clearTimeout(timer)
                endedWithError(e)
              },
            })
            numbered()
          }),
      )
      issuing.catch((e) => {
        // Before the number: the save fails with the core's error. After it: the save's own
        // error is what the caller sees (the number was released or moved past).
        failed(e)
      })
    })
  })

  schema.post('save', function savedWithNumber(doc) {
    const p = pending.get(doc)
    if (p) {
      pending.delete(doc)
      p.ended()
    }
  })

  schema.post('save', function saveFailed(error, doc, next) {
    const p = pending.get(doc)
    if (p) {
      pending.delete(doc)
      p.endedWithError(error)
    }
    next(error)
  })
}

mongoosePlugin.close = close

module.exports = { mongoosePlugin }
