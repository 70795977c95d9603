'use strict'
// Gap-free numbers issued from JavaScript with the official Node driver's own inserts, some
// of them failing: the audit finds 1..N, each used or voided exactly once.
const test = require('node:test')
const assert = require('node:assert/strict')
const { dispenser, connect, driver, unique, DATABASE } = require('./helpers.js')

const { BusinessWriteError, InvalidInputError } = dispenser

test('gap-free numbers with the Node driver, some inserts failing: every number used or voided once', async () => {
  const d = await connect('gapless')
  const client = await driver()
  try {
    const name = unique('invoices')
    const invoices = client.db(DATABASE).collection(name)
    const g = await d.ensureGapless('invoices', { collection: name, field: 'number' })
    let attempts = 0
    let failed = 0
    const used = []
    await Promise.all(Array.from({ length: 10 }, async (_, caller) => {
      for (let i = 0; i < 12; i++) {
        try {
          const issued = await g.issue(async (n) => {
            attempts += 1
            if (attempts % 7 === 0) throw new Error(`the customer record of invoice ${n} is locked`)
            const r = await invoices.insertOne({ number: n, caller, total: 100 + i })
            return r.insertedId
          })
          assert.ok(issued.value, 'issue resolves to what the write returned')
          used.push(issued.number)
        } catch (e) {
          assert.ok(e instanceof BusinessWriteError, String(e))
          assert.equal(e.code, 'business_write')
          assert.match(e.cause.message, /is locked/)
          failed += 1
        }
      }
    }))
    assert.ok(failed > 0, 'some writes failed')
    assert.equal(used.length + failed, 120)
    // A number voided on purpose (a destroyed form).
    await g.flush()
    const next = (await g.peek()).next
    await g.void(next, 'printer jam: form destroyed')
    const status = await g.peek()
    assert.equal(status.next, next + 1n)
    assert.deepEqual(status.voided.map((v) => [v.number, v.reason]), [[next, 'printer jam: form destroyed']])
    const audit = await g.audit({ from: 1 })
    assert.equal(audit.clean, true, JSON.stringify(audit, (k, v) => (typeof v === 'bigint' ? String(v) : v)))
    assert.equal(audit.missing, 0n)
    assert.equal(audit.duplicated, 0n)
    assert.equal(audit.numbers, BigInt(used.length) + 1n)
    assert.equal(audit.voided, 1n)
    assert.deepEqual([audit.first, audit.last], [1n, BigInt(used.length) + 1n])
    assert.deepEqual([...used].sort((a, b) => (a < b ? -1 : 1)), Array.from({ length: used.length }, (_, i) => BigInt(i + 1)).filter((n) => n !== next))
  } finally {
    await client.close()
  }
})

test('a number another document carries is moved past: the write runs again with the next', async () => {
  const d = await connect('gapless_dup')
  const client = await driver()
  try {
    const name = unique('receipts')
    const receipts = client.db(DATABASE).collection(name)
    const g = await d.ensureGapless('receipts', { collection: name, field: 'number' })
    const first = await g.issue((n) => receipts.insertOne({ number: n }))
    assert.equal(first.number, 1n)
    await g.flush()
    // Another writer (a stalled holder whose lease ran out) wrote number 2 meanwhile.
    await receipts.insertOne({ number: 2n, by: 'someone else' })
    const seen = []
    const second = await g.issue(async (n) => {
      seen.push(n)
      await receipts.insertOne({ number: n })
    })
    assert.deepEqual(seen, [2n, 3n])
    assert.deepEqual([second.number, second.skipped], [3n, 1])
    await assert.rejects(g.issue('not a function'), InvalidInputError)
    const audit = await g.audit({ from: 1 })
    assert.ok(audit.clean)
    assert.equal(audit.numbers, 3n)
    // Deleted (once the handle confirmed its last number and let its lease go): the state
    // goes, the documents stay.
    await g.flush()
    await d.deleteGapless('receipts')
    await assert.rejects(d.openGapless('receipts'), dispenser.NotFoundError)
    assert.equal(await receipts.countDocuments({}), 3)
  } finally {
    await client.close()
  }
})
