'use strict'
// The Mongoose plugin, on Mongoose 8 and 9: it replaces mongoose-sequence 6.0.1 in a sample
// schema with no other change than the plugin line; scoped counters; max and cycle; a
// gap-free mode in which the number is used if and only if the save succeeds.
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, uri, connect, unique } = require('./helpers.js')

const { mongoosePlugin } = dispenser

/** Mongoose 8 (the package `mongoose`) and 9 (installed as `mongoose9`). */
const MONGOOSES = [['8', require('mongoose')], ['9', require('mongoose9')]]
const mongoose = MONGOOSES[0][1]

/** A fresh database of the test's own (mongoose-sequence keeps its counters in it). */
async function database(test, m = mongoose) {
  const name = unique(test).slice(0, 60)
  const connection = m.createConnection(uri(), { dbName: name })
  await connection.asPromise()
  return connection
}

/** The sample application's schema: orders numbered by whatever `numbering` adds. */
function orderSchema(numbering, m = mongoose) {
  const schema = new m.Schema({ customer: String, shop: String, total: Number })
  numbering(schema)
  return schema
}

/** The sample application: 20 orders saved at once, then read back by number. */
async function sampleApp(Order) {
  await Promise.all(Array.from({ length: 20 }, (_, i) => Order.create({ customer: `c${i}`, shop: 'main', total: i })))
  const one = await Order.findOne({ customer: 'c3' })
  one.total = 1000
  const number = one.number
  await one.save() // an update keeps its number
  assert.equal((await Order.findById(one._id)).number, number)
  return (await Order.find().sort({ number: 1 })).map((o) => o.number)
}

test('the plugin replaces mongoose-sequence in a sample schema: only the plugin line differs', async () => {
  const connection = await database('mongoose_seq')
  try {
    const AutoIncrement = require('mongoose-sequence')(connection)
    const theirs = connection.model('OrderA', orderSchema((s) => s.plugin(AutoIncrement, { inc_field: 'number' })))
    const before = await sampleApp(theirs)
    // Every save got a number. (Not always 20 distinct ones here: mongoose-sequence reads its
    // counter back without a projection, which mongo-java-server answers outside its lock.)
    assert.equal(before.length, 20)
    assert.ok(before.every((n) => Number.isInteger(n) && n > 0), String(before))

    const d = await connect('mongoose_plugin')
    const ours = connection.model('OrderB', orderSchema((s) => s.plugin(mongoosePlugin, { dispenser: d, field: 'number' })))
    const after = await sampleApp(ours)
    assert.deepEqual(after, Array.from({ length: 20 }, (_, i) => i + 1))
    assert.equal(typeof after[0], 'number')
  } finally {
    await connection.close()
  }
})

for (const [major, m] of MONGOOSES) {
test(`Mongoose ${major}: scoped counters from document fields, and max with cycle`, async () => {
  const connection = await database(`mongoose${major}_scope`, m)
  try {
    const d = await connect('mongoose_scope')
    const Ticket = connection.model('Ticket', orderSchema((s) =>
      s.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'tickets', scope: ['shop', 'customer'], spec: { max: 9, cycle: true } }), m))
    await Promise.all(Array.from({ length: 25 }, () => Ticket.create({ shop: 'a/b', customer: 'x' })))
    await Promise.all(Array.from({ length: 3 }, () => Ticket.create({ shop: 'a', customer: 'b/x' })))
    const counts = new Map()
    for (const t of await Ticket.find({ shop: 'a/b' })) counts.set(t.number, (counts.get(t.number) || 0) + 1)
    // 1 … 9, 0, 1 …: 25 tickets, each value 2 or 3 times, none outside 0..9.
    assert.deepEqual([...counts.keys()].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert.deepEqual([...counts.values()].reduce((a, b) => a + b), 25)
    assert.ok([...counts.values()].every((c) => c === 2 || c === 3))
    const other = (await Ticket.find({ shop: 'a' })).map((t) => t.number).sort()
    assert.deepEqual(other, [1, 2, 3], 'a scope of its own (the keys do not run together)')
    const scopes = (await d.list({ scopesOf: 'tickets' })).map((s) => s.name)
    assert.deepEqual(scopes, ['tickets@a%2Fb/x', 'tickets@a/b%2Fx'])
    await assert.rejects(Ticket.create({ customer: 'x' }), (e) => e.code === 'invalid_input' && /scope field "shop"/.test(e.message))
  } finally {
    await connection.close()
  }
})

test(`Mongoose ${major}: gap-free mode: a number is used if and only if its save succeeds`, async () => {
  const dbName = unique(`mongoose${major}_gapless`).slice(0, 60)
  const connection = m.createConnection(uri(), { dbName })
  await connection.asPromise()
  try {
    const d = await dispenser.Dispenser.connect(uri(), { database: dbName })
    const schema = new m.Schema({ email: { type: String, unique: true }, total: Number })
    schema.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'invoices', gapless: true })
    const Invoice = connection.model('Invoice', schema)
    await Invoice.init() // the unique index on email
    const outcomes = await Promise.allSettled(Array.from({ length: 30 }, (_, i) =>
      // Every third customer is a repeat: that save fails on the email's unique index.
      Invoice.create({ email: `c${i % 3 === 2 ? i - 1 : i}@example.com`, total: i })))
    const failed = outcomes.filter((o) => o.status === 'rejected')
    assert.equal(failed.length, 10)
    for (const f of failed) assert.equal(f.reason.code, 11000, String(f.reason))
    const numbers = (await Invoice.find().sort({ number: 1 })).map((x) => x.number)
    assert.deepEqual(numbers, Array.from({ length: 20 }, (_, i) => i + 1))
    const g = await d.openGapless('invoices')
    const audit = await g.audit({ from: 1 })
    assert.equal(audit.clean, true)
    assert.deepEqual([audit.numbers, audit.missing, audit.duplicated], [20n, 0n, 0n])
    // The next save gets 21. (The stored state may still say 20 for a moment: the plugin's
    // handle confirms its last number in the background, once its burst stops.)
    assert.equal((await Invoice.create({ email: 'last@example.com', total: 0 })).number, 21)
  } finally {
    await connection.close()
  }
})
}

test('bad plugin options are refused when the schema is made', () => {
  const schema = new mongoose.Schema({ n: Number })
  assert.throws(() => schema.plugin(mongoosePlugin, { field: 'n' }), /`dispenser` is required/)
  assert.throws(() => schema.plugin(mongoosePlugin, { dispenser: {}, field: '' }), /`field` must be/)
  assert.throws(() => schema.plugin(mongoosePlugin, { dispenser: {}, field: 'n', gapless: true, scope: ['x'] }), /not supported/)
  for (const [block, shown] of [[0, '0'], [-3, '-3'], [1.5, '1.5'], ['10', '"10"'], [true, 'true'], [2 ** 60, String(2 ** 60)]]) {
    assert.throws(() => new mongoose.Schema({ n: Number }).plugin(mongoosePlugin, { dispenser: {}, field: 'n', block }),
      (e) => e.code === 'invalid_input' && e.message.includes('`block` must be a block size of 1 or more') && e.message.endsWith(`not ${shown}`), String(block))
  }
  assert.throws(() => new mongoose.Schema({ n: Number }).plugin(mongoosePlugin, { dispenser: {}, field: 'n', block: 5, gapless: true }), /gap-free .* `block` is for plain mode/)
  assert.throws(() => new mongoose.Schema({ n: Number }).plugin(mongoosePlugin, { dispenser: {}, field: 'n', block: 5, existing: 'keep' }), /another process's block/)
  assert.throws(() => new mongoose.Schema({ n: Number }).plugin(mongoosePlugin, { dispenser: {}, field: 'n', blocks: 5 }), /unknown option `blocks`; did you mean `block`\?/)
})

/** A model numbered by the plugin with `options`, on a fresh database and dispenser. */
async function numbered(test, options) {
  const connection = await database(test)
  const d = await connect(test)
  const Order = connection.model('Order', orderSchema((s) => s.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'orders', ...options })))
  return { connection, d, Order }
}

test('by default saves take their numbers from a block: reserved ahead, given back by close(), and a reset hands none of it out', async () => {
  const { connection, d, Order } = await numbered('mongoose_block', {})
  try {
    const saved = []
    for (let i = 0; i < 3; i++) saved.push((await Order.create({ total: i })).number)
    assert.deepEqual(saved, [1, 2, 3])
    const reserved = (await d.open('orders').then((s) => s.peek())).next
    assert.ok(reserved > 4n, `a block reserved ahead: the stored next is ${reserved}`)
    // close() gives back every plugin's blocks in the process (this test's among them).
    const report = await mongoosePlugin.close()
    assert.ok(report.givenBack >= reserved - 4n, `${report.givenBack} given back`)
    assert.equal(report.lost, 0n)
    assert.equal((await d.open('orders').then((s) => s.peek())).next, 4n, 'the tail given back')
    assert.deepEqual(await mongoosePlugin.close(), { givenBack: 0n, lost: 0n }, 'nothing held any more')
    // The next saves open a new block.
    assert.equal((await Order.create({ total: 9 })).number, 4)
    // A reset: the block this process holds is given back first, so the next save gets the
    // start, not 5; numbers reserved before the reset are not handed out after it.
    await Order.counterReset('orders')
    const after = []
    for (let i = 0; i < 12; i++) after.push((await Order.create({ total: i })).number)
    assert.deepEqual(after, Array.from({ length: 12 }, (_, i) => i + 1))
    await mongoosePlugin.close()
  } finally {
    await connection.close()
  }
})

test('a number another process saves while the plugin checks the collection is no reason to refuse it', async () => {
  const { connection, d, Order } = await numbered('mongoose_check_race', {})
  try {
    // Another process draws and saves its number between the plugin's reads: the check reads
    // the collection first and the sequence's next after, so that number is behind the next.
    // (Read the other way round, two processes starting at once refused each other's numbers.)
    const findOne = Order.collection.findOne.bind(Order.collection)
    let raced = false
    Order.collection.findOne = async (...args) => {
      if (!raced) {
        raced = true
        const n = await (await d.open('orders')).next()
        await connection.collection('orders').insertOne({ total: 0, number: Number(n) })
      }
      return findOne(...args)
    }
    assert.equal((await Order.create({ total: 1 })).number, 2)
    assert.ok(raced)
    await mongoosePlugin.close()
  } finally {
    await connection.close()
  }
})

test('block: null draws in each save: nothing is reserved ahead', async () => {
  const { connection, d, Order } = await numbered('mongoose_noblock', { block: null })
  try {
    await Promise.all(Array.from({ length: 5 }, (_, i) => Order.create({ total: i })))
    assert.equal((await d.open('orders').then((s) => s.peek())).next, 6n)
  } finally {
    await connection.close()
  }
})

test('a program that ends by running out of work gives its block back, and two processes share a sequence without a duplicate', async () => {
  const dbName = unique('mongoose_exit').slice(0, 60)
  const script = `
const mongoose = require('mongoose')
const { Dispenser, mongoosePlugin } = require(process.env.DISPENSER_PACKAGE)
;(async () => {
  const connection = mongoose.createConnection(process.env.URI, { dbName: process.env.DB })
  const d = await Dispenser.connect(process.env.URI, { database: process.env.DB })
  const schema = new mongoose.Schema({ total: Number })
  schema.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'orders' })
  const Order = connection.model('Order', schema)
  await Promise.all(Array.from({ length: Number(process.env.SAVES) }, (_, i) => Order.create({ total: i })))
  await connection.close()
})()`
  const { spawn } = require('node:child_process')
  const run = (saves) => new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], {
      env: { ...process.env, DISPENSER_PACKAGE: require('./helpers.js').PACKAGE, URI: uri(), DB: dbName, SAVES: String(saves) },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let err = ''
    child.stderr.on('data', (c) => (err += c))
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
    child.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, err }) })
  })
  const connection = mongoose.createConnection(uri(), { dbName })
  await connection.asPromise()
  try {
    const one = await run(3)
    assert.deepEqual([one.code, one.signal], [0, null], one.err)
    const d = await dispenser.Dispenser.connect(uri(), { database: dbName })
    assert.equal((await d.open('orders').then((s) => s.peek())).next, 4n, 'the block given back at the end')
    const both = await Promise.all([run(60), run(60)])
    for (const r of both) assert.deepEqual([r.code, r.signal], [0, null], r.err)
    const numbers = (await connection.collection('orders').find().toArray()).map((o) => o.number)
    assert.equal(numbers.length, 123)
    assert.equal(new Set(numbers).size, 123, 'a number saved twice')
  } finally {
    await connection.dropDatabase()
    await connection.close()
  }
})
