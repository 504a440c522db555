#!/usr/bin/env python3
"""The copies of same_body_probe's DGEMM inner loop in a SASS listing of its resident kernel.

Each copy is 64 DFMA (one per step of k); for each it prints the instructions from the first
DFMA to the last, and how many of them are IMAD.WIDE (an address computed per load instead of
one base with immediate offsets). Decision 017, "The graph's code out of line".
  cuobjdump -sass <binary> | awk '/Function : .*resident_kernel.*Dgemm64/{f=1} ...' > k.sass
  python3 lab/probes/sass_loop_copies.py k.sass <name>
"""
import re
import sys

lines = [l for l in open(sys.argv[1]) if re.search(r"/\*[0-9a-f]{4}\*/", l)]
ins = [re.sub(r"\s*/\* 0x[0-9a-f]+ \*/", "", l).strip() for l in lines]
dfma = [i for i, l in enumerate(ins) if "DFMA" in l]
copies = []
for c in range(0, len(dfma), 64):
    group = dfma[c:c + 64]
    loop = ins[group[0]:group[-1] + 1]
    copies.append(f"{len(loop)}/{sum('IMAD.WIDE ' in l for l in loop)}")
print(sys.argv[2], "instructions", len(ins), "copies (span/IMAD.WIDE):", " ".join(copies))
