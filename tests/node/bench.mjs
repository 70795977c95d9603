// The Node.js package's figures (a release build: tests/node/build.sh --release), in one run
// against the same server:
//   draws: N concurrent promise chains calling next() on one handle, against N chains of
//          hand-written findOneAndUpdate({$inc}) calls of the official driver (with a
//          projection, the counter read back under the server's lock), at each N of
//          `--callers` (default 1,32,256): numbers per second, p50 and p99 of a call, and for
//          next() the numbers per write and the most callers one write served (the handle's
//          stats(): issued / writes, max_batch);
//   saves: 32 concurrent Model.create() of one schema numbered by the plugin (its default
//          block, and `block: null`), against the same schema unnumbered and numbered by
//          mongoose-sequence 6.0.1 (left out by `--draws-only`).
// Each phase runs SECONDS seconds (default 5), ROUNDS times in turn (default 3); the rate of
// each round is printed, then the ranges over the rounds and the ratios within each round.
// Duplicates are counted. `--rtt 0,2` runs it all at each round trip in turn: 0 straight to the
// server, 2 through the core's delay line (`dispenser bench --rtt 2 --delay-line`, the binary
// of DISPENSER_BIN, else target/release/dispenser, else target/debug/dispenser), which holds
// each direction 1 ms. The driver keeps its defaults (a pool of 100 connections).
//
//   MONGODB_URI=… NODE_PATH=.tools/node/node_modules node tests/node/bench.mjs [SECONDS] [ROUNDS] \
//       [--rtt 0,2] [--callers 1,32,256] [--draws-only]
import { existsSync } from 'node:fs'
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
function option(name, fallback) {
  const at = argv.indexOf(name)
  return at >= 0 ? argv.splice(at, 2)[1] : fallback
}
function flag(name) {
  const at = argv.indexOf(name)
  if (at >= 0) argv.splice(at, 1)
  return at >= 0
}
const rtts = option('--rtt', '0').split(',').map(Number)
const callersList = option('--callers', '1,32,256').split(',').map(Number)
const drawsOnly = flag('--draws-only')
const seconds = Number(argv[0] || 5)
const rounds = Number(argv[1] || 3)
const SAVERS = 32

/** The URI `rtt` ms of round trip away (0: the server's own), and how to stop its delay line. */
async function delayed(rtt) {
  if (rtt === 0) return [server, () => {}]
  const built = (profile) => fileURLToPath(new URL(`../../target/${profile}/dispenser`, import.meta.url))
  const bin = process.env.DISPENSER_BIN || (existsSync(built('release')) ? built('release') : built('debug'))
  const line = spawn(bin, ['--uri', server, 'bench', '--rtt', String(rtt), '--delay-line'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const first = await new Promise((resolve, reject) => {
    line.on('error', reject)
    createInterface({ input: line.stdout }).once('line', resolve)
  })
  if (!first.startsWith('MONGODB_URI=')) throw new Error(`the delay line said: ${first}`)
  return [first.slice('MONGODB_URI='.length), () => line.stdin.end()]
}

/** Runs `op` from `callers` chains for `seconds`: calls per second, results, sorted latencies (ms). */
async function rate(op, callers) {
  const until = performance.now() + seconds * 1000
  const results = []
  const took = []
  const started = performance.now()
  await Promise.all(Array.from({ length: callers }, async () => {
    while (performance.now() < until) {
      const t0 = performance.now()
      results.push(await op())
      took.push(performance.now() - t0)
    }
  }))
  took.sort((a, b) => a - b)
  return [results.length / ((performance.now() - started) / 1000), results, took]
}

function duplicates(values) {
  return values.length - new Set(values.map(String)).size
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const quantile = (sorted, q) => sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : NaN
const show = (x) => `${(x / 1000).toFixed(1)} k/s`
function span(xs, digits) {
  if (!xs.length) return '—'
  const lo = Math.min(...xs).toFixed(digits)
  const hi = Math.max(...xs).toFixed(digits)
  return lo === hi ? lo : `${lo}–${hi}`
}

/** The whole benchmark against `uri`. */
async function bench(uri, rtt) {
  const tag = `${process.pid}_${Date.now().toString(36)}`
  const database = `bench_node_${tag}`
  console.log(`\n== round trip: ${rtt === 0 ? 'the server as it is' : `${rtt} ms added (the delay line)`}`)
  const d = await Dispenser.connect(uri, { database, collection: 'sequences' })
  const client = await new MongoClient(uri).connect()
  // Not `counters`: mongoose-sequence keeps its own there, under a unique index on (id, reference_value).
  const counters = client.db(database).collection('raw_counters')

  // Draws: one fresh sequence and counter per phase, so each phase's stats are its own.
  const draws = {}
  for (const n of callersList) {
    draws[n] = { raw: { rates: [], p50: [], p99: [], numbers: 0, duplicates: 0 }, ours: { rates: [], p50: [], p99: [], ratios: [], perWrite: [], maxBatch: [], numbers: 0, duplicates: 0 } }
  }
  // Saves: the Mongoose phases, 32 savers.
  let saves = null
  let connection = null
  if (!drawsOnly) {
    connection = mongoose.createConnection(uri, { dbName: database })
    await connection.asPromise()
    const AutoIncrement = require('mongoose-sequence')(connection)
    const schema = () => new mongoose.Schema({ customer: String, total: Number })
    const plain = connection.model('Plain', schema())
    const oursSchema = schema()
    oursSchema.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'orders' })
    const ours = connection.model('Ours', oursSchema)
    const perSaveSchema = schema()
    perSaveSchema.plugin(mongoosePlugin, { dispenser: d, field: 'number', sequence: 'orders_per_save', block: null })
    const perSave = connection.model('PerSave', perSaveSchema)
    const theirsSchema = schema()
    theirsSchema.plugin(AutoIncrement, { inc_field: 'number', id: `orders_${tag}` })
    const theirs = connection.model('Theirs', theirsSchema)
    for (const m of [plain, ours, perSave, theirs]) await m.init()
    saves = {
      'mongoose create, unnumbered': { op: async () => (await plain.create({ customer: 'c', total: 1 }))._id, rates: [], numbers: null },
      'mongoose create + plugin': { op: async () => (await ours.create({ customer: 'c', total: 1 })).number, rates: [], numbers: [] },
      'mongoose create + plugin, block: null': { op: async () => (await perSave.create({ customer: 'c', total: 1 })).number, rates: [], numbers: [] },
      'mongoose create + mongoose-sequence': { op: async () => (await theirs.create({ customer: 'c', total: 1 })).number, rates: [], numbers: [] },
    }
  }

  let phase = 0
  for (let r = 1; r <= rounds; r++) {
    for (const n of callersList) {
      const id = `draws_${phase++}`
      await counters.findOneAndUpdate({ _id: id }, { $inc: { value: 1 } }, { upsert: true })
      const [rawRate, rawResults, rawTook] = await rate(async () => {
        const doc = await counters.findOneAndUpdate(
          { _id: id },
          { $inc: { value: 1 } },
          { upsert: true, returnDocument: 'after', projection: { value: 1 } },
        )
        return doc.value
      }, n)
      const raw = draws[n].raw
      raw.rates.push(rawRate)
      raw.p50.push(quantile(rawTook, 0.5))
      raw.p99.push(quantile(rawTook, 0.99))
      raw.numbers += rawResults.length
      raw.duplicates += duplicates(rawResults)
      console.log(`round ${r}  ${String(n).padStart(4)} callers  ${'driver findOneAndUpdate($inc)'.padEnd(32)} ${show(rawRate)}  p50 ${quantile(rawTook, 0.5).toFixed(2)} ms  p99 ${quantile(rawTook, 0.99).toFixed(2)} ms`)

      const seq = await d.ensure(id)
      await seq.next()
      const before = seq.stats()
      const [ourRate, ourResults, ourTook] = await rate(() => seq.next(), n)
      const after = seq.stats()
      const issued = Number(after.issued) - Number(before.issued)
      const writes = Number(after.writes) - Number(before.writes)
      const ours = draws[n].ours
      ours.rates.push(ourRate)
      ours.ratios.push(ourRate / rawRate)
      ours.p50.push(quantile(ourTook, 0.5))
      ours.p99.push(quantile(ourTook, 0.99))
      ours.perWrite.push(issued / Math.max(writes, 1))
      ours.maxBatch.push(Number(after.maxBatch))
      ours.numbers += ourResults.length
      ours.duplicates += duplicates(ourResults)
      console.log(`round ${r}  ${String(n).padStart(4)} callers  ${'dispenser next()'.padEnd(32)} ${show(ourRate)}  p50 ${quantile(ourTook, 0.5).toFixed(2)} ms  p99 ${quantile(ourTook, 0.99).toFixed(2)} ms  ${(issued / Math.max(writes, 1)).toFixed(1)} numbers/write, at most ${after.maxBatch}`)
    }
    if (saves) {
      for (const [name, s] of Object.entries(saves)) {
        const [perSecond, results] = await rate(s.op, SAVERS)
        s.rates.push(perSecond)
        if (s.numbers) for (const x of results) s.numbers.push(x)
        console.log(`round ${r}  ${String(SAVERS).padStart(4)} callers  ${name.padEnd(32)} ${show(perSecond)}`)
      }
    }
  }

  console.log(`\n${seconds} s per phase, ${rounds} rounds; ranges over the rounds, ratios to the driver's call of the same round`)
  console.log('| callers | run | numbers/s | × raw | p50 | p99 | numbers per write | most per write | duplicates |')
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const n of callersList) {
    const { raw, ours } = draws[n]
    console.log(`| ${n} | driver \`findOneAndUpdate({$inc})\` | ${span(raw.rates, 0)} | 1 | ${span(raw.p50, 2)} ms | ${span(raw.p99, 2)} ms | 1 | 1 | ${raw.duplicates} in ${raw.numbers} |`)
    console.log(`| ${n} | \`next()\` | ${span(ours.rates, 0)} | ${span(ours.ratios, 2)} | ${span(ours.p50, 2)} ms | ${span(ours.p99, 2)} ms | ${span(ours.perWrite, 1)} | ${span(ours.maxBatch, 0)} | ${ours.duplicates} in ${ours.numbers} |`)
  }
  if (draws[1]) {
    const p50s = draws[1].ours.p50.map((p, i) => p / draws[1].raw.p50[i])
    console.log(`1 caller: p50 ${span(p50s, 2)}× the driver call's`)
  }
  if (saves) {
    console.log(`\n${SAVERS} concurrent savers (median of the rounds)`)
    for (const [name, s] of Object.entries(saves)) {
      const extra = s.numbers ? `  (${s.numbers.length} numbers, ${duplicates(s.numbers)} duplicates)` : ''
      console.log(`  ${name.padEnd(38)} ${show(median(s.rates))}${extra}`)
    }
    const m = (k) => median(saves[k].rates)
    console.log(`  plugin / unnumbered saves:               ${(m('mongoose create + plugin') / m('mongoose create, unnumbered')).toFixed(2)}x`)
    console.log(`  plugin, block: null / unnumbered saves:  ${(m('mongoose create + plugin, block: null') / m('mongoose create, unnumbered')).toFixed(2)}x`)
    console.log(`  plugin / mongoose-sequence:              ${(m('mongoose create + plugin') / m('mongoose create + mongoose-sequence')).toFixed(2)}x`)
    await mongoosePlugin.close()
    await connection.close()
  }
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
