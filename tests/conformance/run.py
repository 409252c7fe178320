#!/usr/bin/env python3
"""Runs the ONNX backend node tests through `smelt test` and checks the result
against tests/conformance/expected-failures.txt.

Each test runs in its own process (a crash or hang fails that test only), in
parallel, with a time limit.  The run fails when a test fails that is not in
the list (a regression), or when a listed test passes (take it off the list).

  run.py SMELT SUITE_DIR [--jobs N] [--timeout S] [--list FILE] [--write-list] [--mode M]
         [--filter TEXT] [--sample N]

Exit 77 (ctest: skipped) when SUITE_DIR does not exist.
"""
import argparse, collections, concurrent.futures as cf, os, re, subprocess, sys, time


# AddressSanitizer/LeakSanitizer reports and UBSan's "file.c:12:3: runtime error: ..."
SANITIZER_RE = re.compile(r"==\d+==ERROR: \w+Sanitizer.*|\S+:\d+:\d+: runtime error: .*")


def run_one(smelt, path, timeout, extra):
    name = os.path.basename(path.rstrip("/"))
    try:
        p = subprocess.run([smelt, "test", path, "--threads", "1"] + extra, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return name, "FAIL", f"timed out after {timeout} s"
    finding = SANITIZER_RE.search(p.stderr or "")
    if finding:  # a sanitizer build (tests/run_sanitize.sh): a finding fails the test, listed or not
        return name, "FAIL", "sanitizer: " + finding.group(0)[:200]
    line = next((l for l in p.stdout.splitlines() if l.startswith(("PASS ", "FAIL ", "SKIP "))), None)
    if p.returncode < 0 or line is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
        return name, "FAIL", f"crashed (exit {p.returncode}): {tail[0][:200]}"
    status, _, rest = line.partition(" ")
    return name, status, rest.partition(" ")[2].strip()


def reason_of(message):
    """A short, groupable reason for a new list entry, from smelt's message."""
    import re
    m = re.search(r"operator (\S+) is not supported", message)
    if m:
        return f"op {m.group(1)} not implemented"
    m = re.search(r"(?:element|target) type \d* ?\(?(\w+)\)? is not supported|has type (\w+), which", message)
    if m:
        return f"dtype {m.group(1) or m.group(2)} not supported"
    if "string" in message:
        return "string tensors"
    if "training" in message:
        return "training mode"
    return re.sub(r"node [^:]*: ", "", message)[:160]


def load_list(path):
    """name -> reason, from lines 'test_name  # reason' (blank lines and #-lines ignored)."""
    out = {}
    if not os.path.exists(path):
        return out
    for raw in open(path):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition("#")
        out[name.strip()] = reason.strip() or "no reason given"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("smelt")
    ap.add_argument("suite")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--list", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "expected-failures.txt"))
    ap.add_argument("--write-list", action="store_true",
                    help="rewrite the list from this run (keeps existing reasons)")
    ap.add_argument("--filter", default="", help="only tests whose name contains this")
    ap.add_argument("--sample", type=int, default=1,
                    help="only every Nth test (in name order, after --filter): a fixed sample")
    ap.add_argument("--mode", default=None,
                    help="execution mode passed to smelt test (eager, default, reduce-overhead, "
                         "max-autotune); the expected-failures list is the same for every mode")
    ap.add_argument("extra", nargs="*", help="more options for smelt test (after --)")
    a = ap.parse_args()
    if a.mode:
        a.extra = ["--mode", a.mode] + a.extra
    if a.write_list and (a.filter or a.sample > 1):
        ap.error("--write-list needs the whole suite (no --filter or --sample)")
    if not os.path.isdir(a.suite):
        print(f"SKIP: {a.suite} not found (the ONNX node tests live in ../shared/conformance)")
        return 77
    tests = sorted(os.path.join(a.suite, d) for d in os.listdir(a.suite)
                   if os.path.isdir(os.path.join(a.suite, d)) and a.filter in d)
    tests = tests[::max(a.sample, 1)]
    expected = load_list(a.list)
    t0 = time.time()
    results = {}
    with cf.ThreadPoolExecutor(a.jobs) as ex:
        for name, status, why in ex.map(lambda p: run_one(a.smelt, p, a.timeout, a.extra), tests):
            results[name] = (status, why)
    passed = sorted(n for n, (s, _) in results.items() if s == "PASS")
    failed = sorted(n for n, (s, _) in results.items() if s == "FAIL")
    skipped = sorted(n for n, (s, _) in results.items() if s == "SKIP")
    regressions = [n for n in failed if n not in expected or results[n][1].startswith("sanitizer: ")]
    # a test listed for random output can match its expected values by chance
    # (test_bernoulli_double did once in CI): passing is not a fix there
    fixed = [n for n in passed if n in expected and not expected[n].startswith("random output")]


    if a.write_list:
        with open(a.list, "w") as f:
            f.write("# ONNX node tests that smelt does not pass, one per line: name  # reason\n")
            f.write("# Maintained by tests/conformance/run.py; a test that starts passing must go.\n")
            for n in failed:
                f.write(f"{n}  # {expected.get(n, reason_of(results[n][1]))}\n")
        print(f"wrote {a.list} ({len(failed)} entries)")

    by_reason = collections.Counter(expected[n] for n in failed if n in expected)
    print(f"conformance: {len(passed)} passed, {len(failed)} failed "
          f"({len(failed) - len(regressions)} expected), {len(skipped)} skipped "
          f"in {time.time() - t0:.0f} s")
    for reason, n in by_reason.most_common():
        print(f"  expected failure x{n}: {reason}")
    for n in regressions:
        print(f"REGRESSION {n}: {results[n][1]}")
    for n in fixed:
        print(f"NOW PASSES {n}: remove it from {os.path.basename(a.list)}")
    for n in skipped:
        print(f"SKIPPED {n}: {results[n][1]}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    if a.write_list:
        return 0
    return 1 if regressions or fixed or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
