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
    const members = [...m[2].matchAll(/^ {2}(?:static |get )?(\w+)(?:<[^(]*>)?\(/gm)].map((x) => x[1])
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

test('index.js knows every method of native.d.ts and checks its options objects with exactly their keys', () => {
  const fs = require('node:fs')
  const dts = fs.readFileSync(path.join(PACKAGE, 'native.d.ts'), 'utf8')
  const { _options } = require(PACKAGE)
  const { KEYS, NESTED, API } = _options
  // The interfaces: each options type's fields are the keys index.js accepts.
  const interfaces = {}
  for (const m of dts.matchAll(/^export interface (\w+) \{\n([\s\S]*?)^\}/gm)) {
    interfaces[m[1]] = [...m[2].matchAll(/^ {2}(\w+)\??:/gm)].map((x) => x[1])
  }
  for (const [type, keys] of Object.entries(KEYS)) {
    assert.ok(interfaces[type], `index.js checks ${type}, which native.d.ts lacks`)
    assert.deepEqual([...keys].sort(), [...interfaces[type]].sort(), `${type}: index.js's KEYS and native.d.ts differ`)
  }
  for (const [type, nested] of Object.entries(NESTED)) {
    for (const [key, inner] of Object.entries(nested)) {
      assert.match(dts, new RegExp(`^ {2}${key}\\?: ${inner}\\b`, 'm'), `${type}.${key} is a ${inner}`)
    }
  }
  // The methods: every argument typed by an options interface is checked, and as that type.
  const optionTypes = new Set(Object.keys(interfaces).filter((t) => /Options|Input$/.test(t) && !/^(IssuedNumber|WriteOutcome)$/.test(t)))
  for (const m of dts.matchAll(/^export declare class (\w+) \{\n([\s\S]*?)^\}/gm)) {
    const cls = m[1]
    for (const line of m[2].matchAll(/^ {2}(?:static )?(\w+)(<[^(]*>)?\((.*)\)(?:: .*)?$/gm)) {
      const [, method, generics = '', params] = line
      const constraint = Object.fromEntries([...generics.matchAll(/(\w+) extends (\w+)/g)].map((x) => [x[1], x[2]]))
      // The parameters: split at the commas outside brackets.
      const parts = ['']
      let depth = 0
      for (const c of params) {
        if ('([{<'.includes(c)) depth++
        if (')]}>'.includes(c) && !(c === '>' && parts[parts.length - 1].endsWith('='))) depth--
        if (c === ',' && depth === 0) parts.push('')
        else parts[parts.length - 1] += c
      }
      const args = parts.filter((p) => p.trim()).map((p) => {
        const t = (/:\s*(\w+)/.exec(p) || [])[1]
        const type = constraint[t] || t
        return optionTypes.has(type) ? type : null
      })
      while (args.length && args[args.length - 1] === null) args.pop()
      const spec = (API[cls] || {})[method]
      assert.ok(spec, `${cls}.${method} is missing from index.js's API (what it reads, whether it waits)`)
      const checked = spec && spec.args ? [...spec.args] : []
      while (checked.length && checked[checked.length - 1] === null) checked.pop()
      assert.deepEqual(checked, args, `${cls}.${method}: index.js's API and native.d.ts differ`)
    }
  }
})
