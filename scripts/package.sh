#!/usr/bin/env bash
# Builds the packages a release publishes, into one folder (default target/packages):
#   dispenser_mongodb-V-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
#                                     the Python wheel of each target (abi3: CPython 3.9+;
#                                     musllinux_1_2 for a musl target)
#   dispenser_mongodb-V.tar.gz        the Python sdist: the core library and the binding only
#   dispenser-V.tgz                   the npm package `dispenser`: JavaScript, declarations, the
#                                     loader; no binary, no install script
#   dispenser-linux-x64-gnu-V.tgz     the npm package of each target's addon (stripped)
#   scripts/package.sh                          # release: every target of TARGETS this machine
#                                               # has the Rust standard library of (others are
#                                               # skipped, named)
#   scripts/package.sh --target T [OUT]         # release: target T only (fails if it cannot)
#   scripts/package.sh --profile dev [OUT]      # the tests' debug builds, packaged (below)
# Release builds go to their own target directory, target/package (DISPENSER_PACKAGE_TARGET_DIR),
# so they never disturb the debug builds in target/debug. Linux only: the wheel is linked by Zig
# (maturin --zig, from scripts/tools.sh --packaging) against glibc 2.17, and so is the addon
# (the same Zig, through the wrappers maturin writes), so both load on any glibc 2.17+ system;
# auditwheel checks the wheel's tag.
# The dev profile packages the debug builds the tests compile (the same cargo commands as
# tests/python/stage.sh and tests/node/build.sh, so nothing is compiled twice): a wheel assembled
# by scripts/wheel.py (tagged linux_x86_64: it is linked against this machine's glibc) and the
# npm packages of this machine's platform, in target/packages-dev. No sdist (it needs maturin).
# Prints the output folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

# The Linux targets this script packages. A release builds each with this script:
# .github/workflows/release.yml's Linux legs run `scripts/package.sh --target T dist` for exactly
# these (tests/python/test_packages.py checks that the two agree).
TARGETS=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-gnu aarch64-unknown-linux-musl)

usage() {
  echo "usage: scripts/package.sh [--profile release|dev] [--target TRIPLE]... [OUT]" >&2
  exit 2
}
profile=release
targets=()
out=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --profile)
      [ "$#" -ge 2 ] || usage
      profile=$2
      shift 2
      ;;
    --target)
      [ "$#" -ge 2 ] || usage
      targets+=("$2")
      shift 2
      ;;
    -h | --help) usage ;;
    -*) usage ;;
    *)
      [ -z "$out" ] || usage
      out=$1
      shift
      ;;
  esac
done
case "$profile" in
  release | dev) ;;
  *)
    echo "scripts/package.sh: unknown profile '$profile' (release or dev)" >&2
    exit 2
    ;;
esac
require_cargo package.sh
started=$(date +%s)
root=$PWD
target=${CARGO_TARGET_DIR:-$root/target}
if [ -z "$out" ]; then
  if [ "$profile" = dev ]; then out=$target/packages-dev; else out=$target/packages; fi
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The packages an earlier run left there go: the folder holds this run's only.
rm -f "$out"/dispenser_mongodb-*.whl "$out"/dispenser_mongodb-*.tar.gz "$out"/dispenser-*.tgz
work=$(mktemp -d "${TMPDIR:-/tmp}/dispenser-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' src/bindings/node/Cargo.toml | head -n 1)
node_version=$(node -p "require('./src/bindings/node/package.json').version")
if [ "$version" != "$node_version" ]; then
  echo "scripts/package.sh: src/bindings/node/Cargo.toml says $version, package.json $node_version" >&2
  exit 1
fi

# platform TRIPLE: the npm platform name of a Rust target (napi's: linux-x64-gnu, ...).
platform() {
  local arch
  case "$1" in
    x86_64-*) arch=x64 ;;
    aarch64-*) arch=arm64 ;;
    *)
      echo "scripts/package.sh: no npm platform for $1" >&2
      exit 2
      ;;
  esac
  case "$1" in
    *-linux-gnu) echo "linux-$arch-gnu" ;;
    *-linux-musl) echo "linux-$arch-musl" ;;
    *)
      echo "scripts/package.sh: $1 is not a Linux target" >&2
      exit 2
      ;;
  esac
}

# pack DIR: `npm pack` of DIR into $out (no scripts run); prints the tarball's name.
pack() {
  (cd "$1" && npm pack --ignore-scripts --silent --pack-destination "$out") | tail -n 1
}

# node_platform_package PLATFORM ADDON: the npm package of PLATFORM (npm/PLATFORM/ of the
# binding: package.json and README) with the addon and the licences, packed into $out.
node_platform_package() {
  local dir=$work/npm/$1
  mkdir -p "$dir"
  cp "src/bindings/node/npm/$1/package.json" "src/bindings/node/npm/$1/README.md" \
    src/bindings/node/LICENSE-MIT src/bindings/node/LICENSE-APACHE "$dir/"
  cp "$2" "$dir/dispenser.$1.node"
  pack "$dir" >/dev/null
}

# The main npm package: the same for every target (packed from src/bindings/node, whose
# `files` leave out any addon built there for the tests).
node_main_package() {
  pack src/bindings/node >/dev/null
}

if [ "$profile" = dev ]; then
  if [ "${#targets[@]}" -gt 0 ]; then
    echo "scripts/package.sh: the dev profile packages this machine's build only (no --target)" >&2
    exit 2
  fi
  # The same commands as tests/python/stage.sh and tests/node/build.sh: cargo resolves the
  # dependencies' features as for `cargo test` and reuses what the Rust tests built.
  cargo build --locked -p dispenser -p dispenser-server -p dispenser-cli -p dispenser-python --all-targets >&2
  cargo build --locked -p dispenser -p dispenser-server -p dispenser-cli -p dispenser-node --all-targets >&2
  host=$(rustc -vV | sed -n 's/^host: //p')
  # Without their debug info (symbols stay: a backtrace still names its functions), the debug
  # builds pack and install in seconds (the extension of a full debug build: 235 MB, 53 MB so).
  for lib in lib_dispenser.so libdispenser_node.so; do
    if command -v strip >/dev/null 2>&1; then
      strip --strip-debug -o "$work/$lib" "$target/debug/$lib"
    else
      cp "$target/debug/$lib" "$work/$lib"
    fi
  done
  python3 scripts/wheel.py "$work/lib_dispenser.so" "$out" >/dev/null
  node_main_package
  node_platform_package "$(platform "$host")" "$work/libdispenser_node.so"
else
  explicit=1
  if [ "${#targets[@]}" -eq 0 ]; then
    targets=("${TARGETS[@]}")
    explicit=""
  fi
  scripts/tools.sh --packaging
  # The build venv first on PATH: maturin finds Zig as its interpreter's `python -m ziglang`.
  export PATH="$root/.tools/buildvenv/bin:$PATH"
  maturin=$root/.tools/buildvenv/bin/maturin
  auditwheel=$root/.tools/buildvenv/bin/auditwheel
  package_target=${DISPENSER_PACKAGE_TARGET_DIR:-$target/package}
  sysroot=$(rustc --print sysroot)
  built=()
  skipped=()
  for t in "${targets[@]}"; do
    p=$(platform "$t")
    if [ ! -d "$sysroot/lib/rustlib/$t/lib" ]; then
      echo "scripts/package.sh: $t: the Rust standard library for it is not installed (rustup target add $t)" >&2
      if [ -n "$explicit" ]; then
        exit 3
      fi
      skipped+=("$t")
      continue
    fi
    arch=${t%%-*}
    case "$t" in
      *-gnu) compatibility=manylinux2014 zig_triple=$t.2.17 tag=manylinux_2_17_$arch ;;
      *-musl) compatibility=musllinux_1_2 zig_triple=$t tag=musllinux_1_2_$arch ;;
    esac
    # The Python wheel: maturin links with Zig for the compatibility's C library.
    echo "scripts/package.sh: $t: the Python wheel ($compatibility)" >&2
    "$maturin" build --release --locked --zig --compatibility "$compatibility" --target "$t" \
      -m src/bindings/python/Cargo.toml --target-dir "$package_target" -o "$work/wheels" >&2
    wheel=$(ls "$work"/wheels/dispenser_mongodb-"$version"-cp39-abi3-*"$arch".whl)
    "$auditwheel" show "$wheel" >"$work/auditwheel.txt"
    if ! grep -q "\"$tag\"" "$work/auditwheel.txt"; then
      echo "scripts/package.sh: auditwheel does not find $wheel consistent with $tag:" >&2
      cat "$work/auditwheel.txt" >&2
      exit 1
    fi
    mv "$wheel" "$out/"
    # The Node.js addon: cargo, in the same target directory, linked by the same Zig through
    # the wrappers maturin's build just wrote (cargo-zigbuild's, as napi's own cross build
    # uses): the same linker and C compiler, so cargo reuses the dependencies the wheel's build
    # compiled with the same features.
    echo "scripts/package.sh: $t: the Node.js addon ($p)" >&2
    wrapper=$(ls -t "${XDG_CACHE_HOME:-$HOME/.cache}"/cargo-zigbuild/*/wrappers/*/zigcc-"$zig_triple"-*.sh | head -n 1)
    wrappers=$(dirname "$wrapper")
    triple=$(printf '%s' "$t" | tr 'a-z-' 'A-Z_')
    lower=$(printf '%s' "$t" | tr '-' '_')
    zig_env=("CARGO_TARGET_${triple}_LINKER=$wrapper" "CC_$lower=$wrapper"
      "CXX_$lower=$(ls -t "$wrappers"/zigcxx-"$zig_triple"-*.sh | head -n 1)" "AR_$lower=$wrappers/ar"
      "RANLIB_$lower=$wrappers/zigranlib.sh" "CARGO_ZIGBUILD_TARGET_$lower=$zig_triple"
      "CARGO_ZIGBUILD_TARGET=$zig_triple")
    case "$t" in
      # A musl cdylib links the C library dynamically, as maturin builds the wheel's.
      *-musl) zig_env+=("CARGO_ENCODED_RUSTFLAGS=-C"$'\x1f'"target-feature=-crt-static") ;;
    esac
    if [ "$t" = "$(rustc -vV | sed -n 's/^host: //p')" ]; then
      # As cargo-zigbuild does when the target is the host: build scripts and proc macros are
      # linked by the host's linker, not by Zig (cargo's target-applies-to-host, unstable, so
      # cargo-zigbuild turns on its channel override; without the same here, cargo would
      # compile every dependency again).
      zig_env+=(__CARGO_TEST_CHANNEL_OVERRIDE_DO_NOT_USE_THIS=nightly
        CARGO_UNSTABLE_TARGET_APPLIES_TO_HOST=true CARGO_TARGET_APPLIES_TO_HOST=false)
    fi
    env "${zig_env[@]}" \
      cargo build --locked --release -p dispenser-node --target "$t" --target-dir "$package_target" >&2
    node_platform_package "$p" "$package_target/$t/release/libdispenser_node.so"
    built+=("$t")
  done
  if [ "${#built[@]}" -eq 0 ]; then
    echo "scripts/package.sh: no target could be built" >&2
    exit 3
  fi
  echo "scripts/package.sh: the Python sdist" >&2
  "$maturin" sdist -m src/bindings/python/Cargo.toml -o "$out" >&2
  node_main_package
  if [ "${#skipped[@]}" -gt 0 ]; then
    echo "scripts/package.sh: skipped (no Rust standard library here; the release workflow builds them): ${skipped[*]}" >&2
  fi
fi
# What each package holds: each wheel the package's Python files and its extension, with the
# licences; the main npm package no addon; each platform package its addon.
python3 - "$out" "$version" <<'EOF'
import pathlib, sys, tarfile, zipfile
out, version = pathlib.Path(sys.argv[1]), sys.argv[2]
sources = sorted(p.name for p in pathlib.Path("src/bindings/python/python/dispenser").iterdir())
for wheel in out.glob(f"dispenser_mongodb-{version}-*.whl"):
    names = zipfile.ZipFile(wheel).namelist()
    info = f"dispenser_mongodb-{version}.dist-info"
    got = sorted(n for n in names if not n.startswith(info + "/"))
    want = sorted([f"dispenser/{n}" for n in sources] + ["dispenser/_dispenser.abi3.so"])
    assert got == want, f"{wheel.name}: {got} != {want}"
    for n in ("METADATA", "WHEEL", "RECORD", "licenses/LICENSE-MIT", "licenses/LICENSE-APACHE"):
        assert f"{info}/{n}" in names, f"{wheel.name} has no {info}/{n}"
main = sorted(tarfile.open(out / f"dispenser-{version}.tgz").getnames())
assert not [n for n in main if n.endswith(".node")], f"the main npm package holds an addon: {main}"
assert "package/native.js" in main and "package/LICENSE-MIT" in main, main
for addon in out.glob(f"dispenser-*-{version}.tgz"):
    platform = addon.name[len("dispenser-"):-len(f"-{version}.tgz")]
    got = sorted(tarfile.open(addon).getnames())
    want = sorted(f"package/{n}" for n in ["package.json", "README.md", "LICENSE-MIT",
                                           "LICENSE-APACHE", f"dispenser.{platform}.node"])
    assert got == want, f"{addon.name}: {got} != {want}"
EOF
echo "scripts/package.sh: $profile packages in $out ($(($(date +%s) - started)) s):" >&2
for f in "$out"/*.whl "$out"/*.tar.gz "$out"/*.tgz; do
  if [ -f "$f" ]; then
    printf '  %10d  %s\n' "$(wc -c <"$f")" "${f##*/}" >&2
  fi
done
echo "$out"
