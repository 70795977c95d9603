// The Node.js package's figures (a release build: tests/node/build.sh --release), in one run
// against the same server:
//   draws: 32 concurrent promises calling next() on one handle, against 32 concurrent
//          hand-written findOneAndUpdate({$inc}) calls of the official driver (with a
//          projection, the counter read back under the server's lock);
//   saves: 32 concurrent Model.create() of one schema numbered by the plugin, against the same
//          schema unnumbered and numbered by mongoose-sequence 6.0.1.
// Each phase runs SECONDS seconds (default 5), ROUNDS times in turn (default 3); the rate of
// each round is printed, then the median and the ratios. Duplicates are counted. `--rtt
// 0,2` runs it all at each round trip in turn: 0 straight to the server, 2 through the core's
// delay line (`dispenser bench --rtt 2 --delay-line`, the binary of DISPENSER_BIN, else
// target/debug/dispenser: build it with `cargo build`), which holds each direction 1 ms.
//
//   MONGODB_URI=… NODE_PATH=.tools/node/node_modules node tests/node/bench.mjs [SECONDS] [ROUNDS] [--rtt 0,2]
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const { Dispenser, mongoosePlugin } = require(fileURLToPath(new URL('../../src/bindings/node/index.js', import.meta.url)))
const { MongoClient } = require('mongodb')
const mongoose = require('mongoose')

const server = process.env.MONGODB_URI
if (!server) throw new Error('MONGODB_URI is not set')
const argv = process.argv.slice(2)
const rttAt = argv.indexOf('--rtt')
const rtts = rttAt >= 0 ? argv.splice(rttAt, 2)[1].split(',').map(Number) : [0]
const seconds = Number(argv[0] || 5)
const rounds = Number(argv[1] || 3)
const CONCURRENCY = 32

/** The URI `rtt` ms of round trip away (0: the server's own), and how to stop its delay line. */
async function delayed(rtt) {
  if (rtt === 0) return [server, () => {}]
  const bin = process.env.DISPENSER_BIN || fileURLToPath(new URL('../../target/debug/dispenser', import.meta.url))
  const line = spawn(bin, ['bench', '--rtt', String(rtt), '--delay-line'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const first = await new Promise((resolve, reject) => {
    line.on('error', reject)
    createInterface({ input: line.stdout }).once('line', resolve)
  })
  if (!first.startsWith('MONGODB_URI=')) throw new Error(`the delay line said: ${first}`)
  return [first.slice('MONGODB_URI='.length), () => line.stdin.end()]
}

/** Runs `op` from CONCURRENCY loops for `seconds`; resolves to [calls per second, results]. */
async function rate(op) {
  const until = performance.now() + seconds * 1000
  const results = []
  const started = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < until) results.push(await op())
  }))
  return [results.length / ((performance.now() - started) / 1000), results]
}

function duplicates(values) {
  return values.length - new Set(values.map(String)).size
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const show = (x) => `${(x / 1000).toFixed(1)} k/s`

/** The whole benchmark against `uri`; the ratios it found. */
async function bench(uri, rtt) {
  const tag = `${process.pid}_${Date.now().toString(36)}`
  const database = `bench_node_${tag}`
  console.log(`\n== round trip: ${rtt === 0 ? 'the server as it is' : `${rtt} ms (the delay line)`}`)
  const d = await Dispenser.connect(uri, { database, collection: 'sequences' })
  const client = await new MongoClient(uri).connect()
  const counters = client.db(database).collection('counters')
  const seq = await d.ensure('draws')

  const connection = mongoose.createConnection(uri, { dbName: database })
  await connection.asPromise()
  const AutoIncrement = require('mongoose-sequence')(connection)
  const schema = () => new mongoose.Schema({ customer: String, total: Number })
  const plain = connection.model('Plain', schema())
  const oursSchema = schema()
  oursSchema.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'orders' })
  const ours = connection.model('Ours', oursSchema)
  const theirsSchema = schema()
  theirsSchema.plugin(AutoIncrement, { inc_field: 'number', id: `orders_${tag}` })
  const theirs = connection.model('Theirs', theirsSchema)
  for (const m of [plain, ours, theirs]) await m.init()

  const phases = {
    'dispenser next()': async () => seq.next(),
    'driver findOneAndUpdate($inc)': async () => {
      const r = await counters.findOneAndUpdate(
        { _id: 'draws' },
        { $inc: { value: 1 } },
        { upsert: true, returnDocument: 'after', projection: { value: 1 } },
      )
      return r.value
    },
    'mongoose create, unnumbered': async () => (await plain.create({ customer: 'c', total: 1 }))._id,
    'mongoose create + plugin': async () => (await ours.create({ customer: 'c', total: 1 })).number,
    'mongoose create + mongoose-sequence': async () => (await theirs.create({ customer: 'c', total: 1 })).number,
  }
  const rates = Object.fromEntries(Object.keys(phases).map((k) => [k, []]))
  const dups = Object.fromEntries(Object.keys(phases).map((k) => [k, 0]))
  const numbered = { 'dispenser next()': [], 'driver findOneAndUpdate($inc)': [], 'mongoose create + plugin': [], 'mongoose create + mongoose-sequence': [] }
  for (let r = 1; r <= rounds; r++) {
    for (const [name, op] of Object.entries(phases)) {
      const [perSecond, results] = await rate(op)
      rates[name].push(perSecond)
      if (numbered[name]) for (const x of results) numbered[name].push(x)
      console.log(`round ${r}  ${name.padEnd(38)} ${show(perSecond)}`)
    }
  }
  for (const name of Object.keys(numbered)) dups[name] = duplicates(numbered[name])
  console.log(`\n${CONCURRENCY} concurrent callers, ${seconds} s per phase, ${rounds} rounds (median)`)
  for (const name of Object.keys(phases)) {
    const extra = numbered[name] ? `  (${numbered[name].length} numbers, ${dups[name]} duplicates)` : ''
    console.log(`  ${name.padEnd(38)} ${show(median(rates[name]))}${extra}`)
  }
  const drawn = await d.peek('draws')
  const orders = await d.peek('orders')
  // Every write moves a sequence's version by one: numbers per write is what coalescing shares.
  console.log(`  writes of next(): ${drawn.version} for ${drawn.value} numbers; of the plugin: ${orders.version} for ${orders.value} numbers`)
  const m = (k) => median(rates[k])
  console.log(`  next() / findOneAndUpdate($inc):        ${(m('dispenser next()') / m('driver findOneAndUpdate($inc)')).toFixed(2)}x`)
  console.log(`  plugin / unnumbered saves:               ${(m('mongoose create + plugin') / m('mongoose create, unnumbered')).toFixed(2)}x`)
  console.log(`  plugin / mongoose-sequence:              ${(m('mongoose create + plugin') / m('mongoose create + mongoose-sequence')).toFixed(2)}x`)
  await connection.close()
  await client.close()
}

for (const rtt of rtts) {
  const [uri, stop] = await delayed(rtt)
  try {
    await bench(uri, rtt)
  } finally {
    stop()
  }
}
