'use strict'
// Switching to the Mongoose plugin repeats nothing: a collection mongoose-sequence numbered
// goes on from its counters (scoped ones into scopes) with the plugin line changed alone; a
// collection already numbered is refused unless told what to adopt; every mongoose-sequence
// option is honoured or refused; one sequence per model and field; a number a document
// carries is never overwritten; the path's type is what gets written. On Mongoose 8 and 9
// (mongoose-sequence itself works with 8 only).
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, uri, connect, unique } = require('./helpers.js')

const { mongoosePlugin, ConflictError, InvalidInputError } = dispenser
const MONGOOSES = [['8', require('mongoose')], ['9', require('mongoose9')]]
const mongoose = MONGOOSES[0][1]

async function database(test, m = mongoose) {
  const connection = m.createConnection(uri(), { dbName: unique(test).slice(0, 60) })
  await connection.asPromise()
  return connection
}

/** Saves `count` documents one after another (mongoose-sequence's counter reads back racily here). */
async function saveInTurn(Model, count, fields = () => ({})) {
  for (let i = 0; i < count; i++) await Model.create({ customer: `c${i}`, ...fields(i) })
}

/** Every number of `field` in the collection of `Model`, sorted; with no number twice. */
async function numbers(Model, field = 'number', filter = {}) {
  const all = (await Model.collection.find(filter).toArray()).map((d) => Number(d[field]))
  assert.equal(new Set(all).size, all.length, `a number repeated: ${all}`)
  return all.sort((a, b) => a - b)
}

test('a collection numbered by mongoose-sequence, switched by its plugin line alone, repeats no number', async () => {
  const connection = await database('switch_ms')
  try {
    const AutoIncrement = require('mongoose-sequence')(connection)
    const before = new mongoose.Schema({ customer: String })
    before.plugin(AutoIncrement, { inc_field: 'number' })
    const Old = connection.model('Old', before, 'orders')
    await saveInTurn(Old, 6)
    const counter = await connection.collection('counters').findOne({ id: 'number' })
    const old = await numbers(Old)
    assert.equal(old.length, 6)
    assert.equal(old.at(-1), counter.seq)

    const d = await connect('switch_ms')
    const after = new mongoose.Schema({ customer: String })
    after.plugin(mongoosePlugin, { dispenser: d, inc_field: 'number' }) // the one line changed
    const New = connection.model('New', after, 'orders')
    await Promise.all(Array.from({ length: 20 }, (_, i) => New.create({ customer: `n${i}` })))
    const all = await numbers(New)
    assert.equal(all.length, 26)
    assert.deepEqual(all.slice(6), Array.from({ length: 20 }, (_, i) => counter.seq + 1 + i), 'the plugin goes on past the counter')
    // One sequence per model and field, adopted once, recorded in its history.
    const history = await d.history('orders.number')
    assert.deepEqual(history.map((e) => [e.op, e.params.source && e.params.source.kind, e.params.highest]), [['create', undefined, undefined], ['adopt', 'mongoose-sequence', BigInt(counter.seq)]])
  } finally {
    await connection.close()
  }
})

test('scoped counters of mongoose-sequence (reference_fields) are adopted into the scopes', async () => {
  const connection = await database('switch_scoped')
  try {
    const AutoIncrement = require('mongoose-sequence')(connection)
    const fields = { shop: String, year: Number, customer: String }
    const before = new mongoose.Schema(fields)
    before.plugin(AutoIncrement, { inc_field: 'n', id: 'inv', reference_fields: ['year', 'shop'] })
    const Old = connection.model('Old', before, 'invoices')
    await saveInTurn(Old, 4, () => ({ shop: 'a&b', year: 2026 }))
    await saveInTurn(Old, 2, () => ({ shop: 'c', year: 2026 }))
    const seq = async (shop) => (await connection.collection('counters').findOne({ id: 'inv', 'reference_value.shop': shop })).seq

    const d = await connect('switch_scoped')
    const after = new mongoose.Schema(fields)
    after.plugin(mongoosePlugin, { dispenser: d, inc_field: 'n', id: 'inv', reference_fields: ['year', 'shop'] })
    const New = connection.model('New', after, 'invoices')
    await Promise.all(['a&b', 'a&b', 'c', 'new'].map((shop) => New.create({ shop, year: 2026 })))
    for (const [shop, added] of [['a&b', 2], ['c', 1]]) {
      const mine = await numbers(New, 'n', { shop })
      const last = await seq(shop)
      assert.deepEqual(mine.slice(-added), Array.from({ length: added }, (_, i) => last + 1 + i), `scope ${shop}: ${mine}`)
    }
    assert.deepEqual(await numbers(New, 'n', { shop: 'new' }), [1])
    // The scopes are named as mongoose-sequence keeps the reference values: by field name.
    assert.deepEqual((await d.list({ scopesOf: 'inv' })).map((s) => s.name), ['inv@a%26b/2026', 'inv@c/2026', 'inv@new/2026'])
  } finally {
    await connection.close()
  }
})

for (const [major, m] of MONGOOSES) {
  test(`Mongoose ${major}: a collection already numbered is refused until told what to adopt; nothing saved`, async () => {
    const connection = await database(`switch${major}_refused`, m)
    try {
      const d = await connect(`switch${major}_refused`)
      await connection.collection('orders').insertMany([{ number: 1 }, { number: 2 }, { number: 41 }])
      const schema = new m.Schema({ customer: String })
      schema.plugin(mongoosePlugin, { dispenser: d, field: 'number' })
      const Order = connection.model('Order', schema, 'orders')
      const e = await Order.create({ customer: 'x' }).catch((x) => x)
      assert.ok(e instanceof ConflictError, String(e))
      assert.equal(e.code, 'already_numbered')
      assert.match(e.message, /collection "orders" already holds number 41 in "number", at or past 1, the next number of sequence "orders\.number".*adopt: 'mongoose-sequence'.*adopt: 'highest'.*dispenser\.adopt\("orders\.number", \{ highest: \{ collection: "orders", field: "number" \} \}\)`; nothing was saved$/)
      assert.equal(await Order.countDocuments(), 3)
      // Adopted by hand: the next save goes on (a refusal is checked again).
      await d.adopt('orders.number', { highest: { collection: 'orders', field: 'number' }, database: connection.name })
      assert.equal((await Order.create({ customer: 'y' })).number, 42)
      // A fraction stands in the way of the whole number it passed.
      await connection.collection('fractions').insertMany([{ number: 3.5 }])
      const f = new m.Schema({ customer: String })
      f.plugin(mongoosePlugin, { dispenser: d, field: 'number' })
      await assert.rejects(connection.model('Fraction', f, 'fractions').create({}), /already holds number 3 in "number", at or past 1/)
      // Or by the plugin's option, on first use.
      await connection.collection('tickets').insertMany([{ number: 7 }])
      const t = new m.Schema({ customer: String })
      t.plugin(mongoosePlugin, { dispenser: d, field: 'number', adopt: 'highest' })
      const Ticket = connection.model('Ticket', t, 'tickets')
      assert.deepEqual((await Promise.all([Ticket.create({}), Ticket.create({})])).map((x) => x.number).sort(), [8, 9])
    } finally {
      await connection.close()
    }
  })

  test(`Mongoose ${major}: mongoose-sequence's options are honoured, or refused naming the replacement`, async () => {
    const connection = await database(`switch${major}_options`, m)
    try {
      const d = await connect(`switch${major}_options`)
      const make = (options, fields = { customer: String, shop: String }) => {
        const s = new m.Schema(fields)
        s.plugin(mongoosePlugin, { dispenser: d, ...options })
        return s
      }
      // start_seq and inc_amount: the spec's start and step; id: the sequence's name.
      const Stepped = connection.model('Stepped', make({ inc_field: 'n', id: `stepped${major}`, start_seq: 100, inc_amount: 5 }))
      assert.deepEqual([(await Stepped.create({})).n, (await Stepped.create({})).n], [100, 105])
      assert.equal((await d.peek(`stepped${major}`)).step, 5n)
      // disable_hooks: nothing numbered on save; doc.setNext(id) numbers and saves (callback too).
      const Manual = connection.model('Manual', make({ inc_field: 'n', id: `manual${major}`, disable_hooks: true }))
      const plain = await Manual.create({ customer: 'a' })
      assert.equal(plain.n, undefined)
      assert.equal((await plain.setNext(`manual${major}`)).n, 1)
      const other = new Manual({ customer: 'b' })
      const saved = await new Promise((resolve, reject) => other.setNext(`manual${major}`, (err, doc) => (err ? reject(err) : resolve(doc))))
      assert.equal(saved.n, 2)
      assert.equal((await Manual.findById(other._id)).n, 2)
      await assert.rejects(plain.setNext('nothing'), /no sequence "nothing" numbers this schema/)
      // exclusive: a second schema on one id throws as mongoose-sequence does, unless both share.
      assert.throws(() => make({ inc_field: 'n', id: `stepped${major}` }), (e) => e instanceof ConflictError && /^Counter already defined: sequence "stepped\d"/.test(e.message))
      const SharedA = connection.model('SharedA', make({ inc_field: 'n', id: `shared${major}`, exclusive: false }))
      const SharedB = connection.model('SharedB', make({ field: 'n', sequence: `shared${major}`, shared: true }))
      assert.deepEqual([(await SharedA.create({})).n, (await SharedB.create({})).n, (await SharedA.create({})).n], [1, 2, 3])
      // collection_name: where its counters are, adopted from there.
      await connection.collection('my_counters').insertOne({ id: `elsewhere${major}`, reference_value: null, seq: 30 })
      const Elsewhere = connection.model('Elsewhere', make({ inc_field: 'n', id: `elsewhere${major}`, collection_name: 'my_counters' }))
      assert.equal((await Elsewhere.create({})).n, 31)
      // counterReset: the core's reset to the start, forced (numbers are issued again).
      const states = await Stepped.counterReset(`stepped${major}`)
      assert.deepEqual(states.map((s) => s.next), [100n])
      assert.equal((await Stepped.create({})).n, 100)
      const Scoped = connection.model('Scoped', make({ inc_field: 'n', id: `scoped${major}`, reference_fields: 'shop' }))
      await Promise.all(['a', 'a', 'b'].map((shop) => Scoped.create({ shop })))
      await new Promise((resolve, reject) => Scoped.counterReset(`scoped${major}`, { shop: 'a' }, (err) => (err ? reject(err) : resolve())))
      assert.deepEqual([(await Scoped.create({ shop: 'a' })).n, (await Scoped.create({ shop: 'b' })).n], [1, 2])
      // Refused: parallel_hooks, two names of one option, an unknown key, a bad value.
      for (const [options, message] of [
        [{ inc_field: 'n', parallel_hooks: false }, /`parallel_hooks` has no equivalent/],
        [{ field: 'n', inc_field: 'n' }, /`field` and mongoose-sequence's `inc_field` are one option: give one/],
        [{ field: 'n', start_seq: 5, spec: { start: 5 } }, /`spec.start` and mongoose-sequence's `start_seq` are one option/],
        [{ field: 'n', start_sequence: 5 }, /unknown option `start_sequence`; did you mean `start_seq`\?/],
        [{ field: 'n', spec: { maxx: 5 } }, /unknown option `maxx` of the mongoosePlugin `spec`; did you mean `max`\?/],
        [{ field: 'n', collection_name: 'c', adopt: false }, /`collection_name` says where its counters are/],
        [{ field: 'n', adopt: { mongooseSequance: 'n' } }, /unknown option `mongooseSequance`|did you mean `mongooseSequence`/],
        [{ field: 'n', existing: 'overwrite' }, /`existing` is "refuse" \(the default\) or "keep"/],
        [{ field: 'customer' }, /the path "customer" is a String; the plugin writes numbers into a Number path/],
      ]) {
        assert.throws(() => make(options), (e) => e instanceof InvalidInputError && message.test(e.message), JSON.stringify(options))
      }
    } finally {
      await connection.close()
    }
  })

  test(`Mongoose ${major}: one sequence per model and field; a carried number refused or kept; the path's type written`, async () => {
    const connection = await database(`switch${major}_models`, m)
    try {
      const d = await connect(`switch${major}_models`)
      const schema = (options, fields = { customer: String }) => {
        const s = new m.Schema(fields)
        s.plugin(mongoosePlugin, { dispenser: d, ...options })
        return s
      }
      // Two models numbering `number`: two sequences, each from 1.
      const A = connection.model('A', schema({ field: 'number' }), 'as')
      const B = connection.model('B', schema({ field: 'number' }), 'bs')
      assert.deepEqual([(await A.create({})).number, (await B.create({})).number, (await A.create({})).number], [1, 1, 2])
      assert.deepEqual((await d.list()).map((s) => s.name), ['as.number', 'bs.number'])
      // Another schema on the collection and field of A: refused, as a second counter would be.
      const A2 = connection.model('A2', schema({ field: 'number' }), 'as')
      await assert.rejects(A2.create({}), /^ConflictError: Counter already defined: sequence "as\.number"/)
      // A new document that carries a number: refused, nothing saved; or kept, and moved past.
      await assert.rejects(A.create({ number: 500 }), (e) => e instanceof InvalidInputError && /already carries 500 in "number".*existing: 'keep'/.test(e.message))
      assert.equal(await A.countDocuments(), 2)
      const K = connection.model('K', schema({ field: 'number', existing: 'keep' }), 'ks')
      assert.deepEqual([(await K.create({ number: 10 })).number, (await K.create({})).number, (await K.create({ number: 3 })).number, (await K.create({})).number], [10, 11, 3, 12])
      // A BigInt path gets a bigint; a Number path refuses a number past 2^53 - 1.
      const Big = connection.model('Big', schema({ field: 'n', sequence: `big${major}`, spec: { start: 2n ** 60n } }, { n: BigInt }), 'big')
      assert.equal((await Big.create({})).n, 2n ** 60n)
      const Lossy = connection.model('Lossy', schema({ field: 'n', sequence: `lossy${major}`, spec: { start: 2n ** 60n } }), 'lossy')
      await assert.rejects(Lossy.create({}), /past 2\^53 - 1, which a Number path cannot hold exactly; make the path a BigInt/)
      // A number-mode dispenser numbers too.
      const dn = await connect(`switch${major}_models_n`, { numbers: 'number' })
      const ns = new m.Schema({ customer: String })
      ns.plugin(mongoosePlugin, { dispenser: dn, field: 'number' })
      assert.equal((await connection.model('N', ns, 'ns').create({})).number, 1)
    } finally {
      await connection.close()
    }
  })
}
