#!/usr/bin/env python3
"""Where the graph runtime waits between nodes, from `weft bench graph --node-log` CSVs (timed
runs only), per size:
  -> K       a GPU node K's start after its GPU producer's end, for the pairs of one chain
             (moving_correlation/20 -> moving_stddev/20 -> rank in factor5; the host callback
             sat between them on the compute stream until c7f25a9);
  d2h        a copy back's start after the last GPU node that ended before it (the dispatcher
             issues it when it hears of the GPU producer);
  cpu start  a CPU node's start after the last copy back or CPU node that ended before it;
  h2d        a copy to the device's start after the CPU node that ended last before it (when
             within 2 ms: the dispatcher issues it when it hears that the CPU node ended);
  first h2d  a run's first copy to the device, after the run's start, and the application,
             size and policy whose median is over 0.2 ms (until the commit after d014b1c the
             dispatcher submitted the CPU nodes ready at the start before it enqueued the
             device's work);
  launch     how long a GPU node's launch held the dispatcher (logs since 0ff55c3: launch_ms),
             and the six slowest launches.
Prints n, median, p90 and max in ms.

  python3 lab/probes/node_gaps.py bench/results/h100/graph-nodes.csv
"""
import csv
import statistics
import sys
from collections import defaultdict

CHAIN = [("moving_correlation/20", "moving_stddev/20"), ("moving_stddev/20", "rank")]


def summary(values):
    v = sorted(values)
    return "n=%4d  median %7.3f  p90 %7.3f  max %7.3f" % (
        len(v), statistics.median(v), v[int(0.9 * (len(v) - 1))], v[-1])


def main(path):
    runs = defaultdict(list)
    for r in csv.DictReader(open(path)):
        if r["phase"] == "sample":
            runs[(r["app"], r["size"], r["policy"], r["run"])].append(r)
    gaps = defaultdict(list)
    launches = []  # (ms, app, size, policy, kernel)
    first_h2d = defaultdict(list)
    for (app, size, _, _), rows in runs.items():
        ends = lambda rs, before: [float(x["end_ms"]) for x in rs
                                   if float(x["end_ms"]) <= before + 1e-6]
        gpu = [r for r in rows if r["device"] == "gpu" and r["node"] != "-"]
        cpu = [r for r in rows if r["device"] == "cpu"]
        d2h = [r for r in rows if r["kernel"] == "transfer:d2h"]
        if app == "factor5":
            by = {r["kernel"]: r for r in gpu}
            for a, b in CHAIN:
                if a in by and b in by:
                    gaps[("-> " + b.split("/")[0], size)].append(
                        float(by[b]["start_ms"]) - float(by[a]["end_ms"]))
        h2d = [float(r["start_ms"]) for r in rows if r["kernel"] == "transfer:h2d"]
        if h2d:
            gaps[("first h2d", size)].append(min(h2d))
            first_h2d[(app, size, rows[0]["policy"])].append(min(h2d))
        for t in rows:
            if t["kernel"] != "transfer:h2d":
                continue
            e = ends(cpu, float(t["start_ms"]))
            if e and float(t["start_ms"]) - max(e) < 2:
                gaps[("h2d", size)].append(float(t["start_ms"]) - max(e))
        for t in d2h:
            e = ends(gpu, float(t["start_ms"]))
            if e:
                gaps[("d2h", size)].append(float(t["start_ms"]) - max(e))
        for c in cpu:
            e = ends(d2h + cpu, float(c["start_ms"]))
            if e:
                gaps[("cpu start", size)].append(float(c["start_ms"]) - max(e))
        for g in gpu:
            if g.get("launch_ms"):
                gaps[("launch", size)].append(float(g["launch_ms"]))
                launches.append((float(g["launch_ms"]), app, size, g["policy"], g["kernel"]))
    print(path)
    for (what, size), v in sorted(gaps.items()):
        print("  %-16s %-5s %s" % (what, size, summary(v)))
    for (app, size, policy), v in sorted(first_h2d.items()):
        if statistics.median(v) > 0.2:
            print("  first h2d late   %-5s %s %s %s" % (size, app, policy, summary(v)))
    for ms, app, size, policy, kernel in sorted(launches, reverse=True)[:6]:
        print("  slowest launch   %-5s %7.3f ms  %s %s %s" % (size, ms, app, policy, kernel))


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
