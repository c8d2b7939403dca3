#!/usr/bin/env bash
# Every GPU check and benchmark of the project, in parts that fit one device call each (10 min).
# Run from the repository root on the GPU box; results land in $OUT (default ./gpu-out).
#
#   bash bench/gpu_session.sh tests                 # pytest -m gpu
#   KWB_TESTS='tests/test_gpu_verifier.py tests/test_search_gpu.py' bash bench/gpu_session.sh tests
#   bash bench/gpu_session.sh sweep evidence        # KernelBench sweep, evidence + sandbox cost
#   bash bench/gpu_session.sh verifier              # verifier bench
#   bash bench/gpu_session.sh sweep verifier        # both in one call (~8.5 min)
#
# Parts: tests (~7 min), sweep (~3.5 min, needs ./.kb with level1-3 of KernelBench), evidence
# (~4 min: bench/evidence_cost.py and bench/sandbox_bench.py), verifier (~5 min), verifier-wide
# (the same bench with cores - 2 candidates in flight: is the default width the limit?), builder
# (~1.5 min: bench/builder_bench.py, the clean builder's start-up), standalone (~3 min:
# bench/standalone_eval.py, eval in a new process with and without the verifier daemon; the
# verifier part ends with the same measurement on its warm cache).
# Dependencies: wheels in ./.whl (made by the device-wheels tool) are installed into /tmp/site
# when present; the box's torch is used as it is.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
# A part's time limit: its own, or what is left of the device call (KWB_CALL_S, default 590 s
# of the 600 s limit), so the script stops a part itself and still prints what it wrote.
limit() {
  local left=$(( ${KWB_CALL_S:-590} - $(elapsed) - 5 ))
  left=$(( left < 1 ? 1 : left )); echo $(( left < $1 ? left : $1 ))
}

if [ -d .whl ]; then
  grep -v cuobjdump .whl/requirements.txt > /tmp/kwb-req.txt
  python3 -m pip install -q --no-index --find-links .whl --target /tmp/site -r /tmp/kwb-req.txt \
    2>&1 | tail -2
  export PYTHONPATH=$PWD:/tmp/site
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
# The device's copy of the tree can carry an older .git than the files: "-dirty" says the files
# are not that commit (seen 2026-12-01: a run of 43b580c reported 13836fc). Pass KWB_COMMIT then.
export KWB_COMMIT=${KWB_COMMIT:-$(git describe --always --dirty --abbrev=7 2>/dev/null || echo unknown)}
echo "setup $(elapsed) s; commit $KWB_COMMIT; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"

for part in "$@"; do
  start=$(date +%s)
  case $part in
    tests)
      # --session-timeout ends the run with its report, where an outer kill would lose it.
      # KWB_TESTS picks test files: since the clean builder (9abb174) the whole GPU suite takes
      # ~15 min on a fresh box, so it runs in two calls (see RESULTS.md).
      # One process (no pytest-xdist on the box; GPU tests never overlap anyway).
      python3 -m pytest -m gpu -p no:cacheprovider -p no:xdist -o addopts="" -v -rfE --timeout 240 \
        --session-timeout $(limit 480) --junitxml="$OUT/gpu.xml" ${KWB_TESTS:-tests} \
        > "$OUT/pytest.txt" 2>&1
      echo "tests rc=$?"; grep -E "FAILED|ERROR" "$OUT/pytest.txt" | tail -15; tail -1 "$OUT/pytest.txt" ;;
    sweep)
      timeout $(limit 260) python3 bench/kernelbench_sweep.py .kb --budget-s $(( $(limit 260) - 30 )) --json "$OUT/sweep.json" \
        > "$OUT/sweep.md" 2> "$OUT/sweep.err"
      echo "sweep rc=$?"; head -3 "$OUT/sweep.md"; grep "^| level" "$OUT/sweep.md" ;;
    verifier)
      timeout $(limit 540) python3 bench/verifier_bench.py "$OUT/verifier_bench.md" > "$OUT/verifier_bench.out" 2>&1
      echo "verifier rc=$?"; grep -E "^(\||\[)|no spare|spares died|torch.compile baseline" "$OUT/verifier_bench.out" | head -20 ;;
    verifier-wide)   # the same with more candidates in flight than the default (cores - 2)
      timeout $(limit 540) python3 bench/verifier_bench.py "$OUT/verifier_bench_wide.md" \
        --verify-workers $(( $(nproc) - 2 )) > "$OUT/verifier_bench_wide.out" 2>&1
      echo "verifier-wide rc=$?"; grep -E "^(\||\[)|no spare|spares died|torch.compile baseline" "$OUT/verifier_bench_wide.out" | head -20 ;;
    standalone)   # standalone eval only, with and without the verifier daemon (~3 min)
      timeout $(limit 300) python3 bench/standalone_eval.py "$OUT/standalone_eval.md" \
        > "$OUT/standalone_eval.out" 2>&1
      echo "standalone rc=$?"; grep -E "through the verifier daemon" "$OUT/standalone_eval.out" ;;
    evidence)
      timeout $(limit 150) python3 bench/evidence_cost.py "$OUT/evidence_cost.md" > "$OUT/evidence_cost.out" 2>&1
      echo "evidence rc=$?"; tail -4 "$OUT/evidence_cost.out"
      timeout $(limit 150) python3 bench/sandbox_bench.py --rounds 3 "$OUT/sandbox_bench.md" > "$OUT/sandbox_bench.out" 2>&1
      echo "sandbox rc=$?"; tail -6 "$OUT/sandbox_bench.out" ;;
    builder)   # the clean builder's start-up, per build vs a spare waiting (no GPU needed)
      timeout $(limit 240) python3 bench/builder_bench.py --builds 3 "$OUT/builder_bench.md" \
        > "$OUT/builder_bench.out" 2>&1
      echo "builder rc=$?"; tail -8 "$OUT/builder_bench.out" ;;
    *) echo "unknown part: $part (tests, sweep, evidence, verifier, verifier-wide, builder, standalone)"; exit 2 ;;
  esac
  echo "$part: $(( $(date +%s) - start )) s (total $(elapsed) s)"
done
