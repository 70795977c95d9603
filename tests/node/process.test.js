'use strict'
// The process around the addon: it exits without a close() while handles are open, and
// worker threads that load it draw, end (or are terminated mid-draw) and let it exit.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { PACKAGE, uri, DATABASE, unique } = require('./helpers.js')

/** Runs `script` in a new Node process; a hang is cut after 60 s (the process would take ms). */
function run(script) {
  const r = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, DISPENSER_PACKAGE: PACKAGE, DISPENSER_COLLECTION: unique('process'), DISPENSER_DATABASE: DATABASE },
    encoding: 'utf8',
    timeout: 60_000,
  })
  return r
}

const CONNECT = `
const { Dispenser } = require(process.env.DISPENSER_PACKAGE)
const connect = () => Dispenser.connect(${JSON.stringify(uri())}, { database: process.env.DISPENSER_DATABASE, collection: process.env.DISPENSER_COLLECTION });
`

test('a process exits when its JavaScript is done, with every kind of handle left open', () => {
  const r = run(`${CONNECT}
;(async () => {
  const d = await connect()
  const s = await d.ensure('orders')
  await s.next()
  await d.ensure('ids')
  const blocks = await d.openBlocks('ids', { size: 100, prefetch: 0.5 })
  await blocks.next()
  const g = await d.ensureGapless('invoices', { collection: process.env.DISPENSER_COLLECTION + '_invoices', field: 'number' })
  await g.issue(async () => {}) // a number left unconfirmed, its lease held
  const q = await d.ensureQueue('lobby')
  await q.take()
  console.log('drew')
})()`)
  assert.equal(r.signal, null, `the process hung and was killed: ${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(r.stdout.trim(), 'drew')
})

test('worker threads that load the addon draw, exit, are terminated mid-draw, and the process exits', () => {
  const r = run(`${CONNECT}
const { Worker } = require('node:worker_threads')
const worker = (draws) => new Worker(\`
  const { parentPort, workerData } = require('node:worker_threads')
  const { Dispenser } = require(workerData.pkg)
  ;(async () => {
    const d = await Dispenser.connect(workerData.uri, { database: workerData.db, collection: workerData.coll })
    const s = await d.ensure('shared')
    await s.next()
    parentPort.postMessage('drawing')
    const mine = []
    for (let i = 0; i < workerData.draws; i++) mine.push(String(await s.next()))
    parentPort.postMessage(mine)
  })()\`, { eval: true, workerData: { pkg: process.env.DISPENSER_PACKAGE, uri: ${JSON.stringify(uri())}, db: process.env.DISPENSER_DATABASE, coll: process.env.DISPENSER_COLLECTION, draws } })
;(async () => {
  const drawn = []
  const codes = await Promise.all(Array.from({ length: 4 }, () => new Promise((resolve, reject) => {
    const w = worker(50)
    w.on('message', (m) => { if (Array.isArray(m)) drawn.push(...m) })
    w.on('error', reject)
    w.on('exit', resolve)
  })))
  // Workers terminated while their draws are in flight (once they said they draw: a worker
  // terminated before it runs at all is not what this is about).
  // Four rounds of four: a use after free there crashed about one process in two.
  const killed = []
  for (let round = 0; round < 4; round++) {
    killed.push(...await Promise.all(Array.from({ length: 4 }, () => new Promise((resolve, reject) => {
      const w = worker(1000000)
      w.on('error', reject)
      w.on('exit', resolve)
      w.on('message', (m) => { if (m === 'drawing') setTimeout(() => w.terminate(), 20) })
    }))))
  }
  const d = await connect()
  drawn.push(String(await (await d.open('shared')).next()))
  console.log(JSON.stringify({ codes, killed, drawn: drawn.length, distinct: new Set(drawn).size }))
})()`)
  assert.equal(r.signal, null, `the process hung or crashed: ${r.stderr}`)
  assert.equal(r.status, 0, r.stderr)
  const out = JSON.parse(r.stdout.trim())
  assert.deepEqual(out.codes, [0, 0, 0, 0])
  assert.deepEqual(out.killed, Array(16).fill(1))
  assert.deepEqual([out.drawn, out.distinct], [201, 201])
})
