#!/usr/bin/env python3
"""New over old from `lab/scripts/gpu-ab.sh bench-graph`'s table (graph-ab.txt): per size and
contender, each application's (sum of the new runs' medians) / (sum of the old runs'), and their
mean. A-Free moves nothing between host and device: its ratio is the instance's own drift.

  python3 lab/probes/graph_ab_ratios.py lab/results/h100/copy_back_at_launch_ab-f51081e/graph-ab.txt
"""
import re
import statistics
import sys
from collections import defaultdict


def main(path):
    lines = open(path).read().splitlines()
    runs = lines[0].split()[1:]  # "old 1 new 1 ..." -> pairs
    names = [" ".join(runs[i:i + 2]) for i in range(0, len(runs), 2)]
    ratios = defaultdict(list)
    for line in lines[1:]:
        m = re.match(r"(factor\d)_(\S+) (\w+)\s+(.*)", line)
        if not m:
            continue
        values = [float(v) for v in m.group(4).split()]
        old = sum(v for n, v in zip(names, values) if n.startswith("old"))
        new = sum(v for n, v in zip(names, values) if n.startswith("new"))
        ratios[(m.group(2), m.group(3))].append((m.group(1), new / old))
    print(path)
    for (size, who), r in sorted(ratios.items()):
        cells = " ".join("%s %.3f" % (app, x) for app, x in r)
        print("  %-5s %-7s mean %.3f   %s" % (size, who, statistics.mean(x for _, x in r), cells))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
