'use strict'
// Numbers that fit the app: `numbers: 'number'` answers JavaScript numbers everywhere (and
// refuses a number past 2^53 - 1); in both modes every answer serialises with JSON.stringify,
// so Express's res.json sends it.
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, connect, driver, unique, DATABASE, uri } = require('./helpers.js')

const { InvalidInputError } = dispenser
const MAX = Number.MAX_SAFE_INTEGER

/** An Express app on a free port answering `routes` ({ path: async (req) => body }); its base URL. */
async function serve(routes) {
  const express = require('express')
  const app = express()
  for (const [path, handler] of Object.entries(routes)) {
    app.get(path, async (req, res, next) => {
      try {
        res.json(await handler(req))
      } catch (e) {
        next(e)
      }
    })
  }
  // Express's own error answer (a 500) for an error a handler passed on.
  app.use((e, req, res, next) => res.status(500).json({ error: String(e.message) }))
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) }
}

async function get(base, path) {
  const r = await fetch(base + path)
  return [r.status, await r.json()]
}

test("numbers: 'number' answers JavaScript numbers from every handle, and refuses one past 2^53 - 1", async () => {
  const d = await connect('numbers', { numbers: 'number' })
  assert.equal(d.numbers, 'number')
  assert.equal(d.withCaller('w').numbers, 'number')
  const s = await d.ensure('orders')
  const n = await s.next()
  assert.equal(n, 1)
  assert.equal(n + 1, 2, 'arithmetic with numbers')
  assert.equal(JSON.stringify({ id: n }), '{"id":1}')
  const run = await s.nextN(3)
  assert.deepEqual([run.first, run.last, run.count, run.step, [...run], run.toArray()], [2, 4, 3, 1, [2, 3, 4], [2, 3, 4]])
  assert.equal(JSON.stringify(run), '[2,3,4]')
  const state = await s.peek()
  assert.deepEqual([state.value, state.next, typeof state.version, state.min], [4, 5, 'number', 0])
  // The bound of an unbounded sequence, and what is left of it, stay exact bigints.
  assert.deepEqual([state.max, typeof state.remaining], [2n ** 63n - 1n, 'bigint'])
  assert.equal(JSON.parse(JSON.stringify(state)).max, '9223372036854775807')
  assert.equal(typeof s.stats().issued, 'number')
  assert.equal(typeof s.remainingHint(), 'bigint', 'what is left of an unbounded sequence')
  // Every kind of handle.
  const q = await d.ensureQueue('lobby')
  assert.deepEqual([(await q.take()).ticket, (await q.take({ count: 2 })).map((t) => t.serial)], [1, [2, 3]])
  await d.ensure('daily')
  const today = await d.openDaily('daily', 'UTC').next()
  assert.deepEqual([typeof today.scope, today.number], ['string', 1])
  const blocks = await d.openBlocks('orders', { size: 4 })
  assert.equal(typeof (await blocks.next()), 'number')
  assert.equal(typeof blocks.tryNext(), 'number')
  await blocks.close()
  const striped = await d.ensureStriped('wide', 2)
  assert.equal(typeof (await striped.next()), 'number')
  const client = await driver()
  try {
    const g = await d.ensureGapless('inv', { collection: unique('numbers_inv'), field: 'n' })
    const seen = []
    const issued = await g.issue(async (k) => seen.push(k))
    assert.deepEqual([seen, issued.number, (await g.peek()).next], [[1], 1, 2])
  } finally {
    await client.close()
  }
  // The last safe number is drawn; the next is refused, naming it: the draw was made (a gap).
  const edge = await d.ensure('edge', { start: MAX - 1 })
  assert.deepEqual([await edge.next(), await edge.next()], [MAX - 1, MAX])
  const past = await edge.next().catch((e) => e)
  assert.ok(past instanceof InvalidInputError, String(past))
  assert.deepEqual([past.code, past.written], ['unsafe_integer', 'written'])
  assert.match(past.message, /^`next` answered 9007199254740992, past Number\.MAX_SAFE_INTEGER \(2\^53 - 1\).*numbers: 'bigint'.*a gap\)$/)
  const read = await edge.peek().catch((e) => e)
  assert.deepEqual([read.code, read.written], ['unsafe_integer', 'nothing_written'], 'a state whose value is past it: refused too')
  const big = await d.ensure('big', { start: 2n ** 60n })
  await assert.rejects(big.nextN(2), { code: 'unsafe_integer' })
  // The same sequence through a dispenser of the default mode: exact bigints.
  const exact = await dispenser.Dispenser.connect(uri(), { database: DATABASE, collection: d.collection })
  assert.equal(exact.numbers, 'bigint')
  assert.equal(await (await exact.open('edge')).next(), 9007199254740993n, 'past the refused one, a gap')
  await assert.rejects(connect('numbers_bad', { numbers: 'int' }), /invalid numbers: "int"; give "bigint"/)
})

test('every answer serialises with JSON.stringify, and Express sends it: bigints as numbers, past 2^53 - 1 as strings', async () => {
  const d = await connect('json')
  const dn = await connect('json', { numbers: 'number' })
  const s = await d.ensure('orders')
  const sn = await dn.ensure('orders')
  const q = await d.ensureQueue('lobby')
  const app = await serve({
    '/bigint/next': async () => ({ id: await s.next() }),
    '/bigint/run': async () => ({ ids: await s.nextN(3) }),
    '/bigint/state': async () => s.peek(),
    '/bigint/list': async () => d.list(),
    '/bigint/ticket': async () => q.take(),
    '/bigint/queue': async () => q.peek(),
    '/bigint/stats': async () => s.stats(),
    '/number/next': async () => ({ id: await sn.next() }),
    '/number/state': async () => sn.peek(),
  })
  try {
    // A bare bigint is what JSON cannot take: Express answers 500 (connect with numbers: 'number').
    const [status, body] = await get(app.base, '/bigint/next')
    assert.equal(status, 500)
    assert.match(body.error, /BigInt/)
    assert.deepEqual(await get(app.base, '/bigint/run'), [200, { ids: [2, 3, 4] }])
    const [, state] = await get(app.base, '/bigint/state')
    assert.deepEqual([state.value, state.next, state.max, state.usage.remaining], [4, 5, '9223372036854775807', '9223372036854775803'])
    assert.deepEqual((await get(app.base, '/bigint/list'))[1].map((x) => [x.name, x.value]), [['orders', 4]])
    const [, ticket] = await get(app.base, '/bigint/ticket')
    assert.deepEqual([ticket.ticket, ticket.position, ticket.label], [1, 0, '1'])
    const [, lobby] = await get(app.base, '/bigint/queue')
    assert.deepEqual([lobby.waiting, lobby.waitingList], [1, [{ ticket: 1, label: '1', serial: 1 }]])
    assert.equal((await get(app.base, '/bigint/stats'))[1].issued, 4)
    assert.deepEqual(await get(app.base, '/number/next'), [200, { id: 1 }])
    assert.equal((await get(app.base, '/number/state'))[1].next, 2)
  } finally {
    await app.close()
  }
  // An answer's parts keep their toJSON when an app sends them on their own.
  const state = await s.peek()
  assert.equal(JSON.stringify({ usage: state.usage }).includes('"remaining":"9223372036854775803"'), true)
  assert.equal(JSON.parse(JSON.stringify({ entry: (await s.history())[0] })).entry.version, undefined)
  assert.equal(JSON.parse(JSON.stringify((await s.history())[0])).op, 'create')
})

test('Mongoose Number paths take a number-mode draw as it is', async () => {
  const mongoose = require('mongoose')
  const dbName = unique('numbers_mongoose').slice(0, 60)
  const connection = mongoose.createConnection(uri(), { dbName })
  await connection.asPromise()
  try {
    const d = await connect('numbers_mongoose', { numbers: 'number' })
    const seq = await d.ensure('orders')
    const Order = connection.model('Order', new mongoose.Schema({ number: Number }))
    const created = await Order.create({ number: await seq.next() })
    assert.equal(created.number, 1)
    const exact = await connect('numbers_mongoose_big')
    const big = await exact.ensure('orders')
    await assert.rejects(Order.create({ number: await big.next() }), /Cast to Number failed for value "1n"|Cast to Number failed/)
  } finally {
    await connection.close()
  }
})

test('counts, timeouts and 64-bit values are read exactly as given, and what is refused is named as JavaScript writes it', async () => {
  const { ExhaustedError } = dispenser
  const d = await connect('exact')
  const s = await d.ensure('counted')
  // A negative bigint count is refused; one past 2^63 - 1 is a count no sequence can give.
  await assert.rejects(s.nextN(-5n), (e) => e instanceof InvalidInputError && e.message === 'invalid count: -5 is negative; give 0 or more')
  await assert.rejects(s.nextN(2n ** 63n), (e) => e instanceof ExhaustedError && /9223372036854775808 number\(s\) requested/.test(e.message))
  assert.equal((await s.peek()).value, 0n)
  // The largest safe integer as a number is taken exactly; the next one is refused.
  const safe = await d.ensure('safe', { start: MAX })
  assert.equal(await safe.next(), BigInt(MAX))
  await assert.rejects(d.ensure('unsafe', { start: MAX + 1 }), (e) => e instanceof InvalidInputError && /invalid start: 9007199254740992 is not a safe integer/.test(e.message))
  await assert.rejects(d.ensure('inf', { start: -Infinity }), (e) => /invalid start: -Infinity is not a safe integer/.test(e.message))
  // A bigint of two words that fits no i64 (nor an i128) is not shown as a wrong number.
  await assert.rejects(d.ensure('wide', { max: 2n ** 127n }), (e) => e instanceof InvalidInputError && e.message === 'invalid max: the bigint does not fit in a signed 64-bit integer')
  // Milliseconds: a negative, NaN or infinite timeout is refused naming it; 0 is the core's
  // to refuse; 1 500 ms is 1.5 s.
  for (const [ms, shown] of [[-1, '-1'], [NaN, 'NaN'], [Infinity, 'Infinity']]) {
    await assert.rejects(dispenser.Dispenser.connect(uri(), { operationTimeoutMs: ms }), (e) => e instanceof InvalidInputError && e.message === `invalid operationTimeoutMs: ${shown} ms is not a duration; give 0 or more milliseconds`)
  }
  await assert.rejects(dispenser.Dispenser.connect(uri(), { operationTimeoutMs: 0 }), (e) => e instanceof InvalidInputError && /operation_timeout: must be longer than 0/.test(e.message))
  const report = await d.doctor({ timeLimitMs: 1500 })
  assert.equal(report.timeLimitSeconds, 1.5)
})
