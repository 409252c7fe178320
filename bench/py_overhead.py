"""Python overhead, Python side: times smelt.Session.run (min, median of N runs, us).
Same arguments as bench/py_overhead.c:
  PYTHONPATH=build/python python3 bench/py_overhead.py MODEL THREADS MODE N INPUT.pb...
"""
import sys, time, pathlib, numpy as np, onnx, smelt
from onnx import numpy_helper
model, threads, mode, N = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ins = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sys.argv[5:]]
s = smelt.Session(model, mode=mode, threads=threads)
for _ in range(20): s.run(ins)
ts = []
for _ in range(N):
    a = time.perf_counter(); s.run(ins); ts.append((time.perf_counter() - a) * 1e6)
ts.sort(); print(f"Python Session.run: min {ts[0]:.1f} us median {ts[N//2]:.1f} us")
