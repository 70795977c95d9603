'use strict'
// Sequences from JavaScript: the source documents' two tests, 1 000 concurrent callers,
// exact 64-bit numbers, runs, and the errors' classes and codes.
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, connect, concurrently } = require('./helpers.js')

const { InvalidInputError, NotFoundError, AlreadyExistsError, ConflictError, ExhaustedError, DispenserError } =
  dispenser

test('20 concurrent promises x 100 draws give 2000 distinct numbers', async () => {
  const d = await connect('distinct')
  const s = await d.ensure('orders')
  const drawn = (await Promise.all(Array.from({ length: 20 }, async () => {
    const mine = []
    for (let i = 0; i < 100; i++) mine.push(await s.next())
    return mine
  }))).flat()
  assert.equal(drawn.length, 2000)
  assert.equal(new Set(drawn).size, 2000)
  for (const n of drawn) assert.equal(typeof n, 'bigint')
  assert.deepEqual([...drawn].sort((a, b) => (a < b ? -1 : 1))[1999], 2000n)
})

test('with max 99 and cycle, 20 x 100 draws give each of the 100 values exactly 20 times', async () => {
  const d = await connect('cycle')
  const s = await d.ensure('tickets', { max: 99, cycle: true })
  const drawn = (await Promise.all(Array.from({ length: 20 }, async () => {
    const mine = []
    for (let i = 0; i < 100; i++) mine.push(await s.next())
    return mine
  }))).flat()
  const counts = new Map()
  for (const n of drawn) counts.set(n, (counts.get(n) || 0) + 1)
  assert.equal(counts.size, 100)
  for (let v = 0n; v <= 99n; v++) assert.equal(counts.get(v), 20, `value ${v}`)
})

test('1000 concurrent callers each get a number of their own', async () => {
  const d = await connect('thousand')
  const s = await d.ensure('ids')
  const drawn = await Promise.all(Array.from({ length: 1000 }, () => s.next()))
  assert.equal(new Set(drawn).size, 1000)
  const stats = s.stats()
  assert.equal(stats.issued, 1000n)
  assert.ok(stats.writes < 1000n, `concurrent draws share writes: ${stats.writes} writes`)
})

test('numbers are exact over the whole 64-bit range, in and out', async () => {
  const d = await connect('wide')
  const top = 2n ** 63n - 1n
  const s = await d.ensure('top', { start: top - 2n, min: -(2n ** 63n), max: top })
  assert.deepEqual([await s.next(), await s.next(), await s.next()], [top - 2n, top - 1n, top])
  await assert.rejects(s.next(), (e) => e instanceof ExhaustedError && e.code === 'exhausted')
  const low = await d.ensure('low', { start: -(2n ** 63n) + 1n, step: -1, min: -(2n ** 63n), max: 0 })
  assert.equal(await low.next(), -(2n ** 63n) + 1n)
  assert.equal(await low.next(), -(2n ** 63n))
  // A number past 2^53 - 1 is refused, not rounded; so is a fraction, and a bigint past 64 bits.
  await assert.rejects(d.ensure('big', { start: 2 ** 60 }), (e) => e instanceof InvalidInputError && /invalid start/.test(e.message))
  await assert.rejects(d.ensure('frac', { step: 1.5 }), (e) => e instanceof InvalidInputError && /invalid step: 1.5/.test(e.message))
  await assert.rejects(d.ensure('huge', { max: 2n ** 64n }), (e) => e instanceof InvalidInputError && /invalid max: 18446744073709551616n does not fit/.test(e.message))
  // A value of the wrong type throws at once (napi-rs reads the arguments before the call).
  assert.throws(() => d.ensure('text', { max: '99' }), (e) => e instanceof InvalidInputError && e.code === 'invalid_input' && /SpecInput\.max/.test(e.message))
  const state = await s.peek()
  assert.equal(state.value, top)
  assert.equal(state.next, null)
})

test('a run is several numbers from one write, and iterates', async () => {
  const d = await connect('runs')
  const s = await d.ensure('batch', { step: 5 })
  const run = await s.nextN(4)
  assert.deepEqual([run.first, run.last, run.count, run.step], [1n, 16n, 4n, 5n])
  assert.deepEqual([...run], [1n, 6n, 11n, 16n])
  assert.equal(await s.next(), 21n)
  await assert.rejects(s.nextN(0), InvalidInputError)
})

test('errors are one class per kind, with the core code and a message naming what is wrong', async () => {
  const d = await connect('errors')
  const e1 = await d.open('missing').catch((e) => e)
  assert.ok(e1 instanceof NotFoundError && e1 instanceof DispenserError && e1 instanceof Error)
  assert.deepEqual([e1.code, e1.kind, e1.name, e1.message], ['no_such_sequence', 'NotFound', 'NotFoundError', 'no such sequence "missing"'])
  await d.create('taken')
  const e2 = await d.create('taken').catch((e) => e)
  assert.ok(e2 instanceof AlreadyExistsError)
  assert.equal(e2.code, 'already_exists')
  const e3 = await d.ensure('taken', { start: 5 }).catch((e) => e)
  assert.ok(e3 instanceof ConflictError)
  assert.equal(e3.code, 'spec_conflict')
  // What an alter changes is kept and told (issue 60): the handle's `altered`.
  const kept = await d.ensure('taken', { max: 5 })
  assert.deepEqual(kept.altered, [{ setting: 'max', stored: '9223372036854775807', asked: '5' }])
  assert.deepEqual((await d.open('taken')).altered, [])
  // ensure means one thing on every kind: a queue's mismatch is a ConflictError too (it was
  // an AlreadyExistsError), and a sequence's format is part of what ensure compares.
  await d.createQueue('lobby', { max: 99 })
  const eq = await d.ensureQueue('lobby', { min: 1, max: 99 }).catch((e) => e)
  assert.ok(eq instanceof ConflictError && eq.code === 'spec_conflict', eq.message)
  assert.equal(eq.message, 'queue "lobby" exists with another spec: min 0 (asked 1); nothing was written')
  assert.deepEqual((await d.ensureQueue('lobby', { max: 19 })).altered, [{ setting: 'max', stored: '99', asked: '19' }])
  await d.create('formatted', { format: 'Y-{n}' })
  const ef = await d.ensure('formatted', { format: 'X-{n}' })
  assert.deepEqual(ef.altered, [{ setting: 'format', stored: '"Y-{n}"', asked: '"X-{n}"' }])
  assert.equal((await d.peek('formatted')).format, 'Y-{n}')
  const e4 = await d.ensure('bad', { step: 0 }).catch((e) => e)
  assert.ok(e4 instanceof InvalidInputError)
  assert.equal(e4.message, 'invalid spec for sequence "bad": step must not be 0')
  const s = await d.open('taken')
  await s.next()
  await s.next()
  const e5 = await s.reset(1).catch((e) => e)
  assert.ok(e5 instanceof ConflictError && e5.code === 'would_go_backwards', e5.message)
  assert.equal((await s.reset(1, { force: true })).next, 1n)
  const e6 = await dispenser.Dispenser.connect('mongodb://user:secret@[bad').catch((e) => e)
  assert.ok(e6 instanceof InvalidInputError)
  assert.ok(!e6.message.includes('secret'), e6.message)
})

test('the admin operations: alter, advance, format, list, history, delete, doctor', async () => {
  const d = await connect('admin', { caller: 'node-test' })
  const s = await d.ensure('invoices')
  await s.next()
  assert.equal((await s.advanceTo(100)).next, 101n)
  assert.equal((await s.alter({ max: 999 })).max, 999n)
  assert.equal((await s.alter({ format: 'INV-{n:06}' })).format, 'INV-{n:06}')
  assert.equal((await d.peek('invoices')).format, 'INV-{n:06}')
  const names = (await d.list()).map((x) => x.name)
  assert.deepEqual(names, ['invoices'])
  const narrowed = await d.list({ matching: ['inv*'], named: ['invoices', 'gone'], limit: 5 })
  assert.deepEqual(narrowed.map((x) => x.name), ['invoices'])
  assert.deepEqual(await d.list({ after: 'invoices' }), [])
  const ops = (await d.history('invoices')).map((e) => [e.op, e.who, e.outcome])
  assert.deepEqual((await s.history({ limit: 1 })).map((e) => e.op), ['create'])
  assert.deepEqual(ops.map((o) => o[0]), ['create', 'advance-to', 'alter', 'alter'])
  assert.ok(ops.every((o) => o[1] === 'node-test' && o[2] === 'done'), JSON.stringify(ops))
  await s.delete()
  await assert.rejects(d.peek('invoices'), NotFoundError)
  const report = await d.doctor({ tasks: 2, increments: 20, swaps: 10 })
  assert.equal(report.fit, true, report.reason)
  assert.equal(report.probe.tasks, 2n)
  await assert.rejects(d.doctor({ tasks: 1 }), InvalidInputError)
})

test('scopes, daily sequences, blocks and stripes draw distinct numbers', async () => {
  const d = await connect('kinds')
  await d.ensure('tickets', { max: 999 })
  const a = await d.ensureScope('tickets', 'shop-a')
  const b = await d.ensureScope('tickets', 'shop-b')
  assert.deepEqual([await a.next(), await a.next(), await b.next()], [1n, 2n, 1n])
  assert.equal(a.name, 'tickets@shop-a')
  assert.deepEqual((await d.list({ scopesOf: 'tickets' })).map((x) => x.name), ['tickets@shop-a', 'tickets@shop-b'])
  const daily = d.openDaily('tickets', 'Europe/Paris')
  const first = await daily.next()
  assert.equal(first.scope, daily.today())
  assert.equal(first.number, 1n)
  await assert.rejects(async () => d.openDaily('tickets', 'Mars/Olympus'), InvalidInputError)

  await d.ensure('ids')
  const blocks = await d.openBlocks('ids', { size: 10, prefetch: null })
  const fromBlocks = await Promise.all(Array.from({ length: 25 }, () => blocks.next()))
  assert.equal(new Set(fromBlocks).size, 25)
  const closed = await blocks.close()
  assert.equal(closed.givenBack + closed.lost, 5n)
  const after = await (await d.open('ids')).next()
  assert.ok(!fromBlocks.includes(after))

  const striped = await d.ensureStriped('wide', 4)
  assert.equal(striped.stripes, 4)
  const fromStripes = await Promise.all(Array.from({ length: 200 }, () => striped.next()))
  assert.equal(new Set(fromStripes).size, 200)
  assert.equal((await striped.peek()).length, 4)
})

test('a queue: take, call from desks, recall, cancel, status', async () => {
  const d = await connect('queue')
  const q = await d.ensureQueue('lobby', { max: 9, format: 'A-{n:02}' })
  const t1 = await q.take()
  assert.deepEqual([t1.ticket, t1.label, t1.position], [1n, 'A-01', 0n])
  const family = await q.takeMany(2)
  assert.deepEqual(family.map((t) => t.ticket), [2n, 3n])
  const again = await q.take({ requestId: 'kiosk-1/1' })
  const replay = await q.take({ requestId: 'kiosk-1/1' })
  assert.deepEqual([replay.ticket, replay.replayed], [again.ticket, true])
  const called = await q.call({ desk: '2' })
  assert.deepEqual([called.ticket, called.desk], [1n, '2'])
  assert.equal((await q.recall({ desk: '2' })).ticket, 1n)
  // A desk lets go of its ticket with finish; then it shows none, for recall and finish.
  assert.equal((await q.finish({ desk: '2' })).ticket, 1n)
  for (const act of [(o) => q.recall(o), (o) => q.finish(o)]) {
    const none = await act({ desk: '2' }).catch((x) => x)
    assert.ok(none instanceof dispenser.QueueRefusedError && none.code === 'no_ticket_shown', none.message)
  }
  // Acts name a ticket by its identity (serial and incarnation, or its take's request id).
  const three = family[1]
  const gone = await q.cancel({ serial: three.serial, incarnation: three.incarnation })
  assert.deepEqual([gone.serial, gone.position], [three.serial, null])
  const status = await q.peek()
  assert.equal(status.waiting, 2n)
  const e = await q.call({ serial: three.serial }).catch((x) => x)
  assert.ok(e instanceof dispenser.QueueRefusedError && e.code === 'ticket_not_waiting', e.message)
  assert.match(e.message, /\(serial 3\) of queue "lobby" is not waiting: it was cancelled/)
  assert.equal((await q.waitingTicket(2)).serial, 2n)
  const givenUp = await q.cancel({ requestId: 'kiosk-1/1' })
  assert.deepEqual([givenUp.serial, givenUp.replayed], [again.serial, true])
  const twice = await q.cancel({ requestId: 'kiosk-1/1' }).catch((x) => x)
  assert.match(twice.message, /given up already/)
  await q.take() // 2 and 5 wait
  // Two people wait: a delete is refused, writes nothing, and says so; forced, it goes.
  const busy = await d.deleteQueue('lobby').catch((x) => x)
  assert.ok(busy instanceof dispenser.ConflictError && busy.code === 'queue_in_use', busy.message)
  assert.equal(busy.written, 'nothing_written')
  assert.equal((await q.peek()).waiting, 2n)
  await d.deleteQueue('lobby', { force: true })
  await assert.rejects(d.openQueue('lobby'), NotFoundError)
  const forced = await d.history('lobby', { kind: 'queue' })
  assert.deepEqual([forced.at(-1).op, forced.at(-1).params.force, forced.at(-1).kind], ['delete', true, 'queue'])
})
