// Draws numbers from one sequence with concurrent Node.js promises and prints them, one per
// line: the Node part of the cross-language test (tests/python/test_cross_language.py spawns
// it), with the arguments of tests/python/draw.py:
//
//   node tests/node/draw.mjs URI DATABASE COLLECTION NAME CONCURRENCY CALLS
//
// It ensures NAME with the default spec, waits for a line on stdin when READY_FIRST=1 (so
// that several processes start drawing together, after printing "ready"), then CONCURRENCY
// promises each call next() CALLS times. Uses the package in DISPENSER_NODE_PACKAGE (an installed
// one: tests/node/run.sh --installed), else the one built in src/bindings/node.
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Dispenser } = require(process.env.DISPENSER_NODE_PACKAGE || fileURLToPath(new URL('../../src/bindings/node/index.js', import.meta.url)))

const [uri, database, collection, name, concurrency, calls] = process.argv.slice(2)
if (calls === undefined) {
  console.error('usage: node tests/node/draw.mjs URI DATABASE COLLECTION NAME CONCURRENCY CALLS')
  process.exit(2)
}
const d = await Dispenser.connect(uri, { database, collection })
const s = await d.ensure(name)
if (process.env.READY_FIRST === '1') {
  console.log('ready')
  const lines = createInterface({ input: process.stdin })
  await new Promise((resolve) => lines.once('line', resolve))
  lines.close()
}
const drawn = await Promise.all(
  Array.from({ length: Number(concurrency) }, async () => {
    const mine = []
    for (let i = 0; i < Number(calls); i++) mine.push(await s.next())
    return mine
  }),
)
process.stdout.write(drawn.flat().map((n) => `${n}\n`).join(''))
