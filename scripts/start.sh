#!/usr/bin/env bash
# The README's first command: build what is missing, then run the main job — a 2-rank cluster (tensor parallel
# over mpirun) serving the bundled model on ports 8000 (HTTP) and 8002 (metrics). Extra arguments go to
# trtllm-launch (e.g. `npm start -- --world-size 4 --oversubscribe`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec node bin/trtllm-launch.js --world-size 2 --oversubscribe "$@"
