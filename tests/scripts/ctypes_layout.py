#!/usr/bin/env python3
"""bench/ort_compare.py's ctypes copies of smelt_session_options and
smelt_tensor match the C layout of the library they load (and its --clock
picks CPU time only at one thread): the options'
struct_size equals the ctypes size (checked when the library is opened), a
tensor read by smelt_tensor_load has its fields (owner last) where the ctypes
struct has them, smelt_tensor_release clears it, and a session made with the
ctypes options runs the repo's MLP.

    ctypes_layout.py LIBSMELT_SO SOURCE_DIR
"""
import ctypes
import os
import sys
import tempfile


def main():
    lib, source = sys.argv[1:3]
    try:
        import numpy as np
    except ImportError:
        print("numpy not installed: skipped")
        return 77
    sys.path.insert(0, os.path.join(source, "bench"))
    import ort_compare as oc

    # --clock: CPU time only where the runs stay on the calling thread
    import time
    if oc.pick_clock("cpu", 1) is not time.thread_time or oc.pick_clock("wall", 2) is not time.perf_counter:
        print("ort_compare.pick_clock picks the wrong timer")
        return 1
    try:
        oc.pick_clock("cpu", 2)
        print("ort_compare.pick_clock accepted --clock cpu at 2 threads")
        return 1
    except ValueError:
        pass
    sm = oc.Smelt(lib)  # raises when the options' size differs
    if sm.Tensor is not oc.TensorV1 or sm.Options is not oc.OptionsV1:
        print("the library in the build tree was taken for a 0.1 one")
        return 1
    opts = sm.lib.smelt_session_options_default()
    if opts.struct_size != ctypes.sizeof(oc.OptionsV1) or opts.recompile_limit != 8 or opts.log_level != 2:
        print(f"options read through ctypes look wrong: struct_size {opts.struct_size}, "
              f"recompile_limit {opts.recompile_limit}, log_level {opts.log_level}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        x = np.arange(2 * 64, dtype=np.float32).reshape(2, 64) / 100.0
        path = os.path.join(tmp, "x.npy")
        np.save(path, x)
        t = oc.TensorV1()
        sm.check(sm.lib.smelt_tensor_load(path.encode(), ctypes.byref(t)), "load")
        ok = (t.dtype == 1 and t.rank == 2 and t.dims[0] == 2 and t.dims[1] == 64 and t.nbytes == x.nbytes
              and t.owner == 1)
        if not ok:
            print(f"smelt_tensor read through ctypes: dtype {t.dtype} rank {t.rank} dims {t.dims[0]},{t.dims[1]} "
                  f"nbytes {t.nbytes} owner {t.owner}")
            return 1
        got = oc.tensor_to_numpy(np, t)
        sm.lib.smelt_tensor_release(ctypes.byref(t))
        if not np.array_equal(got, x) or t.data or t.nbytes or t.owner:
            print("data differs, or smelt_tensor_release did not clear the descriptor")
            return 1
        r = oc.SmeltRunner(np, sm, os.path.join(source, "models", "mlp", "model.onnx"), [path], threads=1)
        _, (y,) = r.run(keep=True)
        r.close()
        if y.shape != (2, 10) or not np.all(np.isfinite(y)):
            print(f"MLP output through ctypes: shape {y.shape}")
            return 1
    print("ctypes layouts match the library")
    return 0


if __name__ == "__main__":
    sys.exit(main())
