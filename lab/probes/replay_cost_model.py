#!/usr/bin/env python3
"""Replays the CPU kernels' runs of a `weft bench graph --node-log` CSV through LinearCostModel's
update (a line-for-line copy of src/graph/cost_model.cpp's, in plain Python) with variants of its
robust step, and prints each kernel's median |predicted - measured| / measured over the timed
runs (warm-ups included, as the bench counts them).

Each model starts as the least-squares fit of the calibration's runs of the kernel alone (copy
overlap < 0.1, as weft::graph::Calibration fits it); only runs alone are replayed (the
beside-copies model is left out). With the variant "clip 2 / run 3" (the code's) it reproduces
the bench's prediction_error_cpu_<kernel> for kernels that never run beside copies.

  python3 lab/probes/replay_cost_model.py bench/results/h100/graph-nodes.csv
"""
import csv
import math
import statistics
import sys
from collections import defaultdict


def fit(samples, lam=0.98):
    n = len(samples)
    sx = sum(s for s, _ in samples)
    sxx = sum(s * s for s, _ in samples)
    sy = sum(t for _, t in samples)
    sxy = sum(s * t for s, t in samples)
    det = n * sxx - sx * sx
    b = (n * sxy - sx * sy) / det
    a = (sy - b * sx) / n
    p = [[sxx / det, -sx / det], [-sx / det, n / det]]  # inverse of the normal matrix
    res = [abs(t - (a + b * s)) / max(a + b * s, 1e-12) for s, t in samples]
    spread = max(0.02, sum(res) / n * n / (n - 2)) if n > 2 else math.inf
    return {"th": [a, b], "P": p, "lam": lam, "spread": spread, "one": 0,
            "lim": 1e6 * (p[0][0] + p[1][1])}


def update(m, s, t, clip_above, shift_run):
    phi = (1.0, s)
    P = m["P"]
    pp = [P[0][0] + P[0][1] * s, P[1][0] + P[1][1] * s]
    lam = m["lam"] if P[0][0] + P[1][1] < m["lim"] else 1.0
    pred = m["th"][0] + m["th"][1] * s
    err = t - pred
    if pred > 0:
        if math.isfinite(m["spread"]):
            sp = m["spread"]
            limit = 2.0 * sp * pred
            side = 1 if err > limit else (-1 if err < -limit else 0)
            m["one"] = 0 if side == 0 else (m["one"] + side if m["one"] * side > 0 else side)
            reset = abs(m["one"]) >= shift_run
            if reset:
                ex = phi[0] * pp[0] + phi[1] * pp[1]
                if ex > 0:
                    scale = 0.99 / 0.01 * lam / ex
                    if scale > 1:
                        P = [[v * scale for v in row] for row in P]
                        pp = [P[0][0] + P[0][1] * s, P[1][0] + P[1][1] * s]
                m["one"] = 0
            symmetric = min(max(err, -limit), limit)
            if not reset:
                err = min(max(err, -limit), clip_above * sp * pred)
            m["spread"] += 0.1 * (abs(symmetric) / pred - m["spread"])
        else:
            m["spread"] = abs(err) / pred
        m["spread"] = max(0.02, m["spread"])
    den = lam + phi[0] * pp[0] + phi[1] * pp[1]
    k = [pp[0] / den, pp[1] / den]
    m["th"] = [m["th"][0] + k[0] * err, m["th"][1] + k[1] * err]
    newp = [[(P[i][j] - k[i] * pp[j]) / lam for j in range(2)] for i in range(2)]
    off = 0.5 * (newp[0][1] + newp[1][0])
    m["P"] = [[newp[0][0], off], [off, newp[1][1]]]


def replay(path, clip_above, shift_run):
    calibration, runs = defaultdict(list), []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["device"] != "cpu" or r["node"] == "-" or float(r["copy_overlap"]) >= 0.1:
                continue
            sample = (float(r["bytes"]), float(r["ms"]))
            if r["phase"] == "calibrate":
                calibration[r["kernel"]].append(sample)
            elif r["phase"] in ("warmup", "sample"):
                runs.append((r["kernel"],) + sample)
    models = {k: fit(v) for k, v in calibration.items() if len({s for s, _ in v}) > 1}
    errors = defaultdict(list)
    for kernel, s, t in runs:
        m = models.get(kernel)
        if m is None:
            continue
        predicted = max(0.0, m["th"][0] + m["th"][1] * s)
        errors[kernel].append(abs(predicted - t) / t)
        update(m, s, t, clip_above, shift_run)
    return {k: statistics.median(v) for k, v in errors.items()}


VARIANTS = [(2.0, 3), (1.0, 3), (2.0, 4), (1.0, 4), (2.0, 5)]

for path in sys.argv[1:]:
    print(path)
    results = {v: replay(path, *v) for v in VARIANTS}
    print(f"{'kernel':26s}" + "".join(f"  clip {c:g} / run {r}" for c, r in VARIANTS))
    for k in sorted(results[VARIANTS[0]]):
        print(f"{k:26s}" + "".join(f"  {results[v][k]:16.4f}" for v in VARIANTS))
    print(f"{'worst':26s}" + "".join(f"  {max(results[v].values()):16.4f}" for v in VARIANTS))
    print(f"{'mean':26s}" + "".join(f"  {statistics.mean(results[v].values()):16.4f}" for v in VARIANTS))
