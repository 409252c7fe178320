#!/usr/bin/env python3
"""bench/pool_idle.py: where the threads of a parallel run wait, node by node.

usage: bench/pool_idle.py TRACE.json [TRACE_1T.json] [--top N]

Reads the Chrome trace of `smelt profile MODEL -o TRACE.json --threads N`
(a span per node on the graph thread, a span per chunk of parallel work on
every thread that ran one) and, for each node, takes the medians over the
runs of: its wall time, the chunk time of the graph thread and of the
workers, and the workers' idle time inside it (threads - 1 times the wall,
less their chunks).  Prints the sums and the nodes where the workers wait
longest: the uneven splits (a thread left with one more item, a short last
chunk) and the serial stretches.  Medians drop the runs where the host took
a core away for milliseconds, which a mean would blame on the node.

Given a second trace of the same model at 1 thread, it also prints each
node's loss against a perfect split (wall - 1-thread time / threads) and its
thread-time inflation (all threads' chunk time - 1-thread time): work the
split adds (a transform each thread redoes, memory both threads wait on).

  build/smelt profile MODEL -o /tmp/t2.json --threads 2 --runs 30 --mode default
  build/smelt profile MODEL -o /tmp/t1.json --threads 1 --runs 30 --mode default
  bench/pool_idle.py /tmp/t2.json /tmp/t1.json
"""
import argparse
import bisect
import collections
import json
import statistics


def load(path):
    """{(node, op): (wall, graph-thread chunks, worker chunks, workers)} in us, medians over runs."""
    ev = json.load(open(path))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    chunks = sorted((e for e in ev if e.get("cat") == "chunk"), key=lambda e: e["ts"])
    starts = [e["ts"] for e in chunks]
    graph_tid = next((e["tid"] for e in ev if e.get("cat") == "run"), 1)
    workers = {e["tid"] for e in chunks if e["tid"] != graph_tid}
    per = collections.defaultdict(list)
    for s in ev:
        if s.get("cat") != "step" or s["tid"] != graph_tid or s["args"].get("depth", 0) != 0:
            continue
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        i = bisect.bisect_left(starts, t0)
        own = other = 0.0
        while i < len(chunks) and chunks[i]["ts"] <= t1:
            if chunks[i]["tid"] == graph_tid:
                own += chunks[i]["dur"]
            else:
                other += chunks[i]["dur"]
            i += 1
        per[(s["args"].get("node", s["name"]), s["name"])].append((s["dur"], own, other))
    med = {k: tuple(statistics.median(x[j] for x in v) for j in range(3)) for k, v in per.items()}
    return med, len(workers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("one_thread", nargs="?")
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    nodes, nw = load(a.trace)
    if nw == 0:
        print("no worker chunks in the trace: a 1-thread run, or nothing ran in parallel")
        return 0
    rows = []
    for k, (wall, own, other) in nodes.items():
        rows.append({"node": k[0], "op": k[1], "wall": wall, "own": own, "other": other,
                     "idle": nw * wall - other})
    tot = lambda f: sum(r[f] for r in rows) / 1000
    print(f"{a.trace}: {nw} worker(s); per run (sums of the nodes' medians): wall {tot('wall'):.3f} ms, "
          f"graph thread's chunks {tot('own'):.3f} ms, workers' chunks {tot('other'):.3f} ms, "
          f"workers idle {tot('idle'):.3f} ms")
    if a.one_thread:
        one, _ = load(a.one_thread)
        for r in rows:
            w1 = one.get((r["node"], r["op"]), (float("nan"),))[0]
            r["t1"] = w1
            r["loss"] = r["wall"] - w1 / (nw + 1)
            r["infl"] = r["own"] + r["other"] - w1
        t1 = sum(r["t1"] for r in rows if r["t1"] == r["t1"]) / 1000
        print(f"1 thread: {t1:.3f} ms; speed-up of the node sums {t1 / tot('wall'):.3f}x; "
              f"thread-time inflation {sum(r['infl'] for r in rows if r['infl'] == r['infl']) / 1000:+.3f} ms")
        rows.sort(key=lambda r: -(r["loss"] if r["loss"] == r["loss"] else -1e9))
        print(f"\n{'node':46s} {'op':12s} {'1t ms':>7s} {'wall ms':>7s} {'loss':>7s} {'idle':>6s} {'infl':>7s}")
        for r in rows[: a.top]:
            print(f"{r['node'][:46]:46s} {r['op'][:12]:12s} {r['t1'] / 1000:7.3f} {r['wall'] / 1000:7.3f} "
                  f"{r['loss'] / 1000:+7.3f} {r['idle'] / 1000:6.3f} {r['infl'] / 1000:+7.3f}")
        return 0
    rows.sort(key=lambda r: -r["idle"])
    print(f"\n{'node':46s} {'op':12s} {'wall ms':>7s} {'idle':>6s} {'graph':>7s} {'workers':>7s}")
    for r in rows[: a.top]:
        print(f"{r['node'][:46]:46s} {r['op'][:12]:12s} {r['wall'] / 1000:7.3f} {r['idle'] / 1000:6.3f} "
              f"{r['own'] / 1000:7.3f} {r['other'] / 1000:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
