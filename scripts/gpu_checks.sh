#!/usr/bin/env bash
# The checks that need a real NVIDIA GPU: print what the probe sees, then run the tests marked gpu.
# Usage (on a GPU machine, in the project's environment with torch installed): scripts/gpu_checks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
echo "== nvidia-smi"
nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,mig.mode.current --format=csv || true
echo "== probe in this process"
"$PYTHON" - <<'PY'
import json
import eugo_jupyter as eugo
from eugo_jupyter.gpu.probe import probe

print(json.dumps(probe(requested_gpus=1, scope="kernel"), indent=1, default=str))
print(eugo.check(local=True))
eugo.hpc.init(num_cpus=2)
print(eugo.check(num_gpus=1))
print(eugo.check(num_gpus=0.25))
print("gpu_fraction_for('6GB') =", eugo.gpu.gpu_fraction_for("6GB"))
eugo.hpc.shutdown()
PY
echo "== pytest -m gpu"
"$PYTHON" -m pytest tests/gpu -m gpu -v -s -p no:cacheprovider
