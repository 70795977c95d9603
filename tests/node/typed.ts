// Compiled (never run) by types.test.js with `tsc --strict --noEmit`: the declarations let an
// application's TypeScript use the package as the guide shows, and refuse what it must not do.
import { AbortError, Dispenser, NotFoundError, mongoosePlugin, type SequenceState, type Issued, type Ticket } from '../../src/bindings/node'

async function app(uri: string): Promise<bigint> {
  const d = await Dispenser.connect(uri, { database: 'shop', caller: 'web-1' })
  const orders = await d.ensure('orders', { max: 2n ** 62n, cycle: false })
  const n: bigint = await orders.next()
  const run = await orders.nextN(10)
  for (const id of run) {
    const same: bigint = id
    void same
  }
  const state: SequenceState = await orders.peek()
  const next: bigint | null = state.next
  void next
  const g = await d.ensureGapless('invoices', { collection: 'invoices', field: 'number' })
  const issued: Issued<string> = await g.issue(async (k) => `invoice ${k}`)
  void issued
  try {
    await d.open('missing')
  } catch (e) {
    if (e instanceof NotFoundError) console.log(e.code, e.kind)
  }
  const lobby = await d.ensureQueue('lobby', { max: 99 })
  const ticket = await lobby.take({ requestId: 'k-1' })
  void ticket.label
  const family: Ticket[] = await lobby.take({ count: 3 })
  void family
  const controller = new AbortController()
  await orders.next({ signal: controller.signal }).catch((e) => {
    if (e instanceof AbortError) console.log(e.written)
  })
  await d.adopt('orders', { mongooseSequence: 'number', collection: 'counters' })
  await d.adopt('orders', { counter: { collection: 'c', filter: { _id: 'orders' }, field: 'seq' } })
  // Numbers as JavaScript numbers: every answer typed so.
  const dn = await Dispenser.connect(uri, { numbers: 'number' })
  const numbered = await dn.ensure('orders')
  const plain: number = await numbered.next()
  const plus: number = plain + 1
  void plus
  const firstOfRun: number = (await numbered.nextN(3)).first
  void firstOfRun
  const st = await numbered.peek()
  const value: number = st.value
  const max: number | bigint = st.max
  void [value, max]
  const serials: number[] = (await (await dn.ensureQueue('lobby')).take({ count: 2 })).map((t) => t.serial)
  void serials
  const g2 = await dn.ensureGapless('inv', { collection: 'inv', field: 'n', maxLeaseSeconds: 30 })
  const used: number = (await g2.issue(async (k: number) => k)).number
  void used
  mongoosePlugin({}, { dispenser: dn, inc_field: 'number', start_seq: 100 })
  mongoosePlugin({}, { dispenser: d, field: 'n', block: null })
  const givenBack: bigint = (await mongoosePlugin.close()).givenBack
  void givenBack
  // @ts-expect-error: a number-mode draw is not a bigint
  const notBig: bigint = await numbered.next()
  void notBig
  // @ts-expect-error: the lease is in seconds now
  await d.ensureGapless('old', { collection: 'c', field: 'n', maxLeaseMs: 5 })
  // @ts-expect-error: an unknown plugin option
  mongoosePlugin({}, { dispenser: d, field: 'n', start: 5 })
  // @ts-expect-error: a block size is a number
  mongoosePlugin({}, { dispenser: d, field: 'n', block: '10' })
  // @ts-expect-error: a number is a bigint, not a JavaScript number
  const wrong: number = await orders.next()
  void wrong
  // @ts-expect-error: the spec's fields are integers
  await d.ensure('bad', { max: '99' })
  return n
}
void app
