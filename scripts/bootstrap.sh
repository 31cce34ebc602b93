#!/usr/bin/env bash
# Brings a fresh Debian/Ubuntu machine (or this checkout) to a built state: the Debian packages the native build and
# the MPI launcher need, npm dependencies, the native addon + engine tests, and the TypeScript build. Idempotent and
# quick when everything is already in place. Prints the exact apt-get line when it cannot install packages itself.
set -euo pipefail
cd "$(dirname "$0")/.."

# curl: the tests send the seeds' curl commands verbatim; iproute2: the multi-host test's network namespaces;
# slurmctld slurmd slurm-client munge: the Slurm tests start a real cluster (mpi/pmix comes with the plugins).
PACKAGES=(cmake g++ make pkg-config libopenblas-dev libopenmpi-dev openmpi-bin curl iproute2 slurmctld slurmd slurm-client munge)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "bootstrap: cannot install packages (not root or no apt-get). Run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# npm dependencies: only when package-lock.json changed since the last install.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "bootstrap: npm ci" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi

# Native build (engine, addon, engine tests). cmake-js uses node-api-headers (package.json "binary"), never the
# network; CMake rebuilds only what changed.
echo "bootstrap: building native/ (cmake-js)" >&2
mkdir -p build
jobs=$(nproc 2>/dev/null || echo 2)
npx --no-install cmake-js build --directory native --out build/native --parallel "$jobs" >build/native-build.log 2>&1 \
  || { mkdir -p build; tail -40 build/native-build.log >&2; echo "bootstrap: native build failed (full log: build/native-build.log)" >&2; exit 1; }

echo "bootstrap: compiling TypeScript" >&2
npx --no-install tsc -p tsconfig.json
echo "bootstrap: ready" >&2
