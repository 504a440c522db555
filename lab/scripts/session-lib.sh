# Shared by the lab's one-call device scripts (source it from the repository root).
#
# start_session: sets $out ($OUT, or ./session-out) and $work (a fresh folder), and packs $work
# into $out/session.tar.gz when the script exits (the device tool brings back eight files at
# most, so each step writes into $work).
start_session() {
  session_t0=$(date +%s)
  out=${OUT:-session-out}
  mkdir -p "$out"
  work=$(mktemp -d)
  trap 'tar czf "$out/session.tar.gz" -C "$work" .' EXIT
}

# at TEXT: a step's heading, with the seconds since start_session.
at() { echo "== $1 (at $(($(date +%s) - session_t0)) s)"; }

# split_tail_ab WEFT ROUNDS APP...: `weft bench split --only APP...` with idle cores taking the
# tail and without, alternated, ROUNDS rounds, each run with tables of its own (so that every
# run starts cold), into $work/split-{plain,tail}-R/ and $work/split-{plain,tail}-R.log; prints
# each run's comparison rows. (At 6e19e37, where decision 033's runs were made, no flag was the
# plain arm: the tail became the default after them.)
split_tail_ab() {
  local weft=$1 rounds=$2
  shift 2
  local only=() app r variant flag run
  for app in "$@"; do only+=(--only "$app"); done
  for ((r = 1; r <= rounds; ++r)); do
    for variant in plain tail; do
      flag=--no-take-tail
      [ "$variant" = tail ] && flag=--take-tail
      run=split-$variant-$r
      mkdir -p "$work/$run"
      timeout 150 "$weft" bench split "${only[@]}" --db "$work/$run/tables.db" "$flag" \
        --json "$work/$run/split.json" > "$work/$run.log" 2>&1
      echo "== $run"
      grep -E '^\| (triad|percore|spmv)[a-z_]* \| [a-z_]+ \|' "$work/$run/split.md" | head -24
    done
  done
}

# set_spmv_ring_depth LINE: puts LINE (C++ that sets o.ring_depth) into spmv_bs_pool_options
# (apps/gpu/spmv_bs.cpp) after the line that sets the depth, or, in a tree from before that
# line, after the program's, so that LINE's depth holds. Fails when the file did not change.
set_spmv_ring_depth() {
  local anchor='  o.program = spmv_bs_program();'
  grep -q '  o.ring_depth = 1;' apps/gpu/spmv_bs.cpp && anchor='  o.ring_depth = 1;'
  sed -i "s|^$anchor\$|$anchor\n  $1|" apps/gpu/spmv_bs.cpp
  grep -qF "$1" apps/gpu/spmv_bs.cpp || { echo "set_spmv_ring_depth: patch failed" >&2; return 1; }
}

# sanitize BINARY FILTER LIMIT: compute-sanitizer memcheck, racecheck and synccheck on the gtest
# binary's tests FILTER, each within LIMIT seconds (racecheck is the slowest by far); prints
# each one's tail and exit status (124: out of time), with the seconds since $t0.
sanitize() {
  local tool
  for tool in memcheck racecheck synccheck; do
    echo "== compute-sanitizer $tool: $2 (at $(($(date +%s) - t0)) s)"
    timeout "$3" compute-sanitizer --tool "$tool" --error-exitcode 3 "$1" --gtest_brief=1 \
      --gtest_filter="$2" 2>&1 | tail -4
    echo "rc ${PIPESTATUS[0]}"
  done
}

# cholesky_checks: the applications' Cholesky tests (built in build-gpu), then compute-sanitizer
# synccheck, memcheck and racecheck on CholeskyPool's (the TheWide* tests); the caller's at()
# stamps each tool's start.
cholesky_checks() {
  timeout 60 build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
    --gtest_filter='CholeskyOnGpu.*' 2>&1 | grep -vE "^Running main"
  local tool
  for tool in synccheck memcheck racecheck; do
    at "$tool"
    timeout 90 compute-sanitizer --tool "$tool" --error-exitcode 3 --print-limit 5 \
      build-gpu/tests/weft_gpu_apps_device_tests --gtest_brief=1 \
      --gtest_filter='CholeskyOnGpu.TheWide*' 2>&1 | grep -vE "Host Frame" | tail -8
  done
}
