'use strict'
// The TypeScript declarations (index.d.ts over the generated native.d.ts) compile with
// --strict against an application's use of the package (typed.ts), and reject misuse.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

// The package under test (not loaded here: index.js adds methods to the addon's classes).
const PACKAGE = process.env.DISPENSER_NODE_PACKAGE || path.join(__dirname, '..', '..', 'src', 'bindings', 'node')

/** typed.ts as an application beside the installed package has it (`from 'dispenser'`), or as it is. */
function typedSource() {
  if (!process.env.DISPENSER_NODE_PACKAGE) return path.join(__dirname, 'typed.ts')
  const fs = require('node:fs')
  const app = path.join(path.dirname(path.dirname(PACKAGE)), 'typed.ts')
  const source = fs.readFileSync(path.join(__dirname, 'typed.ts'), 'utf8')
  assert.ok(source.includes("from '../../src/bindings/node'"))
  fs.writeFileSync(app, source.replace("from '../../src/bindings/node'", "from 'dispenser'"))
  return app
}

test('the TypeScript declarations type an application and refuse misuse', () => {
  const tsc = require.resolve('typescript/bin/tsc')
  const r = spawnSync(
    process.execPath,
    [tsc, '--strict', '--noEmit', '--target', 'es2022', '--lib', 'es2022,dom', '--module', 'commonjs', '--skipLibCheck', 'false', typedSource()],
    { encoding: 'utf8', timeout: 120_000 },
  )
  assert.equal(r.status, 0, r.stdout + r.stderr)
})

test('the declarations name exactly the methods the addon has (native.d.ts is current)', () => {
  const fs = require('node:fs')
  const native = require(path.join(PACKAGE, 'native.js'))
  const dts = fs.readFileSync(path.join(PACKAGE, 'native.d.ts'), 'utf8')
  const declared = {}
  for (const m of dts.matchAll(/^export declare class (\w+) \{\n([\s\S]*?)^\}/gm)) {
    const members = [...m[2].matchAll(/^ {2}(?:static |get )?(\w+)\(/gm)].map((x) => x[1])
    declared[m[1]] = members.sort()
  }
  assert.ok(Object.keys(declared).length >= 8, Object.keys(declared).join(', '))
  for (const [name, members] of Object.entries(declared)) {
    const Class = native[name]
    assert.ok(Class, `native.d.ts declares ${name}, which the addon lacks`)
    const methods = Object.getOwnPropertyNames(Class.prototype).filter((k) => k !== 'constructor')
    const statics = Object.getOwnPropertyNames(Class).filter((k) => typeof Class[k] === 'function' && !['prototype', 'arguments', 'caller'].includes(k))
    const actual = [...methods, ...statics].sort()
    assert.deepEqual(members, actual, `${name}: regenerate the declarations with tests/node/build.sh --declarations`)
  }
})
