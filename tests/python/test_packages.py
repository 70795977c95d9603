"""The packages: the release workflow builds what scripts/package.sh builds here (its Linux legs
run the script, one target of the script's TARGETS each), every manifest names the same
platforms, version, licence and repository, and the npm package has no install script. (What
the built wheel and tarballs hold, scripts/package.sh checks as it makes them; that the suite
imports the installed package, tests/python/run.sh --installed.)"""

from __future__ import annotations

import json
import re
import tomllib

from conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
NODE = ROOT / "src" / "bindings" / "node"
PYTHON = ROOT / "src" / "bindings" / "python"


def parse_yaml(text: str):
    """The block YAML the workflow is written in: mappings, `- ` lists, one-line `[a, b]` lists,
    `|` blocks, quoted and plain scalars, comments. Enough for release.yml, not YAML at large."""
    lines = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped and not stripped.startswith("#"):
            lines.append((len(raw) - len(raw.lstrip(" ")), raw.strip()))
        elif not stripped:
            lines.append((None, ""))
    pos = 0

    def scalar(s: str):
        s = re.sub(r"\s+#.*$", "", s) if not s.startswith(("'", '"')) else s
        if s.startswith("[") and s.endswith("]"):
            return [scalar(x.strip()) for x in s[1:-1].split(",") if x.strip()]
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
            return s[1:-1]
        return s

    def skip_blank():
        nonlocal pos
        while pos < len(lines) and lines[pos][0] is None:
            pos += 1

    def block_text(indent: int) -> str:
        nonlocal pos
        out = []
        while pos < len(lines) and (lines[pos][0] is None or lines[pos][0] > indent):
            out.append(lines[pos][1])
            pos += 1
        return "\n".join(out).strip() + "\n"

    def value_after(rest: str, indent: int):
        nonlocal pos
        if rest == "|":
            return block_text(indent)
        if rest:
            return scalar(rest)
        skip_blank()
        if pos < len(lines) and lines[pos][0] > indent:
            return node(lines[pos][0])
        if pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("- "):
            return node(indent)
        return None

    def mapping_entries(indent: int, into: dict):
        nonlocal pos
        while True:
            skip_blank()
            if pos >= len(lines) or lines[pos][0] != indent or lines[pos][1].startswith("- "):
                return into
            key, _, rest = lines[pos][1].partition(":")
            pos += 1
            into[scalar(key.strip())] = value_after(rest.strip(), indent)

    def node(indent: int):
        nonlocal pos
        skip_blank()
        if lines[pos][1].startswith("- "):
            items = []
            while True:
                skip_blank()
                if pos >= len(lines) or lines[pos][0] != indent or not lines[pos][1].startswith("- "):
                    return items
                first = lines[pos][1][2:]
                if re.match(r"^[\w.-]+:( |$)", first):
                    key, _, rest = first.partition(":")
                    pos += 1
                    entry = {key.strip(): value_after(rest.strip(), indent + 2)}
                    items.append(mapping_entries(indent + 2, entry))
                else:
                    pos += 1
                    items.append(scalar(first))
        return mapping_entries(indent, {})

    return node(0)


def workflow() -> dict:
    return parse_yaml(WORKFLOW.read_text())


def script_targets() -> list[str]:
    m = re.search(r"^TARGETS=\(([^)]*)\)$", (ROOT / "scripts" / "package.sh").read_text(), re.M)
    assert m, "scripts/package.sh has no TARGETS=(...) line"
    return m.group(1).split()


def node_platform(triple: str) -> str:
    arch = {"x86_64": "x64", "aarch64": "arm64"}[triple.split("-")[0]]
    if "-linux-" in triple:
        return f"linux-{arch}-{triple.rsplit('-', 1)[1]}"
    if "-apple-" in triple:
        return f"darwin-{arch}"
    if "-windows-msvc" in triple:
        return f"win32-{arch}-msvc"
    raise AssertionError(triple)


def package_json() -> dict:
    return json.loads((NODE / "package.json").read_text())


def test_the_parser_reads_the_workflow_shapes_it_relies_on():
    doc = parse_yaml(
        "a:\n  b: [x, 'y']  # c\n  c:\n    - k: 1\n      l: |\n        one\n        two\n    - plain\n"
    )
    assert doc == {"a": {"b": ["x", "y"], "c": [{"k": "1", "l": "one\ntwo\n"}, "plain"]}}


def test_the_workflows_linux_legs_run_scripts_package_sh_for_exactly_its_targets():
    jobs = workflow()["jobs"]
    linux = jobs["linux"]
    assert linux["strategy"]["matrix"]["target"] == script_targets()
    runs = [s["run"].strip() for s in linux["steps"] if "run" in s]
    assert runs == ["scripts/package.sh --target ${{ matrix.target }} dist"]
    # No other job builds a Linux package, and no other job calls the script.
    for name, job in jobs.items():
        if name == "linux":
            continue
        for target in [i.get("target", "") for i in job.get("strategy", {}).get("matrix", {}).get("include", [])]:
            assert "linux" not in target or name == "test", (name, target)
        for step in job.get("steps", []):
            assert "scripts/package.sh" not in step.get("run", ""), name


def test_every_platform_is_built_tested_and_named_by_every_manifest():
    jobs = workflow()["jobs"]
    built = jobs["linux"]["strategy"]["matrix"]["target"] + [
        i["target"] for i in jobs["other"]["strategy"]["matrix"]["include"]
    ]
    tested = [i["target"] for i in jobs["test"]["strategy"]["matrix"]["include"]]
    pkg = package_json()
    assert sorted(built) == sorted(tested) == sorted(pkg["napi"]["targets"])
    platforms = sorted(node_platform(t) for t in built)
    assert sorted(p.name for p in (NODE / "npm").iterdir()) == platforms
    assert sorted(pkg["optionalDependencies"]) == [f"dispenser-{p}" for p in platforms]
    assert set(pkg["optionalDependencies"].values()) == {pkg["version"]}
    for i in jobs["other"]["strategy"]["matrix"]["include"]:
        assert i["platform"] == node_platform(i["target"])
    # The peers' matrix: Linux gnu and musl on x86_64 and aarch64, macOS both, Windows x64.
    assert sorted(platforms) == sorted([
        "linux-x64-gnu", "linux-x64-musl", "linux-arm64-gnu", "linux-arm64-musl",
        "darwin-x64", "darwin-arm64", "win32-x64-msvc",
    ])


def test_each_platform_package_names_its_platform_and_the_main_packages_version():
    pkg = package_json()
    for d in (NODE / "npm").iterdir():
        p = json.loads((d / "package.json").read_text())
        os_, arch = d.name.split("-")[:2]
        assert p["name"] == f"dispenser-{d.name}"
        assert p["version"] == pkg["version"]
        assert p["os"] == [os_] and p["cpu"] == [arch]
        assert p["main"] == f"dispenser.{d.name}.node"
        assert p["files"] == [p["main"], "LICENSE-MIT", "LICENSE-APACHE"]
        if os_ == "linux":
            assert p["libc"] == [{"gnu": "glibc", "musl": "musl"}[d.name.split("-")[2]]]
        assert p["license"] == pkg["license"] and p["repository"] == pkg["repository"]


def test_the_npm_package_installs_without_scripts_and_says_what_it_needs():
    pkg = package_json()
    assert not set(pkg.get("scripts", {})) & {"preinstall", "install", "postinstall", "prepare"}
    assert not any(f.endswith(".node") for f in pkg["files"])
    assert {"index.js", "index.d.ts", "native.js", "native.d.ts", "mongoose.js"} <= set(pkg["files"])
    assert pkg["types"] == "index.d.ts" and pkg["engines"]["node"] == ">= 18"
    assert pkg["peerDependencies"]["mongoose"] == "8.x || 9.x"
    assert pkg["license"] == "MIT OR Apache-2.0"
    for name in ("LICENSE-MIT", "LICENSE-APACHE"):
        assert (NODE / name).is_file() and name in pkg["files"]
    # The loader looks for each platform package by the name the manifests give it.
    loader = (NODE / "native.js").read_text()
    for dep in pkg["optionalDependencies"]:
        assert f"require('{dep}')" in loader, dep


def test_the_versions_licences_and_repository_agree():
    pkg = package_json()
    pyproject = tomllib.loads((PYTHON / "pyproject.toml").read_text())
    project = pyproject["project"]
    for manifest in (NODE / "Cargo.toml", PYTHON / "Cargo.toml"):
        assert tomllib.loads(manifest.read_text())["package"]["version"] == pkg["version"]
    assert project["license"] == pkg["license"]
    assert project["license-files"] == ["LICENSE-MIT", "LICENSE-APACHE"]
    assert all((PYTHON / f).is_file() for f in project["license-files"])
    assert pkg["repository"]["url"] == f"git+{project['urls']['Repository']}.git"
    assert project["requires-python"] == ">=3.9"
    binding = tomllib.loads((PYTHON / "Cargo.toml").read_text())
    assert "abi3-py39" in binding["dependencies"]["pyo3"]["features"]


def test_the_workflows_pins_are_the_tools_pins():
    tools = (ROOT / "scripts" / "tools.sh").read_text()
    pins = dict(re.findall(r"^([A-Z_]+_VERSION)=(\S+)$", tools, re.M))
    text = WORKFLOW.read_text()
    named = {
        "pytest": "PYTEST_VERSION", "pymongo": "PYMONGO_VERSION", "motor": "MOTOR_VERSION",
        "mongodb": "NODE_MONGODB_VERSION", "mongoose": "MONGOOSE_VERSION",
        "typescript": "TYPESCRIPT_VERSION", "maturin-version: ": "MATURIN_VERSION",
    }
    found = re.findall(r"\b([a-z]+)(?:==|@)(\d[\w.]*)", text)
    found += [("maturin-version: ", v) for v in re.findall(r'maturin-version: "([^"]+)"', text)]
    assert found
    for name, version in found:
        if name in named:
            assert pins[named[name]] == version, (name, version)
