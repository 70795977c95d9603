#!/usr/bin/env python3
"""Find import circles among a crate's source files; exit 1 if there are any.

Usage: scripts/circles.py [--graph] [--parents] [ROOT ...]  (default: src src/server/src src/cli/src)

Why: a layer that imports a layer above it cannot be understood, tested or changed alone;
files in a circle are one unit in disguise. Each circle is printed with the line behind each
of its edges. --graph prints every edge.

A ROOT holds a crate root (lib.rs or main.rs); the module tree follows `mod x;` (x.rs or
x/mod.rs), so `src` never reaches the other crates' `src/server/src`, `src/cli/src`; an inline
`mod x { }` belongs to its file.
Ignored: `#[cfg(test)]` code (tests may import anything), comments, strings, other crates.

File A depends on file B when A names an item DEFINED in B (struct, enum, fn, trait, type,
const, static, union), by a `use` without `pub` (anywhere, grouped, `self`, `as`; a glob
`m::*` depends on m's file; a module alone names nothing), or by a path in code starting with
`crate`, `self`, `super` or a module in scope (`super::super::m::f`, `block::Pool`). Paths
are followed through modules and re-exports (`pub use`, `pub(crate) use`, grouped, renamed,
globs): if block/mod.rs has `pub use pool::Pool`, `crate::block::Pool` is in block/pool.rs.
A name not followed (macro, variant) lives in the last module reached. A `pub use` line is a
signpost, not a dependency; `mod x;` neither. A module file and its submodules' files are one
unit: an edge between a file and an ancestor (block/mod.rs using block/pool.rs, which uses
`super::Shared`; a helper in main.rs) closes no circle: --graph marks it, --parents counts it.

Layers are modules, so modules are checked too: among the children of each module (the
crate's top-level modules included), each child standing for all its files, an import circle
between two children is a module circle even where no file circle exists (history/mod.rs
using dispenser.rs, which uses history/record.rs).
"""
import re
import sys
from pathlib import Path

TOKEN = re.compile(r"""(?P<ws>\s+)|(?P<lc>//[^\n]*)|(?P<bc>/\*)|(?P<raw>[bc]?r\#*")
  |(?P<str>[bc]?"(?:\\.|[^"\\])*")|(?P<chr>b?'(?:\\(?:u\{[0-9a-fA-F]*\}|x..|.)|[^\\'])')
  |(?P<life>'\w+)|(?P<rid>r\#\w+)|(?P<id>[^\W\d]\w*)|(?P<num>\d\w*)|(?P<p>::|.)""", re.S | re.X)
DEFS = {"struct", "enum", "fn", "trait", "type", "const", "static", "union"}
ITEM = DEFS | {"mod", "use", "impl", "pub", "unsafe", "async", "extern", "macro_rules"}
OPEN, CLOSE = ("(", "[", "{"), (")", "]", "}")
ANCHORS = ("crate", "$crate", "self", "super")


def lex(text):
    """Tokens (text, line), comments dropped; a string or char is `"`, a lifetime `'`."""
    toks, pos, line = [], 0, 1
    while pos < len(text):
        m = TOKEN.match(text, pos)
        kind, end = m.lastgroup, m.end()
        if kind == "bc":  # block comments nest
            depth = 1
            while depth and end < len(text):
                step = {"/*": 1, "*/": -1}.get(text[end:end + 2], 0)
                depth, end = depth + step, end + (2 if step else 1)
        elif kind == "raw":  # r#"..."# ends at a quote and as many hashes
            hashes = m.group().count("#")
            close = text.find('"' + "#" * hashes, end)
            end = len(text) if close < 0 else close + 1 + hashes
        if kind in ("str", "raw", "chr", "life"):
            toks.append(("'" if kind == "life" else '"', line))
        elif kind in ("id", "num", "p", "rid"):
            toks.append((m.group().removeprefix("r#"), line))
        line, pos = line + text.count("\n", pos, end), end
    return toks + [("", line)] * 4  # the lookahead never runs off the end


def isid(t):
    return t[:1].isalpha() or t[:1] == "_"


class Mod:
    def __init__(self, parent, file, dir):
        self.parent, self.file, self.dir, self.test = parent, file, dir, False
        self.up = parent.up | {parent.file} - {file} if parent else set()  # ancestors' files
        self.children, self.items, self.uses, self.paths = {}, set(), [], []


class Crate:
    def __init__(self, dir):
        self.dir, self.files, self.mods = Path(dir), [], {}
        top = [self.dir / n for n in ("lib.rs", "main.rs") if (self.dir / n).exists()]
        if not top:
            sys.exit(f"circles: no lib.rs or main.rs in {dir}")
        self.root = self.load(Mod(None, top[0], self.dir))

    def load(self, mod):
        self.scan(lex(mod.file.read_text(encoding="utf-8")), 0, mod)
        if not mod.test:
            self.files.append(mod.file)
            self.mods[mod.file] = mod
        return mod

    def scan(self, toks, i, mod):
        """Record mod's children, items, uses and paths; return the index after its `}`."""
        depth = 0
        while toks[i][0]:
            (t, line), nxt = toks[i], toks[i + 1][0]
            if t in OPEN:
                depth += 1
            elif t in CLOSE:
                if depth == 0:
                    return i + 1
                depth -= 1
            elif t == "#" and nxt in ("[", "!") and is_test_attr(toks, i):
                if nxt == "!":  # #![cfg(test)]: the whole module is test code
                    mod.test = True
                    return len(toks)
                i = skip_item(toks, i)
                continue
            elif t == "mod" and depth == 0 and isid(nxt) and toks[i + 2][0] in (";", "{"):
                d = mod.dir / nxt  # x.rs or x/mod.rs: either way x's own children are in x/
                if toks[i + 2][0] == "{":
                    sub = Mod(mod, mod.file, d)
                    i = self.scan(toks, i + 3, sub)
                else:
                    f = [f for f in (mod.dir / f"{nxt}.rs", d / "mod.rs") if f.exists()]
                    sub, i = f and self.load(Mod(mod, f[0], d)), i + 3
                if sub and not sub.test:
                    mod.children[nxt] = sub
                continue
            elif t == "use" and nxt != "<":  # `impl Trait + use<'a>` imports nothing
                i = parse_use(toks, i, mod)
                continue
            elif t in DEFS and depth == 0 and isid(nxt) and nxt not in ITEM:
                mod.items.add(nxt)
            elif isid(t) and nxt == "::" and isid(toks[i + 2][0]) and toks[i - 1][0] != "::":
                segs = ["$crate" if toks[i - 1][0] == "$" else t]
                while toks[i + 1][0] == "::" and isid(toks[i + 2][0]):
                    segs.append(toks[i + 2][0])
                    i += 2
                mod.paths.append((segs, line))
            i += 1
        return i


def is_test_attr(toks, i):
    """Whether the attribute at toks[i] (`#[...]` or `#![...]`) is a cfg(test)."""
    j = i + (3 if toks[i + 1][0] == "!" else 2)
    depth, words = 1, []
    while depth and toks[j][0]:
        depth += (toks[j][0] == "[") - (toks[j][0] == "]")
        words.append(toks[j][0])
        j += 1
    return words[:1] == ["cfg"] and "test" in words and "not" not in words


def skip_item(toks, j):
    """Skip the attributed item at toks[j]: to its `;`, its closing `}` or a field's `,`."""
    depth, item = 0, None
    while toks[j][0]:
        t = toks[j][0]
        if depth == 0 and item is None and t not in ("#", "!", "["):
            item = t in ITEM  # an item's `,` (in generics, where clauses) does not end it
        if t in CLOSE and depth == 0:
            return j  # the enclosing block's end
        depth += (t in OPEN) - (t in CLOSE)
        if depth == 0 and (t in ("}", ";") or (t == "," and not item)):
            return j + 1
        j += 1
    return j


def parse_use(toks, i, mod):
    """Record the leaves of the `use` at toks[i]: (segments, name, glob, pub, line)."""
    k = i - 1 if toks[i - 1][0] != ")" else max(k for k in range(i) if toks[k][0] == "(") - 1
    pub, leaves = toks[k][0] == "pub", []  # also pub(crate), pub(super), pub(in path)

    def tree(j, segs):
        while True:
            t = toks[j][0]
            if t == "{":
                j += 1
                while toks[j][0] not in ("}", ";", ""):
                    j = tree(j, segs)
                    j += toks[j][0] == ","
                return j + 1
            if t == "*":
                leaves.append((segs, None, True))
                return j + 1
            if not isid(t):
                return j  # malformed (the file is being edited): give up on this branch
            segs, j = segs + [t], j + 1
            if toks[j][0] == "::":
                j += 1
                continue
            if t == "self":  # `a::{self}` imports a
                segs = segs[:-1]
            name = toks[j + 1][0] if toks[j][0] == "as" else segs[-1] if segs else None
            leaves.append((segs, None if name == "_" else name, False))
            return j + 2 if toks[j][0] == "as" else j

    j = i + 1 if toks[i + 1][0] == "::" else tree(i + 1, [])  # `use ::x`: another crate
    mod.uses += [(segs, name, glob, pub, toks[i][1]) for segs, name, glob in leaves if segs]
    while toks[j][0] not in (";", ""):
        j += 1
    return j + 1


def lookup(mod, name, seen=frozenset()):
    """What `name` means in mod: a Mod, the file (Path) defining it, or None (not ours)."""
    if (mod, name) in seen:
        return None
    seen |= {(mod, name)}
    if name in mod.children:
        return mod.children[name]
    if name in mod.items:
        return mod.file
    for segs, bound, glob, _, _ in mod.uses:  # imports, private ones too: children see them
        if bound == name and (found := resolve(mod, segs, seen)) is not None:
            return found
    for segs, _, glob, _, _ in mod.uses:
        target = resolve(mod, segs, seen) if glob else None
        if isinstance(target, Mod) and (found := lookup(target, name, seen)) is not None:
            return found
    return None


def resolve(mod, segs, seen=frozenset()):
    """The Mod or file a path written in mod ends at; None for other crates."""
    cur = mod if segs[0] in ANCHORS else lookup(mod, segs[0], seen)
    for i, seg in enumerate(segs):
        if not isinstance(cur, Mod):
            break  # an item: what follows is a variant or an associated name
        if seg in ("crate", "$crate") and i == 0:
            while cur.parent:
                cur = cur.parent
        elif seg == "super":
            cur = cur.parent
        elif i > 0 and seg != "self":
            found = lookup(cur, seg, seen)
            if found is None:
                return cur.file  # a name we do not follow lives in the last module reached
            cur = found
    return cur


def edges_of(crate):
    """{(from file, to file): [(path as written, line), ...]}."""
    edges, stack = {}, [crate.root]

    def add(mod, target, text, line):  # a path ending at a module names nothing in it
        if isinstance(target, Path) and target != mod.file:
            edges.setdefault((mod.file, target), []).append((text, line))

    while stack:
        mod = stack.pop()
        stack += mod.children.values()
        for segs, _, glob, pub, line in mod.uses:
            target = resolve(mod, segs)
            if not pub:
                target = target.file if glob and isinstance(target, Mod) else target
                add(mod, target, "::".join(segs) + "::*" * glob, line)
        for segs, line in mod.paths:
            if segs[0] in ANCHORS or isinstance(lookup(mod, segs[0]), Mod):
                add(mod, resolve(mod, segs), "::".join(segs), line)
    return edges


def components(nodes, succ):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, out = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out)


def tour(comp, succ):
    """A closed walk from comp[0] through every file of the component (shortest hops)."""
    walk, left = [comp[0]], set(comp[1:])
    while left or walk[-1] != comp[0]:
        paths, queue = {walk[-1]: [walk[-1]]}, [walk[-1]]
        for v in queue:  # breadth first, inside the component
            for w in sorted(succ.get(v, set()) & set(comp) - set(paths)):
                paths[w] = paths[v] + [w]
                queue.append(w)
        goal = min(left or {comp[0]}, key=lambda f: (len(paths[f]), f))
        walk += paths[goal][1:]
        left -= set(paths[goal])
    return walk


def module_circles(crate, edges, name):
    """Circles among the modules that are siblings (the children of one module, the crate's
    top-level modules included), each module standing for every file below it; printed with
    an edge of each hop. A file circle is one; two modules that import each other through
    different files are one too."""
    def chain(f):  # the modules from f's own up to the root
        m, out = crate.mods[f], []
        while m:
            out.append(m)
            m = m.parent
        return out

    def modname(m):  # crate::history, crate::serve::ui
        parts = []
        while m.parent:
            parts.append(m.dir.name)
            m = m.parent
        return "::".join(["crate"] + parts[::-1])

    found = []
    for parent in crate.mods.values():
        def child(f):  # the child of `parent` holding f, or None (f outside it, or its own file)
            ms = chain(f)
            for below, m in zip(ms, ms[1:]):
                if m is parent:
                    return None if below.file == parent.file else below
            return None

        succ, why = {}, {}
        for (a, b), uses in edges.items():
            ca, cb = child(a), child(b)
            if ca and cb and ca is not cb:
                ka, kb = modname(ca), modname(cb)
                succ.setdefault(ka, set()).add(kb)
                why.setdefault((ka, kb), (name(a), name(b), uses[0]))
        for comp in components(sorted(succ), succ):
            walk = tour(comp, succ)
            found.append(comp)
            print("module circle: " + " → ".join(walk) + f"  (the modules of {modname(parent)})")
            for ka, kb in zip(walk, walk[1:]):
                a, b, (text, line) = why[ka, kb]
                print(f"  {ka} → {kb}: {a} uses {text} (line {line}) of {b}")
    return found


def main(argv):
    flags = {a for a in argv if a.startswith("--")}
    roots = [(a, Path(a)) for a in argv if a not in flags]
    if flags - {"--graph", "--parents"}:
        sys.exit(__doc__)
    if not roots:  # the repository's, wherever this is run from
        repo = Path(__file__).resolve().parent.parent
        roots = [(r, repo / r) for r in ("src", "src/server/src", "src/cli/src")]
    found = 0
    for root, path in roots:
        crate = Crate(path)
        name = lambda f: f.relative_to(crate.dir).as_posix()  # noqa: E731
        edges, succ, mods = edges_of(crate), {}, crate.mods
        part = {(a, b) for a, b in edges if a in mods[b].up or b in mods[a].up}
        for a, b in edges:
            if "--parents" in flags or (a, b) not in part:
                succ.setdefault(a, set()).add(b)
        if "--graph" in flags:
            for (a, b), why in sorted(edges.items()):
                used = ", ".join(sorted({text.split("::")[-1] for text, _ in why}))
                print(f"{root}: {name(a)} → {name(b)}: {used}" + " (part)" * ((a, b) in part))
        comps = components(crate.files, succ)
        for comp in comps:
            walk = tour(comp, succ)
            print("circle: " + " → ".join(map(name, walk)) + f"  ({root}, {len(comp)} files)")
            pairs = list(zip(walk, walk[1:]))
            pairs += sorted((a, b) for a in comp for b in succ[a] if b in comp)
            for a, b in dict.fromkeys(pairs):
                print(f"  {name(a)} → {name(b)}: {name(a)} uses %s (line %d)" % edges[a, b][0])
        mcomps = module_circles(crate, edges, name)
        print(f"{root}: {len(crate.files)} files, {len(comps)} circles, "
              f"{len(mcomps)} module circles")
        found += len(comps) + len(mcomps)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
