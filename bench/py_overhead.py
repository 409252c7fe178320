"""What smelt.Session.run adds over smelt_session_run, measured in one process.

  PYTHONPATH=build/python python3 bench/py_overhead.py MODEL THREADS MODE N INPUT.pb...

Each of N runs (after 20 untimed) is timed around Session.run from Python,
and the extension times smelt_session_run inside it (the session's
_last_run_seconds); the difference is what the Python layer adds: argument
handling, the hand-over of the arrays, the GIL, making the output arrays and
freeing them.  Prints the median and p90 of that difference, and both run
times.  A run right after a long one finds the interpreter's code and data out
of the caches, so the figure on a real model (bert_tiny: a run of ~6 ms) is
several times the one on a model that does nothing.

bench/py_overhead.c (same arguments) times the C API alone in its own
process, for a second view across processes.
"""
import statistics
import sys
import time

import numpy as np
import onnx
import smelt
from onnx import numpy_helper

model, threads, mode, N = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
ins = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sys.argv[5:]]
s = smelt.Session(model, mode=mode, threads=threads)
for _ in range(20):
    s.run(ins)
wall, inner = [], []
pc = time.perf_counter
for _ in range(N):
    a = pc()
    s.run(ins)
    wall.append((pc() - a) * 1e6)
    inner.append(s._s._last_run_seconds() * 1e6)
added = sorted(w - i for w, i in zip(wall, inner))
print(f"Session.run: median {statistics.median(wall):.1f} us; smelt_session_run inside it: median "
      f"{statistics.median(inner):.1f} us; added by Python: median {added[N // 2]:.1f} us, "
      f"p90 {added[(9 * N) // 10]:.1f} us")
