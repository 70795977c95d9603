#!/usr/bin/env python3
"""Assembles the Python wheel of dispenser-mongodb from an extension cargo already built: what
scripts/package.sh does in the dev profile, where a maturin build would compile the binding and
its dependencies again with other settings. The wheel has the files, names and metadata maturin
gives the release wheel (the package's sources and stubs, `dispenser/_dispenser.abi3.so`, the
dist-info with METADATA from pyproject.toml and the README, the licences, WHEEL and RECORD); its
platform tag is the plain `linux_x86_64` (a build linked against this machine's glibc claims no
manylinux compatibility).

    scripts/wheel.py EXTENSION OUT_DIR      # prints the wheel's path
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import platform
import re
import sys
import zipfile

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    sys.exit("scripts/wheel.py: needs Python 3.11 or newer (tomllib)")

ROOT = pathlib.Path(__file__).resolve().parents[1]
BINDING = ROOT / "src" / "bindings" / "python"


def version() -> str:
    """The binding crate's version (pyproject.toml's version is dynamic: maturin takes it)."""
    manifest = tomllib.loads((BINDING / "Cargo.toml").read_text())
    return manifest["package"]["version"]


def metadata(project: dict, ver: str) -> str:
    """Core metadata 2.4, the fields maturin writes from [project]."""
    lines = ["Metadata-Version: 2.4", f"Name: {project['name']}", f"Version: {ver}"]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"License-File: {f}" for f in project.get("license-files", [])]
    lines.append(f"Summary: {project['description']}")
    if project.get("keywords"):
        lines.append(f"Keywords: {','.join(project['keywords'])}")
    lines.append(f"License-Expression: {project['license']}")
    lines.append(f"Requires-Python: {project['requires-python']}")
    lines.append("Description-Content-Type: text/markdown; charset=UTF-8; variant=GFM")
    lines += [f"Project-URL: {k}, {v}" for k, v in sorted(project.get("urls", {}).items())]
    readme = (BINDING / project["readme"]).read_text()
    return "\n".join(lines) + "\n\n" + readme


def platform_tag() -> str:
    machine = platform.machine().lower()
    system = sys.platform
    if system.startswith("linux"):
        return f"linux_{machine}"
    sys.exit(f"scripts/wheel.py: a dev wheel is assembled on Linux only (this is {system})")


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: scripts/wheel.py EXTENSION OUT_DIR")
    extension, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    pyproject = tomllib.loads((BINDING / "pyproject.toml").read_text())
    project, maturin = pyproject["project"], pyproject["tool"]["maturin"]
    ver = version()
    dist = re.sub(r"[-_.]+", "_", project["name"]).lower()
    tag = f"cp39-abi3-{platform_tag()}"
    package, module = maturin["module-name"].split(".")
    source = BINDING / maturin["python-source"] / package
    info = f"{dist}-{ver}.dist-info"
    files: list[tuple[str, bytes]] = []
    for path in sorted(source.iterdir()):
        if path.is_file() and path.suffix in (".py", ".pyi", ".typed"):
            files.append((f"{package}/{path.name}", path.read_bytes()))
    files.append((f"{package}/{module}.abi3.so", extension.read_bytes()))
    files.append((f"{info}/METADATA", metadata(project, ver).encode()))
    wheel = f"Wheel-Version: 1.0\nGenerator: scripts/wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{info}/WHEEL", wheel.encode()))
    for name in project.get("license-files", []):
        files.append((f"{info}/licenses/{name}", (BINDING / name).read_bytes()))
    record = "".join(record_line(n, d) + "\n" for n, d in files) + f"{info}/RECORD,,\n"
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{dist}-{ver}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in files:
            info_ = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info_.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            info_.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info_, data, compresslevel=1)
        z.writestr(f"{info}/RECORD", record)
    print(target)


if __name__ == "__main__":
    main()
