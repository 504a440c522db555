#!/usr/bin/env bash
# Run-to-run spread of the kernels every runtime shares (sparselu, alignment, multisort: the
# same machine code under weft, TBB and OpenMP), as the bench measures them: `runs` separate
# processes of `weft bench cpu --only <benchmark> --samples <samples>`, each one's ratio of weft
# to each peer and to the faster peer (issue 2's target), then the median and range of that last
# ratio over the runs; and, pooled over every run, the median of the per-round ratios (weft's
# sample over each peer's of the same round: the harness runs every contender once a round, so
# the machine's slow drifts, which move a run's medians by several per cent, cancel).
#   bash lab/probes/parity_runs.sh <weft binary> <benchmark> [runs=10] [samples=21]
set -euo pipefail
weft=$1
bench=$2
runs=${3:-10}
samples=${4:-21}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $bench: $runs runs of '$weft bench cpu --only $bench --samples $samples'"
for r in $(seq 1 "$runs"); do
  "$weft" bench cpu --only "$bench" --samples "$samples" --json "$tmp/$r.json" > "$tmp/$r.log" 2>&1
done
python3 - "$bench" "$tmp" "$runs" <<'EOF'
import json, statistics, sys
bench, tmp, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
best = []
paired = {}
for r in range(1, runs + 1):
    d = json.load(open(f"{tmp}/{r}.json"))
    rows = [c for c in d["comparisons"] if c["benchmark"] == bench]
    weft = rows[0]["weft"]
    peers = {c["peer"]: c["peer_value"] for c in rows if c["peer"] in ("tbb", "openmp")}
    faster = min(peers.values())
    for c in rows:
        if c["peer"] in peers:
            paired.setdefault(c["peer"], []).extend(
                w / p for w, p in zip(c["weft_samples"], c["peer_samples"]))
    best.append(weft / faster)
    print(f"run {r:2d}: weft {weft:.4f} s, " +
          ", ".join(f"{p} {t:.4f} (x{weft / t:.3f})" for p, t in peers.items()) +
          f"; x the faster peer {weft / faster:.3f}")
print(f"x the faster peer over {runs} runs: median {statistics.median(best):.3f}, "
      f"range {min(best):.3f}-{max(best):.3f}, at or below 1.0 in {sum(b <= 1.0 for b in best)}")
for p, r in paired.items():
    r.sort()
    q = lambda f: r[int(f * (len(r) - 1))]
    print(f"per-round weft/{p} over all runs ({len(r)} rounds): median {statistics.median(r):.3f}, "
          f"quartiles {q(0.25):.3f}-{q(0.75):.3f}")
EOF
