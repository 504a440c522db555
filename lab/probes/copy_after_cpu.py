#!/usr/bin/env python3
"""Host-to-device copies of a `weft bench graph --node-log` CSV (timed runs), by what the CPU was
doing when each started: a CPU node running, a CPU node ended less than 0.1 ms before, one ended
earlier, or no CPU node before it in the run. Prints the copies' bandwidth (p10, median) per
group and size.

  python3 lab/probes/copy_after_cpu.py bench/results/h100/graph-nodes.csv
"""
import csv
import statistics
import sys
from collections import defaultdict

for path in sys.argv[1:]:
    runs = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["phase"] == "sample":
                runs[r["run"]].append(r)
    groups = defaultdict(list)
    for rows in runs.values():
        cpu = [(float(r["start_ms"]), float(r["end_ms"])) for r in rows
               if r["device"] == "cpu" and r["node"] != "-"]
        for r in rows:
            if r["node"] != "-" or r["kernel"] != "transfer:h2d":
                continue
            start, ms = float(r["start_ms"]), float(r["ms"])
            ended = [e for _, e in cpu if e <= start]
            if any(a <= start < e for a, e in cpu):
                group = "a CPU node running"
            elif not ended:
                group = "no CPU node before"
            elif start - max(ended) < 0.1:
                group = "< 0.1 ms after a CPU node"
            else:
                group = "later after a CPU node"
            groups[(group, r["size"])].append(int(r["bytes"]) / ms / 1e6)
    print(path)
    for (group, size), gbs in sorted(groups.items()):
        gbs.sort()
        print(f"  {group:26s} {size:5s} n={len(gbs):4d}  GB/s p10 {gbs[len(gbs) // 10]:5.1f}"
              f"  median {statistics.median(gbs):5.1f}")
