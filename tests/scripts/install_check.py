#!/usr/bin/env python3
"""The installed C API: `cmake --install` into a temporary prefix, then
examples/version.c is compiled against the installed header and linked with
the installed shared library (nothing from the source or build tree), run, and
its smelt_version() compared with the SMELT_VERSION_* macros of the header --
and with the version python/pyproject.toml derives from the same header.

    install_check.py CMAKE BUILD_DIR SOURCE_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def header_version(path):
    text = open(path, encoding="utf-8").read()
    parts = []
    for p in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define SMELT_VERSION_%s (\d+)$" % p, text, re.MULTILINE)
        if not m:
            sys.exit(f"{path}: no SMELT_VERSION_{p}")
        parts.append(m.group(1))
    return ".".join(parts)


def pyproject_version(pyproject):
    """What scikit-build-core's regex provider makes of the settings in pyproject.toml."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        return None
    with open(pyproject, "rb") as f:
        cfg = tomllib.load(f)["tool"]["scikit-build"]["metadata"]["version"]
    src = os.path.join(os.path.dirname(pyproject), cfg["input"])
    m = re.search(cfg["regex"], open(src, encoding="utf-8").read(), re.MULTILINE)
    if not m:
        sys.exit(f"pyproject.toml's version regex does not match {src}")
    return cfg.get("result", "{value}").format(*m.groups(), **m.groupdict())


def main():
    cmake, build, source = sys.argv[1:4]
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        print("no C compiler: skipped")
        return 77
    want = header_version(os.path.join(source, "include", "smelt.h"))
    py = pyproject_version(os.path.join(source, "python", "pyproject.toml"))
    if py is not None and py != want:
        print(f"python/pyproject.toml gives version {py}, include/smelt.h says {want}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "prefix")
        r = subprocess.run([cmake, "--install", build, "--prefix", prefix], capture_output=True, text=True)
        if r.returncode:
            print("cmake --install failed:\n" + r.stdout + r.stderr)
            return 1
        inc = os.path.join(prefix, "include")
        libs = glob.glob(os.path.join(prefix, "lib*", "libsmelt.so"))
        if not os.path.exists(os.path.join(inc, "smelt.h")) or not libs:
            print(f"the install has no include/smelt.h or lib*/libsmelt.so under {prefix}")
            return 1
        libdir = os.path.dirname(libs[0])
        exe = os.path.join(tmp, "version")
        cmd = [cc, "-std=c11", "-Wall", "-Werror", "-I", inc, os.path.join(source, "examples", "version.c"),
               "-L", libdir, "-Wl,-rpath," + libdir, "-lsmelt", "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            return 1
        # the program must run on the installed library, not one from the build tree
        r = subprocess.run(["ldd", exe], capture_output=True, text=True)
        if r.returncode == 0 and os.path.realpath(libdir) not in r.stdout and libdir not in r.stdout:
            print("the example does not load the installed libsmelt.so:\n" + r.stdout)
            return 1
        r = subprocess.run([exe], capture_output=True, text=True)
        print(r.stdout + r.stderr, end="")
        if r.returncode:
            return 1
        if r.stdout.strip() != f"smelt {want}":
            print(f"expected 'smelt {want}'")
            return 1
        # pkg-config finds the installed library with the same version, when installed
        pc = shutil.which("pkg-config")
        if pc:
            env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
            r = subprocess.run([pc, "--modversion", "smelt"], capture_output=True, text=True, env=env)
            if r.returncode or r.stdout.strip() != want:
                print(f"pkg-config --modversion smelt: {r.stdout.strip()!r} {r.stderr.strip()}, expected {want}")
                return 1
    print(f"installed header and library agree: smelt {want}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
