'use strict'
// What the Node.js tests share: the server (MONGODB_URI, set by scripts/test.sh), a dispenser
// on a collection of the test's own, and the package as an application loads it.
const path = require('node:path')

// The package under test: the installed one (tests/node/run.sh --installed sets
// DISPENSER_NODE_PACKAGE), else the checkout's.
const PACKAGE = process.env.DISPENSER_NODE_PACKAGE || path.join(__dirname, '..', '..', 'src', 'bindings', 'node')
const dispenser = require(PACKAGE)

/** The server the Rust tests use. */
function uri() {
  const u = process.env.MONGODB_URI
  if (!u) throw new Error('MONGODB_URI is not set: run the tests through scripts/test.sh')
  return u
}

/** The database of the integration tests. */
const DATABASE = 'dispenser_test'

/** A collection name of the test's own: the test, the process and the time. */
function unique(test) {
  return `node_${test}_${process.pid}_${Date.now().toString(36)}`.slice(0, 100)
}

/** A dispenser on a collection of `test`'s own. */
async function connect(test, options = {}) {
  return dispenser.Dispenser.connect(uri(), { database: DATABASE, collection: unique(test), ...options })
}

/** The official driver, on the same server. */
async function driver() {
  const { MongoClient } = require('mongodb')
  const client = new MongoClient(uri())
  await client.connect()
  return client
}

/** Runs `tasks` functions with at most `concurrency` at a time; resolves to their results. */
async function concurrently(concurrency, count, task) {
  const results = new Array(count)
  let next = 0
  const worker = async () => {
    while (next < count) {
      const i = next++
      results[i] = await task(i)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  return results
}

module.exports = { PACKAGE, dispenser, uri, DATABASE, unique, connect, driver, concurrently }
