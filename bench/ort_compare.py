#!/usr/bin/env python3
"""bench/ort_compare.py: smelt (eager, or --mode M) against ONNX Runtime, side by side in one run.

usage: bench/ort_compare.py MODEL_DIR... [--threads N] [--runs N] [--warmup N]
                            [--block K] [--settle-ms MS] [--ort-no-spin] [--lib build/libsmelt.so]
                            [--baseline-lib OTHER.so] [--baseline-env K=V]... [--env K=V]... [--json FILE]
                            [--mode eager|default|reduce-overhead|max-autotune] [--clock wall|cpu]
                            [--precision fp32|bf16|fp16|int8|int4]

MODEL_DIR holds model.onnx and test_data_set_0/input_N.pb (the zoo layout).
Both runtimes live in this one process and get the same inputs (read by
smelt_tensor_load) and the same thread count (ORT: intra_op threads N,
inter_op 1, sequential execution, ORT_ENABLE_ALL graph optimizations).  The
runtimes take turns of --block timed runs (default 5), each turn after a
pause (--settle-ms, default 150) and one untimed run, so load from other
processes on a shared machine falls on both alike; the ratio of the medians
is what to read.  The runner that goes first rotates every round, so none
always follows the same other runtime's turn.  The pause matters: both runtimes' threads spin for a while
after each run (ORT's default, kept here; smelt's SMELT_SPIN_US), which
would otherwise take the CPU from the other runtime's turn (--ort-no-spin
turns ORT's spinning off).  ORT's threads spin about 50-65 ms after a run
(its process CPU time over an idle pause, measured on the 2-core VM,
2026-11-26), so a 50 ms pause left them spinning into smelt's turn; the
default is 150 ms.  Each smelt output is checked
against ORT's (max abs difference).

--baseline-lib adds a second smelt build (e.g. main's, for before/after)
to the same rotation; its column is "base ms".  --baseline-env K=V sets
a variable only while the baseline's sessions are created (without
--baseline-lib the same library is the baseline), so one library's knob
(SMELT_CONV, SMELT_CV_KC, ...) is compared with its default in one run.

--clock cpu times each run by the calling thread's CPU time
(time.thread_time) instead of the wall clock: on a machine that other work
shares, a run's wall time counts the time the thread waited for a core, its
CPU time does not.  Only with --threads 1, where both runtimes run on the
calling thread (a pool's workers' time would be missed).

--precision P runs every smelt build at session precision P (ONNX Runtime
stays fp32: its column is the fp32 reference the others are checked and
timed against), e.g. a bf16 kernel change against the build before it.

--env K=V sets an environment variable before smelt is loaded (e.g.
SMELT_CONV=im2col to time a kernel path); the variable reaches ORT too.
"""
import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_RANK = 12
MODES = {"eager": 0, "default": 1, "reduce-overhead": 2, "max-autotune": 3}
PRECISIONS = {"fp32": 0, "bf16": 1, "fp16": 2, "int8": 3, "int4": 4}  # smelt_precision
NP_OF_DTYPE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
               9: "bool", 10: "float16", 11: "float64"}


# smelt_tensor and smelt_session_options exactly as include/smelt.h lays them
# out (0.2.0 on); the 0.1 layouts (no owner, no struct_size nor log fields)
# for a --baseline-lib built before them.
_TENSOR_V0 = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
              ("dims", ctypes.c_int64 * MAX_RANK), ("data", ctypes.c_void_p),
              ("nbytes", ctypes.c_size_t)]
_OPTIONS_V0 = [("threads", ctypes.c_int), ("mode", ctypes.c_int), ("fullgraph", ctypes.c_int),
               ("dynamic", ctypes.c_int), ("recompile_limit", ctypes.c_int),
               ("buckets", ctypes.c_char_p), ("cache_dir", ctypes.c_char_p),
               ("dims", ctypes.c_char_p), ("max_memory", ctypes.c_size_t)]
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


# what a run is timed by: time.perf_counter, or time.thread_time (--clock cpu)
CLOCK = time.perf_counter


def pick_clock(name, threads):
    """The timer for --clock NAME: CPU time only where the runs stay on the calling thread."""
    if name == "wall":
        return time.perf_counter
    if name == "cpu":
        if threads != 1:
            raise ValueError("--clock cpu needs --threads 1: at more threads the pool's workers "
                             "run part of each run, and their CPU time is not the calling thread's")
        return time.thread_time
    raise ValueError(f"unknown clock '{name}' (wall or cpu)")


class TensorV1(ctypes.Structure):
    _fields_ = _TENSOR_V0 + [("owner", ctypes.c_int)]


class OptionsV1(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + _OPTIONS_V0 + [
        ("log", LOG_FN), ("log_user", ctypes.c_void_p), ("log_level", ctypes.c_int),
        ("precision", ctypes.c_int),  # smelt_precision: 0 fp32, 1 bf16, 2 fp16, 3 int8, 4 int4
        ("device", ctypes.c_char_p)]


# the first released (0.2.0) layout ended at log_level
OPTIONS_V1_FIRST = OptionsV1.log_level.offset + ctypes.sizeof(ctypes.c_int)


class TensorV0(ctypes.Structure):
    _fields_ = _TENSOR_V0


class OptionsV0(ctypes.Structure):
    _fields_ = _OPTIONS_V0


class Smelt:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.smelt_version.restype = ctypes.c_char_p
        ver = tuple(int(x) for x in L.smelt_version().decode().split(".")[:2])
        self.Tensor, self.Options = (TensorV0, OptionsV0) if ver < (0, 2) else (TensorV1, OptionsV1)
        Tensor, Options = self.Tensor, self.Options
        L.smelt_last_error.restype = ctypes.c_char_p
        L.smelt_session_options_default.restype = Options
        L.smelt_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.smelt_session_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(Options),
                                           ctypes.POINTER(ctypes.c_void_p)]
        L.smelt_session_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(Tensor), ctypes.c_size_t,
                                        ctypes.POINTER(Tensor), ctypes.c_size_t]
        L.smelt_model_num_outputs.argtypes = [ctypes.c_void_p]
        L.smelt_tensor_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(Tensor)]
        L.smelt_tensor_release.argtypes = [ctypes.POINTER(Tensor)]
        L.smelt_session_free.argtypes = [ctypes.c_void_p]
        L.smelt_model_free.argtypes = [ctypes.c_void_p]
        # A library older than this script may have a shorter options struct
        # (fields are only appended: device came after log_level); it reads
        # the prefix its struct_size names.  A longer one means OptionsV1 is stale.
        n = L.smelt_session_options_default().struct_size if ver >= (0, 2) else 0
        if ver >= (0, 2) and not (OPTIONS_V1_FIRST <= n <= ctypes.sizeof(Options)):
            raise RuntimeError(f"{path}: smelt_session_options is {n} "
                               f"bytes, this script's copy {ctypes.sizeof(Options)}: update OptionsV1")

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"smelt {what}: {self.lib.smelt_last_error().decode()}")


def tensor_to_numpy(np, t):
    n = 1
    for i in range(t.rank):
        n *= t.dims[i]
    buf = (ctypes.c_char * t.nbytes).from_address(t.data) if t.nbytes else b""
    a = np.frombuffer(bytes(buf), dtype=NP_OF_DTYPE[t.dtype], count=n)
    return a.reshape([t.dims[i] for i in range(t.rank)])


class SmeltRunner:
    """One smelt build's session on one model, with the inputs loaded."""

    def __init__(self, np, sm, path, inputs, threads, mode=0, dims=None, precision=0):
        self.np, self.sm = np, sm
        self.loaded = (sm.Tensor * len(inputs))()
        for k, p in enumerate(inputs):
            sm.check(sm.lib.smelt_tensor_load(p.encode(), ctypes.byref(self.loaded[k])), f"load {p}")
        self.n_in = len(inputs)
        self.model = ctypes.c_void_p()
        sm.check(sm.lib.smelt_model_load(path.encode(), ctypes.byref(self.model)), "load model")
        opts = sm.lib.smelt_session_options_default()
        opts.threads = threads
        opts.mode = mode
        if precision:
            if "precision" not in dict(type(opts)._fields_):
                raise RuntimeError(f"this smelt build ({sm.lib.smelt_version().decode()}) has no precision option")
            opts.precision = precision
        if dims:  # "name=v,name=v": sizes for symbolic dims, so a compiled mode compiles here
            self.dims = dims.encode()
            opts.dims = self.dims
        self.session = ctypes.c_void_p()
        sm.check(sm.lib.smelt_session_create(self.model, ctypes.byref(opts), ctypes.byref(self.session)),
                 "create session")
        self.n_out = sm.lib.smelt_model_num_outputs(self.model)

    def arrays(self):
        return [tensor_to_numpy(self.np, self.loaded[k]) for k in range(self.n_in)]

    def run(self, keep=False):
        outs = (self.sm.Tensor * self.n_out)()
        t0 = CLOCK()
        self.sm.check(self.sm.lib.smelt_session_run(self.session, self.loaded, self.n_in, outs,
                                                    self.n_out), "run")
        dt = CLOCK() - t0
        res = [tensor_to_numpy(self.np, outs[k]) for k in range(self.n_out)] if keep else None
        for k in range(self.n_out):
            self.sm.lib.smelt_tensor_release(ctypes.byref(outs[k]))
        return dt, res

    def close(self):
        self.sm.lib.smelt_session_free(self.session)
        self.sm.lib.smelt_model_free(self.model)
        for k in range(self.n_in):
            self.sm.lib.smelt_tensor_release(ctypes.byref(self.loaded[k]))


def maxdiff(np, ours, theirs):
    return max(float(np.max(np.abs(a.astype("float64") - b.astype("float64"))))
               if a.size else 0.0 for a, b in zip(ours, theirs))


def take_turns(runners, runs, block, settle_ms):
    """Times each runner (name -> run() returning (seconds, outputs)) `runs`
    times, in turns: a pause of settle_ms, one untimed run, `block` timed
    runs.  The runner that goes first changes every round, so a turn that
    follows another runtime's (whose threads may still spin) is not always
    the same one's.  Returns name -> list of seconds."""
    times = {k: [] for k in runners}
    keys = list(runners)
    done = rnd = 0
    while done < runs:
        n = min(block, runs - done)
        for j in range(len(keys)):
            k = keys[(j + rnd) % len(keys)]
            time.sleep(settle_ms / 1e3)
            runners[k]()
            times[k].extend(runners[k]()[0] for _ in range(n))
        done += n
        rnd += 1
    return times


def bench_model(np, ort, sms, model_dir, args):
    path = os.path.join(model_dir, "model.onnx")
    inputs = sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    runners = []
    for k, sm in enumerate(sms):
        # --baseline-env: set only while the baseline's session is made
        saved = {kk: os.environ.get(kk) for kk, _ in args.baseline_env} if k else {}
        for kk, v in (args.baseline_env if k else []):
            os.environ[kk] = v
        try:
            runners.append(SmeltRunner(np, sm, path, inputs, args.threads, MODES[args.mode],
                                       precision=PRECISIONS[args.precision]))
        finally:
            for kk, v in saved.items():
                if v is None:
                    os.environ.pop(kk, None)
                else:
                    os.environ[kk] = v
    arrays = runners[0].arrays()

    so = ort_options(ort, args.threads)
    if args.ort_no_spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: arrays[k] for k, i in enumerate(sess.get_inputs())}

    def run_ort():
        t0 = CLOCK()
        res = sess.run(None, feed)
        return CLOCK() - t0, res

    _, theirs = run_ort()
    diffs = [maxdiff(np, r.run(keep=True)[1], theirs) for r in runners]
    for _ in range(args.warmup):
        for r in runners:
            r.run()
        run_ort()
    calls = {k: r.run for k, r in enumerate(runners)}
    calls["ort"] = run_ort
    times = take_turns(calls, args.runs, args.block, args.settle_ms)
    ts, to = [times[k] for k in range(len(runners))], times["ort"]
    for r in runners:
        r.close()
    ms, mo = statistics.median(ts[0]) * 1e3, statistics.median(to) * 1e3
    row = {"model": os.path.basename(os.path.normpath(model_dir)), "threads": args.threads,
           "smelt_ms": ms, "ort_ms": mo, "ratio": ms / mo,
           "smelt_min_ms": min(ts[0]) * 1e3, "ort_min_ms": min(to) * 1e3,
           "runs": args.runs, "clock": args.clock, "max_abs_diff": diffs[0]}
    if len(runners) > 1:
        row.update({"base_ms": statistics.median(ts[1]) * 1e3, "base_min_ms": min(ts[1]) * 1e3,
                    "base_ratio": statistics.median(ts[1]) / statistics.median(to),
                    "base_max_abs_diff": diffs[1]})
    return row



def ort_options(ort, threads):
    """ONNX Runtime's settings in every comparison of bench/: intra-op threads
    N, inter-op 1, sequential execution, all graph optimizations."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return so

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--block", type=int, default=5,
                    help="timed runs per runtime per turn, each turn after one untimed run")
    ap.add_argument("--settle-ms", type=float, default=150,
                    help="pause before each turn, so the other runtime's threads, which spin "
                         "for a while after a run, are asleep when a turn starts (default 150)")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--baseline-lib")
    ap.add_argument("--ort-no-spin", action="store_true",
                    help="ORT's pool sleeps when idle (by default its threads spin after each "
                         "run, taking CPU from the runs that follow it)")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--baseline-env", action="append", default=[],
                    help="K=V set only while the baseline's sessions are created (with no "
                         "--baseline-lib, the same library is loaded again as the baseline), e.g. "
                         "SMELT_CONV=direct against the default pick in one process")
    ap.add_argument("--json")
    ap.add_argument("--mode", default="eager", choices=list(MODES),
                    help="smelt's mode for every smelt build in the rotation (default eager)")
    ap.add_argument("--precision", default="fp32", choices=list(PRECISIONS),
                    help="smelt's session precision for every smelt build (default fp32; ORT stays fp32)")
    ap.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                    help="time runs by the wall clock (default) or by the calling thread's CPU "
                         "time (--threads 1 only): on a shared machine, CPU time leaves out the "
                         "time a run waited for a core")
    args = ap.parse_args()
    global CLOCK
    try:
        CLOCK = pick_clock(args.clock, args.threads)
    except ValueError as e:
        ap.error(str(e))
    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        print(f"ort_compare: {e} (pip install onnxruntime numpy)", file=sys.stderr)
        return 77
    args.baseline_env = [tuple(kv.split("=", 1)) for kv in args.baseline_env]
    if any(len(kv) != 2 for kv in args.baseline_env):
        ap.error("--baseline-env takes K=V")
    if args.baseline_env and not args.baseline_lib:
        args.baseline_lib = args.lib
    sms = [Smelt(args.lib)] + ([Smelt(args.baseline_lib)] if args.baseline_lib else [])
    rows = [bench_model(np, ort, sms, d, args) for d in args.models]
    base = len(sms) > 1
    print(f"{'model':<14} {'thr':>3} {'smelt ms':>10} {'ORT ms':>10} {'smelt/ORT':>10} "
          f"{'min smelt':>10} {'min ORT':>10} {'max|diff|':>10}" +
          (f" {'base ms':>10} {'base/ORT':>9} {'min base':>10}" if base else ""))
    for r in rows:
        print(f"{r['model']:<14} {r['threads']:>3} {r['smelt_ms']:>10.3f} {r['ort_ms']:>10.3f} "
              f"{r['ratio']:>10.3f} {r['smelt_min_ms']:>10.3f} {r['ort_min_ms']:>10.3f} "
              f"{r['max_abs_diff']:>10.2e}" +
              (f" {r['base_ms']:>10.3f} {r['base_ratio']:>9.3f} {r['base_min_ms']:>10.3f}"
               if base else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows, "env": args.env}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
