'use strict'
// `{ signal }`: a call that waits is aborted at once, and says whether its write may have been
// sent. The server's replies pass through a TCP proxy of the test's own that can stop relaying
// them: a take whose write reaches the server and whose answer never comes back.
const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { dispenser, uri, DATABASE, unique } = require('./helpers.js')

const { AbortError, Dispenser } = dispenser

/** A proxy to the test server; `swallow = true` stops relaying the server's replies. */
async function proxy() {
  const target = new URL(uri().replace(/^mongodb:/, 'http:'))
  const sockets = new Set()
  const state = { swallow: false }
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname)
    sockets.add(client).add(upstream)
    client.on('data', (b) => upstream.write(b))
    upstream.on('data', (b) => {
      if (!state.swallow) client.write(b)
    })
    for (const [a, b] of [[client, upstream], [upstream, client]]) {
      a.on('error', () => b.destroy())
      a.on('close', () => b.destroy())
    }
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  state.uri = `mongodb://127.0.0.1:${server.address().port}/?directConnection=true`
  state.close = () => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  }
  return state
}

test('a take whose write is sent and never answered is aborted at once, its write unknown', async () => {
  const p = await proxy()
  const collection = unique('abort')
  try {
    const d = await Dispenser.connect(p.uri, { database: DATABASE, collection })
    const q = await d.ensureQueue('lobby')
    assert.equal((await q.take()).ticket, 1n)
    p.swallow = true
    const controller = new AbortController()
    const taking = q.take({ signal: controller.signal })
    let abortedAt
    setTimeout(() => {
      abortedAt = performance.now()
      controller.abort()
    }, 500)
    const e = await taking.catch((x) => x)
    const after = performance.now() - abortedAt
    assert.ok(e instanceof AbortError, String(e))
    assert.deepEqual([e.name, e.code, e.kind, e.written], ['AbortError', 'aborted', 'aborted', 'unknown'])
    assert.equal(e.message, '`take` was aborted: its write may have been sent')
    assert.ok(e.cause instanceof Error && e.cause.name === 'AbortError', 'the signal\'s reason is its cause')
    assert.ok(after < 100, `rejected ${after.toFixed(1)} ms after the abort`)
    // The write had reached the server: the ticket was taken (what `unknown` warns of).
    const direct = await Dispenser.connect(uri(), { database: DATABASE, collection })
    assert.equal((await (await direct.openQueue('lobby')).peek()).taken, 2n)
  } finally {
    await p.close()
  }
})

test('a signal aborted before the call starts: rejected, nothing written; a read aborted wrote nothing', async () => {
  const d = await Dispenser.connect(uri(), { database: DATABASE, collection: unique('abort_before') })
  const q = await d.ensureQueue('lobby')
  const s = await d.ensure('orders')
  const reason = new Error('the user left')
  for (const call of [(signal) => q.take({ signal }), (signal) => s.next({ signal }), (signal) => s.alter({ max: 5 }, { signal })]) {
    const e = await call(AbortSignal.abort(reason)).catch((x) => x)
    assert.ok(e instanceof AbortError, String(e))
    assert.deepEqual([e.written, e.cause], ['nothing_written', reason])
  }
  assert.deepEqual([(await q.peek()).taken, (await s.peek()).value, (await s.peek()).max], [0n, 0n, 2n ** 63n - 1n])
  // A signal that never aborts changes nothing, and its listener goes with the call.
  const controller = new AbortController()
  for (let i = 0; i < 20; i++) await s.next({ signal: controller.signal })
  assert.equal(await s.next(), 21n)
  // An abort after the answer changes nothing either; not an AbortSignal is refused.
  controller.abort()
  await assert.rejects(s.next({ signal: 'stop' }), /invalid `signal` of `next`: give an AbortSignal/)
  // A gap-free issue aborted before it starts: its business write never runs.
  const g = await d.ensureGapless('inv', { collection: unique('abort_inv'), field: 'n' })
  let ran = false
  await assert.rejects(g.issue(async () => { ran = true }, { signal: AbortSignal.abort() }), { name: 'AbortError', written: 'nothing_written' })
  assert.equal(ran, false)
})

test('a read that waits on a server that does not answer is aborted, nothing written', async () => {
  const p = await proxy()
  try {
    const d = await Dispenser.connect(p.uri, { database: DATABASE, collection: unique('abort_read') })
    const s = await d.ensure('orders')
    p.swallow = true
    const e = await s.peek({ signal: AbortSignal.timeout(300) }).catch((x) => x)
    assert.ok(e instanceof AbortError, String(e))
    assert.equal(e.written, 'nothing_written')
    assert.equal(e.cause.name, 'TimeoutError')
  } finally {
    await p.close()
  }
})
