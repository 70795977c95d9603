'use strict'
// Options, every one: an unknown key of any options object is refused before anything is
// sent, naming the closest known one; the names every surface shares (take's count, kinds in
// snake_case, lease durations in seconds, strategy, a queue's caller, voidExtra, force on a
// queue's delete); adopting from another numbering.
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, connect, driver, unique, DATABASE } = require('./helpers.js')

const { InvalidInputError, ConflictError } = dispenser
const { API, KEYS, NESTED } = dispenser._options

/** One handle of each class, on a dispenser of its own. */
async function handles(test) {
  const d = await connect(test)
  const s = await d.ensure('s')
  return {
    Dispenser: d,
    Sequence: s,
    Run: await s.nextN(2),
    DailySequence: d.openDaily('s', 'UTC'),
    BlockSequence: await d.openBlocks('s', { size: 5 }),
    StripedSequence: await d.ensureStriped('wide', 2),
    Gapless: await d.ensureGapless('g', { collection: `${unique(test)}_g`, field: 'n' }),
    Queue: await d.ensureQueue('q'),
  }
}

test('every options object refuses an unknown key, naming the closest known one, and writes nothing', async () => {
  const h = await handles('unknown_keys')
  const before = await h.Dispenser.list()
  let checked = 0
  for (const [cls, methods] of Object.entries(API)) {
    for (const [method, spec] of Object.entries(methods)) {
      for (const [i, type] of (spec.args || []).entries()) {
        if (!type) continue
        const known = KEYS[type].filter((k) => !(spec.omit || []).includes(k))
        const target = spec.static ? dispenser[cls] : h[cls]
        const label = spec.label || method
        // A typo of a known key: one letter doubled.
        const typo = `${known[0]}${known[0].slice(-1)}`
        const args = spec.args.map(() => undefined)
        args[i] = { [typo]: 1 }
        const expected = `unknown option \`${typo}\` of \`${label}\`; did you mean \`${known[0]}\`?`
        const call = () => target[method](...args)
        const refused = (e) => e instanceof InvalidInputError && e.code === 'invalid_input' && e.kind === 'invalid_input' && e.message === expected
        if (spec.sync) assert.throws(call, refused, `${cls}.${method}`)
        else await assert.rejects(call(), refused, `${cls}.${method}`)
        checked += 1
        for (const [key, inner] of Object.entries(NESTED[type] || {})) {
          args[i] = { [key]: { [`${KEYS[inner][0]}s`]: 'x' } }
          await assert.rejects(target[method](...args), (e) => e instanceof InvalidInputError && e.message.startsWith(`unknown option \`${KEYS[inner][0]}s\` of \`${label}\`'s \`${key}\``), `${cls}.${method}.${key}`)
          checked += 1
        }
      }
    }
  }
  assert.ok(checked >= 60, `${checked} options objects checked`)
  // The spelling of another surface, a key far from any, a renamed key, an option a call lacks.
  const d = h.Dispenser
  await assert.rejects(h.Queue.take({ request_id: 'k' }), { message: 'unknown option `request_id` of `take`; did you mean `requestId`?' })
  await assert.rejects(d.ensure('e5', { maxx: 5 }), { message: 'unknown option `maxx` of `ensure`; did you mean `max`?' })
  await assert.rejects(d.ensure('e5', { colour: 'red' }), { message: 'unknown option `colour` of `ensure`; it takes `start`, `step`, `min`, `max`, `cycle`, `format`, `signal`' })
  await assert.rejects(d.ensureGapless('g2', { collection: 'c', field: 'n', maxLeaseMs: 5000 }), { message: 'unknown option `maxLeaseMs` of `ensureGapless`; did you mean `maxLeaseSeconds`? (`maxLeaseMs` was renamed)' })
  await assert.rejects(h.Gapless.audit({ start: 1 }), { message: 'unknown option `start` of `audit`; did you mean `from`? (`start` was renamed)' })
  await assert.rejects(h.Sequence.history({ kind: 'queue' }), /unknown option `kind` of `history`/)
  await assert.rejects(d.listQueues({ scopesOf: 'x' }), /unknown option `scopesOf` of `listQueues`/)
  assert.throws(() => h.Sequence.intoBlocks({ signal: new AbortController().signal }), /unknown option `signal` of `intoBlocks`/)
  // Nothing was written: no sequence e5, g2 or other.
  assert.deepEqual((await d.list()).map((x) => x.name), before.map((x) => x.name))
  assert.deepEqual((await d.listGapless()).map((g) => g.name), ['g'])
})

test('the shared vocabulary: take({ count }), kinds in snake_case, seconds, strategy, withCaller, voidExtra, delete({ force })', async () => {
  const d = await connect('vocabulary', { strategy: 'cas', caller: 'web' })
  await assert.rejects(connect('vocabulary_bad', { strategy: 'fast' }), (e) => e instanceof InvalidInputError && /invalid strategy: "fast"; give "inc"/.test(e.message))
  const s = await d.ensure('orders')
  const drawn = await Promise.all(Array.from({ length: 50 }, () => s.next()))
  assert.equal(new Set(drawn).size, 50, 'the compare-and-set strategy draws every number once')
  const q = await d.ensureQueue('lobby', { max: 20 })
  assert.equal(q.takeMany, undefined, 'takeMany is gone: take({ count })')
  const one = await q.take()
  assert.equal(one.ticket, 1n)
  const family = await q.take({ count: 3, requestId: 'family-1' })
  assert.deepEqual(family.map((t) => t.ticket), [2n, 3n, 4n])
  assert.deepEqual((await q.take({ count: 1 })).map((t) => t.ticket), [5n], 'a count gives an array, even of one')
  // A queue acting as another caller: its request ids are that caller's.
  const kiosk = q.withCaller('kiosk-7')
  assert.equal(kiosk.name, 'lobby')
  const t = await kiosk.take({ requestId: 'family-1' })
  assert.deepEqual([t.ticket, t.replayed], [6n, false], 'the same id from another caller is another take')
  assert.equal((await q.take({ requestId: 'family-1', count: 3 }))[0].replayed, true)
  const history = await q.history()
  assert.ok(history.some((e) => e.who === 'web'), JSON.stringify(history.map((e) => e.who)))
  assert.throws(() => q.withCaller(''), InvalidInputError)
  // A queue with people waiting: its own delete is refused, then forced.
  const busy = await q.delete().catch((e) => e)
  assert.ok(busy instanceof ConflictError && busy.code === 'queue_in_use' && busy.kind === 'conflict', busy.message)
  await q.delete({ force: true })
  const gone = await d.openQueue('lobby').catch((e) => e)
  assert.deepEqual([gone.kind, gone.code], ['not_found', 'no_such_queue'])
  // Gap-free: durations in seconds; voidExtra written into the void documents.
  const client = await driver()
  try {
    const name = unique('void_extra')
    const g = await d.ensureGapless('inv', { collection: name, field: 'n', leaseSeconds: 2.5, maxLeaseSeconds: 60, waitSeconds: 1, voidExtra: { status: 'VOID', total: 0 } })
    assert.equal((await g.peek()).maxLeaseSeconds, 60)
    assert.equal((await g.alter({ maxLeaseSeconds: 0.5 })).maxLeaseSeconds, 0.5)
    await g.void(1, 'misprint')
    const voided = await client.db(DATABASE).collection(name).findOne({ n: 1 })
    assert.deepEqual([voided.status, voided.total], ['VOID', 0])
    await assert.rejects(d.ensureGapless('bad', { collection: name, field: 'n', leaseSeconds: -1 }), /invalid leaseSeconds: -1 seconds is not a duration/)
    await assert.rejects(d.ensureGapless('bad', { collection: name, field: 'n', voidExtra: 'VOID' }), /invalid voidExtra: "VOID" is not an object/)
    // A release answers the library's shape: a stalled holder's number, voided at once.
    let resume
    const stalled = g.issue(() => new Promise((_, reject) => { resume = () => reject(new Error('holder gone')) }))
    const other = await d.openGapless('inv')
    while ((await other.peek()).lease === null) await new Promise((r) => setTimeout(r, 10))
    assert.deepEqual(await other.release(2, 'holder killed', { force: true }), { outcome: 'voided', number: 2n })
    resume()
    await assert.rejects(stalled, (e) => e.kind === 'business_write')
    // The list answers states (as listQueues does); the handle deletes itself, with force.
    const listed = await d.listGapless()
    assert.deepEqual(listed.map((x) => [x.name, x.maxLeaseSeconds]), [['inv', 0.5]])
    await g.delete()
    assert.deepEqual(await d.listGapless(), [])
    const deleted = await g.peek().catch((x) => x)
    assert.deepEqual([deleted.kind, deleted.code], ['not_found', 'no_such_sequence'])
  } finally {
    await client.close()
  }
  // A listing's unreadable entry names its kind in snake_case as well.
  const e = await d.open('missing').catch((x) => x)
  assert.deepEqual([e.kind, e.name], ['not_found', 'NotFoundError'])
})

test('adopt: a sequence moved past mongoose-sequence, mongoengine, a counter or the documents, never backwards', async () => {
  const d = await connect('adopt', { caller: 'migration' })
  const client = await driver()
  try {
    const db = client.db(DATABASE)
    const counters = unique('adopt_counters')
    await db.collection(counters).insertMany([
      { id: 'number', reference_value: null, seq: 6 },
      { id: 'inv', reference_value: { shop: 'a b', year: 2026 }, seq: 12 },
      { id: 'inv', reference_value: { shop: 'c', year: 2026 }, seq: 3 },
    ])
    const s = await d.ensure('orders.number')
    const done = await d.adopt('orders.number', { mongooseSequence: 'number', collection: counters })
    assert.deepEqual(done.map((a) => [a.name, a.highest, a.moved, a.state.next]), [['orders.number', 6n, true, 7n]])
    assert.equal(await s.next(), 7n)
    assert.equal((await s.adopt({ mongooseSequence: 'number', collection: counters }))[0].moved, false, 'never backwards')
    assert.equal((await s.history()).filter((x) => x.op === 'adopt').length, 1)
    // Scoped counters become scopes of the template.
    await d.ensure('inv')
    const scoped = await d.adopt('inv', { mongooseSequence: 'inv', scoped: true, collection: counters })
    assert.deepEqual(scoped.map((a) => [a.name, a.highest]), [['inv@a%20b/2026', 12n], ['inv@c/2026', 3n]])
    assert.equal(await (await d.ensureScope('inv', 'a%20b/2026')).next(), 13n)
    // mongoengine's counter, a counter of one's own, the documents' highest.
    await db.collection('mongoengine.counters').insertOne({ _id: `${counters}.n`, next: 41 })
    await d.ensure('me')
    await d.adopt('me', { mongoengine: `${counters}.n` })
    assert.equal(await (await d.open('me')).next(), 42n)
    await db.collection(counters).insertOne({ _id: 'hand', last: 1000 })
    await d.ensure('hand')
    await d.adopt('hand', { counter: { collection: counters, filter: { _id: 'hand' }, field: 'last' } })
    assert.equal(await (await d.open('hand')).next(), 1001n)
    const docs = unique('adopt_docs')
    await db.collection(docs).insertMany([{ n: 3 }, { n: 17 }, { n: 'x' }])
    await d.ensure('docs')
    await d.adopt('docs', { highest: { collection: docs, field: 'n' } })
    assert.equal(await (await d.open('docs')).next(), 18n)
    // Refused: no kind, two kinds, a place a kind has not; a number outside the bounds.
    for (const [source, message] of [
      [{}, /give exactly one of `mongooseSequence`, `mongoengine`, `counter` and `highest`/],
      [{ mongooseSequence: 'a', highest: { collection: 'c', field: 'n' } }, /give exactly one/],
      [{ highest: { collection: docs, field: 'n' }, collection: 'x' }, /`collection` goes with `mongooseSequence` or `mongoengine`/],
      [{ mongoengine: 'x', scoped: true }, /`scoped` goes with `mongooseSequence` only/],
      [{ counter: { collection: 'c', filter: 5, field: 'n' } }, /is not an object/],
    ]) {
      await assert.rejects(d.adopt('docs', source), (e) => e instanceof InvalidInputError && message.test(e.message), JSON.stringify(source))
    }
    await d.ensure('small', { max: 10 })
    await assert.rejects(d.adopt('small', { highest: { collection: docs, field: 'n' } }), /up to 17, outside the bounds 0..=10 .*nothing was written/)
  } finally {
    await client.close()
  }
})
