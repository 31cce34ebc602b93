#!/usr/bin/env bash
# Packs what scripts/gpu/check.sh needs on a GPU machine into <carry dir> (the device tool's carried folder):
# this checkout's files without the fixtures / bundled model (the machine's copy of the repository has them),
# the production node_modules (node-api headers included; no dev dependencies), and the compiled dist/.
# On the machine: tar -xJf src.tar.xz; tar -xJf nm.tar.xz; tar -xJf dist.tar.xz; cp -r <repo>/test/fixtures test/.
# usage: scripts/gpu/pack.sh <carry dir>
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=$1
mkdir -p "$dest"
git ls-files -co --exclude-standard | grep -v '^test/fixtures/\|^examples/models/' | tar -cf - -T - | xz -6 -T2 >"$dest/src.tar.xz"
# Production packages (a package's nested node_modules are its own dependencies, so tar's recursion is right).
npm ls --omit=dev --all --parseable 2>/dev/null | sed "s|^$PWD/||" | grep '^node_modules/' | sort -u |
  tar -cf - -T - | xz -6 -T2 >"$dest/nm.tar.xz"
npx --no-install tsc -p tsconfig.json
tar -cf - dist/launcher dist/worker dist/bench dist/test/helpers | xz -6 -T2 >"$dest/dist.tar.xz"
git rev-parse --short HEAD >"$dest/COMMIT"
ls -la "$dest"
