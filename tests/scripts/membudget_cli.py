#!/usr/bin/env python3
"""The memory budget through the CLI: an Expand of a small constant to
[60000, 100000] f32 (22.4 GiB, more than the default budget on any machine
this suite runs on) must end with exit 1 and a message naming the node, the
bytes and the budget, eagerly and compiled, while the process stays far below
the budget (the refusal comes before the allocation).  --max-memory takes
sizes with suffixes and rejects bad ones as a usage error.

usage: membudget_cli.py SMELT REPO_MODEL   (exit 77: the onnx package is missing)
"""
import os
import resource
import subprocess
import sys
import tempfile

SKIP = 77


def make_model(path):
    from onnx import TensorProto, helper, numpy_helper  # noqa: E402
    import numpy as np

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    shape = numpy_helper.from_array(np.array([60000, 100000], dtype=np.int64), "shape")
    node = helper.make_node("Expand", ["x", "shape"], ["y"], name="expand_3")
    graph = helper.make_graph([node], "big_expand", [x], [y], initializer=[shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def limit_address_space():
    """4 GiB of address space: should the budget ever fail to refuse, the
    allocation fails at once instead of pushing a shared machine into the
    OOM killer.  The default budget follows it (80%: 3.2 GiB)."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def run(cmd, env):
    """Runs cmd; returns (exit code, stderr, peak RSS in MiB of the children so
    far: the largest of them, so a bound on this one's)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=300,
                       preexec_fn=limit_address_space)
    run.stdout = p.stdout.decode(errors="replace")
    return p.returncode, p.stderr.decode(errors="replace"), \
        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    smelt, small_model = sys.argv[1], sys.argv[2]
    try:
        import numpy  # noqa: F401
        import onnx  # noqa: F401
    except ImportError:
        print("SKIP: python onnx/numpy not installed")
        return SKIP
    fails = 0

    def check(ok, desc, detail=""):
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + desc + ("" if ok else ": " + detail))
        if not ok:
            fails += 1

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SMELT_CACHE_DIR=os.path.join(tmp, "cache"))
        big = os.path.join(tmp, "big.onnx")
        make_model(big)
        out = os.path.join(tmp, "out")
        for mode in ("eager", "default"):
            rc, err, rss = run([smelt, "run", big, "-o", out, "--mode", mode], env)
            want = "needs 22.4 GiB" in err and "over the memory budget of 3.2 GiB" in err and "(--max-memory)" in err
            check(rc == 1 and "node 'expand_3' (Expand)" in err and want and len(err.splitlines()) == 1,
                  f"{mode}: 22.4 GiB Expand refused under the default budget (80% of ulimit -v)", f"exit {rc}, stderr: {err}")
            check(rss < 512, f"{mode}: peak RSS {rss:.0f} MiB, far below the budget", f"{rss:.0f} MiB")
            rc, err, _ = run([smelt, "run", big, "-o", out, "--mode", mode, "--max-memory", "1G"], env)
            check(rc == 1 and "over the memory budget of 1.0 GiB" in err and "expand_3" in err,
                  f"{mode}: --max-memory 1G named in the message", f"exit {rc}, stderr: {err}")
        rc, err, _ = run([smelt, "run", small_model, "-o", out, "--max-memory", "512M"], env)
        check(rc == 0, "a small model runs under --max-memory 512M", f"exit {rc}, stderr: {err}")
        rc, err, _ = run([smelt, "test", os.path.dirname(small_model), "--max-memory", str(256 << 20)], env)
        check(rc == 0, "smelt test takes --max-memory in plain bytes", f"exit {rc}, stderr: {err}")
        for bad in ("12Q", "0", "-5M", "1.5G", ""):
            rc, err, _ = run([smelt, "run", small_model, "-o", out, "--max-memory", bad], env)
            check(rc == 2 and "--max-memory expects a size" in err, f"--max-memory '{bad}' is a usage error",
                  f"exit {rc}, stderr: {err}")
        rc, err, _ = run([smelt, "profile", big, "-o", os.path.join(tmp, "t.json"), "--max-memory", "2G"], env)
        check(rc == 1 and "over the memory budget of 2.0 GiB" in err, "profile takes --max-memory",
              f"exit {rc}, stderr: {err}")
        rc, err, _ = run([smelt, "bench", big, "--runs", "1", "--warmup", "0", "--max-memory", "3G"], env)
        check(rc == 1 and "over the memory budget of 3.0 GiB" in err + run.stdout, "bench reports the mode's error",
              f"exit {rc}, stderr: {err}")
    print("all memory budget checks passed" if not fails else f"{fails} memory budget checks failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
