'use strict'
// The Mongoose plugin: a number from a dispenser sequence assigned to a new document when it
// is saved, as mongoose-sequence does — per scope of document fields, with the sequence's own
// max and cycle — or, in gap-free mode, a number that is used if and only if the save succeeds.
//
//   schema.plugin(mongoosePlugin, { dispenser, field: 'number' })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'ticket', spec: { max: 99, cycle: true } })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'n', sequence: 'orders', scope: ['shop'] })
//   schema.plugin(mongoosePlugin, { dispenser, field: 'number', gapless: true })
//
// Every number comes from the Rust core: plain mode draws with `Sequence.next()` (concurrent
// saves share writes), gap-free mode issues through `Gapless.issue`, whose business write is
// the save's own insert. The plugin only says which sequence and where the number goes.

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

function refuse(message) {
  const { InvalidInputError } = require('./index.js')
  return new InvalidInputError(`invalid mongoosePlugin options: ${message}`, 'invalid_input', 'InvalidInput')
}

/** `n` as the schema path's type wants it: a bigint for a BigInt path, else a number. */
function asPathValue(schema, field, n) {
  const path = schema.path(field)
  if (path && path.instance === 'BigInt') return n
  if (n > MAX_SAFE || n < -MAX_SAFE) {
    const { InvalidInputError } = require('./index.js')
    throw new InvalidInputError(
      `number ${n} of field ${JSON.stringify(field)} is past 2^53 - 1, which a Number path cannot hold exactly; make the path a BigInt`,
      'invalid_input',
      'InvalidInput',
    )
  }
  return Number(n)
}

/** The scope key of `doc`: its `fields`' values, each URI-encoded, joined by `/`. */
function scopeKey(doc, fields) {
  return fields
    .map((f) => {
      const v = doc.get(f)
      if (v === undefined || v === null) {
        const { InvalidInputError } = require('./index.js')
        throw new InvalidInputError(
          `scope field ${JSON.stringify(f)} of the document is ${v}; a scoped number needs a value there`,
          'invalid_input',
          'InvalidInput',
        )
      }
      return encodeURIComponent(String(v))
    })
    .join('/')
}

/**
 * Numbers new documents on save.
 *
 * Options: `dispenser` (a Dispenser, or a Promise of one), `field` (the path that gets the
 * number; added as a Number path when the schema lacks it), `sequence` (the sequence's name;
 * defaults to `field`), `spec` (the sequence's spec when the plugin creates it: start, step,
 * min, max, cycle), `scope` (field names: one counter per combination of their values, drawn
 * from the scopes of `sequence`), `gapless` (true: the number is used if and only if the
 * save succeeds).
 */
function mongoosePlugin(schema, options) {
  const o = options || {}
  if (!o.dispenser) throw refuse('`dispenser` is required: a Dispenser, or a Promise of one')
  if (typeof o.field !== 'string' || o.field === '') throw refuse('`field` must be the name of a path')
  const scope = o.scope === undefined ? [] : Array.isArray(o.scope) ? o.scope : [o.scope]
  if (scope.some((f) => typeof f !== 'string' || f === '')) throw refuse('`scope` must be field names')
  if (o.gapless && scope.length > 0) throw refuse('`gapless` numbers one sequence; `scope` is not supported with it')
  if (o.gapless && o.spec && Object.keys(o.spec).some((k) => k !== 'start')) {
    throw refuse('a gap-free sequence counts up by 1 from `spec.start`; it takes no other spec')
  }
  const field = o.field
  const name = o.sequence || field
  if (!schema.path(field)) schema.add({ [field]: Number })

  let dispenser
  const connected = () => (dispenser ??= Promise.resolve(o.dispenser))

  if (o.gapless) {
    installGapless(schema, o, field, name, connected)
    return
  }

  // One handle per sequence (and per scope): concurrent saves share it, so their draws share writes.
  const handles = new Map()
  const handle = (key) => {
    let h = handles.get(key)
    if (!h) {
      h = (async () => {
        const d = await connected()
        const template = await d.ensure(name, o.spec)
        return key === '' ? template : d.ensureScope(name, key)
      })()
      h.catch(() => handles.delete(key))
      handles.set(key, h)
    }
    return h
  }

  schema.pre('save', async function numberOnSave() {
    if (!this.isNew) return
    const key = scope.length > 0 ? scopeKey(this, scope) : ''
    const n = await (await handle(key)).next()
    this.set(field, asPathValue(schema, field, n))
  })
}

/**
 * Gap-free mode: `Gapless.issue` runs the save's own insert as its business write. The
 * pre-save hook waits for the number and lets the insert go; the post-save hooks report how
 * the insert ended, which ends the issue. A duplicate key on the number (a void, or a stale
 * holder's document) fails this save and makes the core move past that number.
 */
function installGapless(schema, o, field, name, connected) {
  let gapless
  const sequence = (doc) =>
    (gapless ??= (async () => {
      const d = await connected()
      const collection = doc.constructor.collection
      if (doc.db && doc.db.name && doc.db.name !== d.database) {
        throw refuse(
          `the model's database ${JSON.stringify(doc.db.name)} is not the dispenser's ${JSON.stringify(d.database)}: a gap-free sequence's documents live in the dispenser's database`,
        )
      }
      const start = o.spec && o.spec.start
      return d.ensureGapless(name, { collection: collection.collectionName, field, start })
    })().catch((e) => {
      gapless = undefined
      throw e
    }))

  const pending = new WeakMap()
  // Longest a save may take between its number and the end of its insert (an insert whose
  // end is never reported would otherwise hold the sequence).
  const lease = o.saveTimeoutMs || 30_000

  schema.pre('save', async function issueOnSave() {
    if (!this.isNew) return
    const doc = this
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
              doc.set(field, asPathValue(schema, field, n))
            } catch (e) {
              endedWithError(e)
              failed(e)
              return
            }
            const timer = setTimeout(
              () => endedWithError(new Error(`the save did not end within ${lease} ms`)),
              lease,
            )
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

module.exports = { mongoosePlugin }
