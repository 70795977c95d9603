#!/usr/bin/env python3
"""Generated mutants of the bindings' translation code, against the bindings' own suites.

cargo-mutants runs `cargo test`; the Python and Node.js bindings are tested from Python and
Node.js instead. This takes cargo-mutants' list of a binding file's mutants (with their diffs)
and, for each, applies it to the checkout, builds the extension as the suite builds it
(tests/python/stage.sh, tests/node/build.sh: an incremental debug build of that crate only),
runs that binding's suite (stopping at its first failure) and restores the file, whatever
happens. A mutant that does not build is unviable; a suite that fails catches it; one that
passes misses it; one that runs past the timeout hangs (counted as caught, as cargo-mutants
counts it).

    scripts/mutants_bindings.py FILE [--sample N] [--timeout S] [--again]
    scripts/mutants_bindings.py src/bindings/python/src/convert.rs
    scripts/mutants_bindings.py src/bindings/node/src/convert.rs --sample 2

--sample N tests every N-th mutant (from the first); --again only those the last run of FILE
missed (after a new test), keeping the rest of its results. Needs cargo-mutants on PATH and the tools
(scripts/tools.sh); the suites run against MONGODB_URI, or a local server started once here.
Results: target/mutants/bindings_<file>/summary.txt (and caught.txt, missed.txt, timeout.txt,
unviable.txt). Exit 0 when at least 90 % of the viable mutants tested are caught or timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SUITES = {
    "python": {
        "package": "dispenser-python",
        "build": ["tests/python/stage.sh"],
        "test": ["tests/python/run.sh", "-x", "-q", "-p", "no:cacheprovider"],
    },
    "node": {
        "package": "dispenser-node",
        "build": ["tests/node/build.sh"],
        # As tests/node/run.sh runs them, on the server started here; a test that waits
        # for an answer a mutant never gives fails after 30 s.
        "test": ["node", "--test", "--test-timeout=30000"]
        + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "node").glob("*.test.js")),
        "env": {"NODE_PATH": str(ROOT / ".tools" / "node" / "node_modules")},
    },
}


def run(command: list, timeout: float, env: dict) -> str:
    """'ok', 'failed' or 'timeout' (the whole process group is killed then)."""
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return "ok" if p.wait(timeout=timeout) == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return "timeout"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--sample", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--again", action="store_true")
    args = parser.parse_args()
    language = next((k for k in SUITES if f"src/bindings/{k}/" in args.file), None)
    if language is None:
        sys.exit(f"mutants_bindings.py: {args.file} is not a file of src/bindings/python or src/bindings/node")
    suite = SUITES[language]
    path = ROOT / args.file
    if not path.is_file():
        sys.exit(f"mutants_bindings.py: no such file: {args.file}")
    listed = subprocess.run(
        ["cargo", "mutants", "--list", "--json", "--diff", "--package", suite["package"],
         "--file", args.file],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )
    mutants = json.loads(listed.stdout)[:: max(1, args.sample)]
    out = ROOT / "target" / "mutants" / ("bindings_" + args.file.replace("src/bindings/", "").replace("/", "_"))
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"caught": [], "missed": [], "timeout": [], "unviable": []}
    if args.again:
        for kind in results:
            f = out / f"{kind}.txt"
            results[kind] = f.read_text().splitlines() if f.exists() else []
        again = set(results["missed"])
        results["missed"] = []
        mutants = [m for m in json.loads(listed.stdout) if m["name"] in again]
    env = dict(os.environ, **suite.get("env", {}))
    server = None
    if not env.get("MONGODB_URI"):
        started = subprocess.run(
            ["scripts/server.sh", "start", "--backend", "memory", "--state", str(out / "server")],
            cwd=ROOT, check=True, capture_output=True, text=True,
        )
        key, _, value = started.stdout.strip().partition("=")
        env[key] = value
        server = True
    original = path.read_bytes()
    tested = len(mutants)
    # SIGTERM (and SIGHUP) unwind as Ctrl-C does, so that the file is restored below.
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    began = time.time()
    try:
        if run(suite["build"], 1200, env) != "ok" or run(suite["test"], args.timeout, env) != "ok":
            sys.exit("mutants_bindings.py: the unmutated build or suite fails: fix that first")
        for i, m in enumerate(mutants, 1):
            with tempfile.NamedTemporaryFile("w", suffix=".diff") as diff:
                diff.write(m["diff"])
                diff.flush()
                subprocess.run(["patch", "--quiet", "--forward", str(path), diff.name], check=True)
            try:
                if run(suite["build"], 1200, env) != "ok":
                    outcome = "unviable"
                else:
                    verdict = run(suite["test"], args.timeout, env)
                    outcome = {"failed": "caught", "ok": "missed", "timeout": "timeout"}[verdict]
            finally:
                path.write_bytes(original)
            results[outcome].append(m["name"])
            print(f"[{i}/{len(mutants)}] {outcome}: {m['name']}", flush=True)
    finally:
        path.write_bytes(original)
        if server:
            subprocess.run(
                ["scripts/server.sh", "stop", "--state", str(out / "server")], cwd=ROOT,
                capture_output=True,
            )
    for kind, names in results.items():
        (out / f"{kind}.txt").write_text("".join(n + "\n" for n in names))
    viable = len(results["caught"]) + len(results["missed"]) + len(results["timeout"])
    share = 100 * (len(results["caught"]) + len(results["timeout"])) // viable if viable else 100
    summary = (
        f"{args.file}: {sum(map(len, results.values()))} mutants ({tested} tested in this run): caught "
        f"{len(results['caught'])}, missed {len(results['missed'])}, timeout "
        f"{len(results['timeout'])}, unviable {len(results['unviable'])}; {share} % of {viable} "
        f"viable caught or timed out; {int(time.time() - began)} s\n"
        + "".join(f"    missed: {n}\n" for n in results["missed"])
    )
    (out / "summary.txt").write_text(summary)
    print(summary, end="")
    return 0 if share >= 90 else 1


if __name__ == "__main__":
    sys.exit(main())
