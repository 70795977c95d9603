#!/usr/bin/env bash
# The test command: runs every test (unit, integration, doc) against the server in
# MONGODB_URI, or, when it is unset, against a local MongoDB-compatible server (in-memory
# backend) that this script starts and always stops. First installs the tools the tests
# drive (scripts/tools.sh: mongosh, pymongo, openapi-spec-validator into .tools/, cached).
# Exit status: the tests'.
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

require_cargo test.sh
# mongosh and a Python venv for the client and OpenAPI tests (cached in .tools/).
scripts/tools.sh
# Snapshot tests (insta) compare and never write: a mismatch fails. To accept new output:
# INSTA_UPDATE=always scripts/test.sh --test integration cli_ux::  (then review the diff).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
with_local_server test --backend memory -- cargo test --locked "$@"
