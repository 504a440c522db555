#!/usr/bin/env python3
"""A `weft bench graph` run's policies pooled by mapping: policies that chose the same mapping ran
the same work, so their runs are samples of one thing. Prints per benchmark PPTM's mapping's
pooled median over the fastest mapping's (among the policies'), and the gain over D-Map's
mapping; then the worst ratio and the mean gain at 320m. The bench writes the same as
`pptm_over_best_pooled_*` and `pptm_gain_over_dmap_<size>_pooled` since the commit that added this script;
this reads runs from before that (the JSON's samples and the log's mapping lines).

  python3 lab/probes/pooled_mappings.py bench/results/h100/graph.json bench/results/h100/graph.log
"""
import json,statistics,re,sys
def pooled(jf, lf):
    j=json.load(open(jf)); log=open(lf).read()
    maps={}; cur=None
    for line in log.splitlines():
        m=re.match(r'\[graph\] (factor\d_\d+m):',line)
        if m: cur=m.group(1)
        m=re.match(r'\[graph\]   (pptm|a_free|d_map|mincut|heft)\s+([CG]+)',line)
        if m and cur: maps[(cur,m.group(1))]=m.group(2)
    by={}
    for c in j['comparisons']:
        b=c['benchmark']; by.setdefault(b,{})
        by[b]['pptm']=c['weft_samples']; by[b][c['peer']]=c['peer_samples']
    worst=0; gains=[]
    for b,pol in sorted(by.items()):
        g={}
        for p,s in pol.items(): g.setdefault(maps[(b,p)],[]).extend(s)
        med={k:statistics.median(v) for k,v in g.items()}
        pp=med[maps[(b,'pptm')]]; best=min(med.values()); dm=med[maps[(b,'d_map')]]
        worst=max(worst,pp/best)
        if b.endswith('320m'): gains.append((dm-pp)/dm)
        print(f'  {b:14s} pooled pptm/best {pp/best:.3f}  gain {(dm-pp)/dm:+.3f}')
    print(jf, 'pooled max', round(worst,3), 'pooled gain 320m', round(sum(gains)/len(gains),4))
pooled(sys.argv[1], sys.argv[2])
