#!/usr/bin/env python3
"""The CPU `average` nodes of a `weft bench graph --node-log` CSV (timed runs) split by whether
the node's consumer ran on the GPU, i.e. whether c04e801's kernels streamed its output past the
caches (CpuCall::copied_to_device) or wrote it in place. Prints the median ms per size.
The consumers are the applications' (apps/factors/pipelines.cpp): factor1 AVG (node 2) ->
subtract (3); factor4 AVG (0) -> delta (1), AVG (2) -> multiply (3); factor5 AVG (1) ->
multiply (5).

  python3 lab/probes/average_streamed.py lab/results/h100/graph-c04e801-nodes.csv
"""
import csv
import statistics
import sys
from collections import defaultdict

CONSUMER = {("factor1", 2): 3, ("factor4", 0): 1, ("factor4", 2): 3, ("factor5", 1): 5}

for path in sys.argv[1:]:
    runs = defaultdict(dict)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["phase"] == "sample" and r["node"] != "-":
                runs[r["run"]][int(r["node"])] = r
    groups = defaultdict(list)
    for nodes in runs.values():
        for i, r in nodes.items():
            if r["kernel"] != "average" or r["device"] != "cpu":
                continue
            consumer = nodes.get(CONSUMER[(r["app"], i)])
            where = "streamed (consumer on the GPU)" if consumer["device"] == "gpu" else "in place"
            groups[(r["size"], where)].append(float(r["ms"]))
    print(path)
    for (size, where), ms in sorted(groups.items()):
        print(f"  {size:5s} {where:31s} n={len(ms):4d}  median {statistics.median(ms):7.3f} ms"
              f"  p10 {sorted(ms)[len(ms) // 10]:7.3f}")
