// Compiled (never run) by types.test.js with `tsc --strict --noEmit`: the declarations let an
// application's TypeScript use the package as the guide shows, and refuse what it must not do.
import { Dispenser, NotFoundError, mongoosePlugin, type SequenceState, type Issued } from '../../src/bindings/node'

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
  const ticket = await (await d.ensureQueue('lobby', { max: 99 })).take({ requestId: 'k-1' })
  void ticket.label
  void mongoosePlugin
  // @ts-expect-error: a number is a bigint, not a JavaScript number
  const wrong: number = await orders.next()
  void wrong
  // @ts-expect-error: the spec's fields are integers
  await d.ensure('bad', { max: '99' })
  return n
}
void app
