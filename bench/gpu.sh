#!/usr/bin/env bash
# The GPU suite on one CUDA GPU (sized for an H200), in about 8 minutes, with nothing but torch
# installed: fxremat is imported from this checkout, matplotlib is optional (plots are skipped
# with a message when it is missing).
#
#   bench/gpu.sh [OUT_DIR] [extra `python -m bench` options]
#
# Order: GPT-2 small (d=768, 12 heads, seq 1024, batch 8; Inductor), the ResNet depth sweep (64
# channels, 32x32, batch 64; depths 32 and 128, through the eager compiler so every depth is
# comparable), the largest batch under a 4 GiB cap (ResNet-16, min-cut vs fxremat), Chen's
# 1,000-layer case (500 BasicBlocks), ResNet-50 (224x224, batch 64) and U-Net (256x256) through
# Inductor, then the budget sweeps.  Whatever would start after the deadline (390 s) is recorded
# as skipped; results.json is rewritten after every contender, so a kill loses nothing measured.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-bench/out/gpu-$(date +%Y-%m-%d_%H%M%S)}"
shift || true
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'bench/gpu.sh: no CUDA device')" || exit 2
timeout --signal=INT --kill-after=20 510 python -m bench --device cuda --gpu-suite --deadline-s 390 --out "$OUT" "$@"
rc=$?
if [ ! -f "$OUT/results.md" ] && [ -f "$OUT/results.json" ]; then
    python -m bench --from-json "$OUT/results.json" || true   # interrupted: render what was measured
fi
echo "bench/gpu.sh: exit $rc; results in $OUT (results.json, results.md, *.png if matplotlib is installed)"
exit $rc
