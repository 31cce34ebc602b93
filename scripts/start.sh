#!/usr/bin/env bash
# The README's first command: build what is missing, then run the main job on the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec node bin/trtllm-launch.js generate "$@"
