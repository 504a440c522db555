#!/usr/bin/env python3
"""Time each weft worker spent runnable but off-CPU (preempted: switched out in state R, then
waiting to run again), from `perf sched timehist --state`, and which CPUs it ran on.

  perf sched record -o sched.data -- <command>
  perf sched timehist --state -i sched.data | python3 lab/probes/runnable_wait.py

A worker that the OS stacked on a core with another worker (while the other core idles) shows
here as milliseconds of runnable waiting; a bound worker shows only what other threads of the
machine took from its core."""
import collections
import re
import sys

row = re.compile(r"^\s*([\d.]+)\s+\[(\d+)\]\s+(weft-w\d+)\[\d+/\d+\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)")
last_state = {}
runnable_ms = collections.Counter()
run_ms = collections.Counter()
cpus = collections.defaultdict(collections.Counter)
for line in sys.stdin:
    m = row.match(line)
    if not m:
        continue
    _, cpu, name, wait, _, run, state = m.groups()
    if last_state.get(name) == "R":
        runnable_ms[name] += float(wait)
    run_ms[name] += float(run)
    cpus[name][int(cpu)] += float(run)
    last_state[name] = state
for name in sorted(run_ms):
    where = ", ".join(f"cpu {c}: {ms:.1f} ms" for c, ms in sorted(cpus[name].items()))
    print(f"{name}: ran {run_ms[name]:.1f} ms ({where}); runnable but off-CPU {runnable_ms[name]:.1f} ms")
