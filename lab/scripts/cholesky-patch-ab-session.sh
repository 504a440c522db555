#!/usr/bin/env bash
# One device call (one H200), about 100 s a stage: the Cholesky trace (cholesky_trace_probe.cu)
# and the tile bodies alone (cholesky_tiles_probe.cu parts4, checked against the host) of the
# tree as it is, then after each lab patch in turn, applied on top of the ones before
# (so each stage's change is its patch's), on the same machine; then, with every patch, the
# applications' Cholesky tests and compute-sanitizer synccheck, memcheck and racecheck on
# CholeskyPool's tests. The patches are taken out again however the script ends, and
# build-gpu's objects built from the patched tree are removed, so that a later call rebuilds.
#   device: WEFT_COMMIT=<hash> bash lab/scripts/cholesky-patch-ab-session.sh PATCH... [-- SIZE...]
#   (WEFT_AB_TESTS=0: the traces only, no tests or sanitizers)
#   e.g. lab/probes/task_shared_as_shared.patch (decision 046); SIZE is N:BLOCK[:big]
#   (default: tiles at 1024 and 2048 and blocks of 2 at 4096 and 8192, on CholeskyPool's shape)
set -uo pipefail
source lab/scripts/session-lib.sh
start_session
patches=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  patches+=("$(realpath "$1")")
  shift
done
[ ${#patches[@]} -gt 0 ] || { echo "usage: $0 PATCH... [-- SIZE...]" >&2; exit 2; }
[ "${1:-}" = "--" ] && shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1024:1:big 2048:1:big 4096:2:big 8192:2:big)
trace() {  # $1: the output's name
  scripts/gpu-build.sh "$work/$1-build" weft_gpu_apps || return 1
  nvcc -std=c++20 -O3 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude \
    -Iapps/gpu -Ilab/probes lab/probes/cholesky_trace_probe.cu build-gpu/apps/libweft_gpu_apps.a \
    build-gpu/src/libweft.a -lopenblas -lhwloc -o "$work/cholesky_trace" \
    > "$work/$1-probe-build.log" 2>&1 || { tail -20 "$work/$1-probe-build.log"; return 1; }
  timeout 120 "$work/cholesky_trace" 3 "${sizes[@]}" > "$work/$1.txt" 2>&1
  grep -E "^n =|host [0-9]|potrf |trsm |syrk |gemm |critical" "$work/$1.txt"
  # The tile bodies alone, each in a kernel of its own, checked against the host's reference
  # (the last column: the largest difference).
  nvcc -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -maxrregcount=168 -Iinclude     -Iapps/gpu -Ilab/probes lab/probes/cholesky_tiles_probe.cu -o "$work/tiles_probe"     > "$work/$1-tiles-build.log" 2>&1 || { tail -20 "$work/$1-tiles-build.log"; return 1; }
  timeout 60 "$work/tiles_probe" parts4 | tee "$work/$1-bodies.txt" | grep -E "^\| (potrf|trsm)"
}
at "trace, as the tree is"
trace base
stamp=$(mktemp)
applied=()
revert() {
  for ((i = ${#applied[@]} - 1; i >= 0; --i)); do patch -R -p1 --no-backup-if-mismatch < "${applied[i]}" > /dev/null; done
  find build-gpu -type f -newer "$stamp" -delete
  tar czf "$out/session.tar.gz" -C "$work" .
}
trap revert EXIT
for patch_file in "${patches[@]}"; do
  name=$(basename "$patch_file" .patch)
  patch -p1 --dry-run --no-backup-if-mismatch < "$patch_file" > /dev/null || { echo "$name does not apply"; exit 1; }
  patch -p1 --no-backup-if-mismatch < "$patch_file" > /dev/null
  applied+=("$patch_file")
  at "trace, with $name"
  trace "with-$name"
done
[ "${WEFT_AB_TESTS:-1}" = 0 ] && { at done; exit 0; }  # traces only
at "apps' Cholesky tests"
scripts/gpu-build.sh "$work/tests-build" weft_gpu_apps_device_tests || exit 1
cholesky_checks
at done
