#!/usr/bin/env python3
"""The include graph of src/ against the layering in docs/ARCHITECTURE.md.

usage: layers.py [REPO_ROOT]      (default: this checkout)
       layers.py --self-test      (the checker on made-up trees)

Reads the table under "## Layers" in docs/ARCHITECTURE.md (rows
`| N | `folder/` | ...`, N the rank, lowest first) and every `#include "..."`
in src/ (.c, .h, .def).  Fails, naming the file and line, on:
  - an include of a folder of a higher rank, or of another folder of the
    same rank (folders of one rank are independent of each other);
  - a folder of src/ that the table does not list (or a row naming none),
    that has no README.md, or that README.md (its layout section) does not
    name as `src/FOLDER/`;
  - a cycle between folders (reported even when the ranks would allow it).
Includes are resolved as the build does: beside the file, then under src/;
what resolves to neither (the public include/smelt.h, generated headers)
is not a layer and is allowed everywhere.  Exit 0 when the graph obeys."""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ROW = re.compile(r'^\|\s*(\d+)\s*\|\s*`?([A-Za-z0-9_]+)/?`?\s*\|')


def read_layers(doc):
    ranks, in_table = {}, False
    with open(doc, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                in_table = line.strip().lower() == "## layers"
                continue
            m = ROW.match(line) if in_table else None
            if m:
                ranks[m.group(2)] = int(m.group(1))
    return ranks


def includes(src):
    """(from_folder, to_folder, 'path:line', included) for every include crossing folders."""
    out = []
    for d, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".def")):
                continue
            path = os.path.join(d, name)
            here = os.path.relpath(path, src).split(os.sep)[0]
            with open(path, encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    beside = os.path.normpath(os.path.join(d, inc))
                    if os.path.isfile(beside):
                        target = os.path.relpath(beside, src)
                    elif os.path.isfile(os.path.join(src, inc)):
                        target = os.path.normpath(inc)
                    else:
                        continue  # include/smelt.h, system or generated headers: not a layer
                    if target.startswith(".."):
                        continue
                    there = target.split(os.sep)[0]
                    if there != here:
                        out.append((here, there, f"{os.path.relpath(path, os.path.dirname(src))}:{no}", inc))
    return out


def cycles(edges):
    """Strongly connected components with more than one folder (Tarjan)."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def shortest_cycle(start, edges):
    """Folders start -> ... -> start along edges (breadth first)."""
    prev, todo = {}, [start]
    while todo:
        nxt = []
        for v in todo:
            for a, b in sorted(edges):
                if a != v:
                    continue
                if b == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return [start] + path[::-1][1:] + [start] if v != start else [start, start]
                if b not in prev:
                    prev[b] = v
                    nxt.append(b)
        todo = nxt
    return [start]


def self_test():
    """The checker on a made-up tree: a clean one passes; an include of a
    higher layer, a same-layer include, an unlisted folder and a cycle are
    each caught and named by file and line."""
    import subprocess
    import tempfile

    def tree(files, table):
        d = tempfile.mkdtemp(prefix="layers-selftest-")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
            with open(os.path.join(d, path), "w") as f:
                f.write(text)
        rows = "".join(f"| {r} | `{n}/` | x |\n" for n, r in table)
        with open(os.path.join(d, "docs", "ARCHITECTURE.md"), "w") as f:
            f.write("# A\n\n## Layers\n\n| rank | folder | owns |\n|---|---|---|\n" + rows + "\n## Next\n")
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("# R\n\n## Layout\n" + "".join(f"src/{n}/\n" for n, _ in table))
        r = subprocess.run([sys.executable, __file__, d], capture_output=True, text=True)
        subprocess.run(["rm", "-rf", d])
        return r.returncode, r.stdout

    base = {"docs/.keep": "", "src/lo/README.md": "", "src/hi/README.md": "", "src/lo/a.h": "#include <stdio.h>\n",
            "src/hi/b.c": '#include "lo/a.h"\n#include "hi/b.h"\n', "src/hi/b.h": "\n"}
    ok = True
    rc, out = tree(base, [("lo", 1), ("hi", 2)])
    ok &= rc == 0
    rc, out = tree(dict(base, **{"src/lo/a.h": '\n#include "hi/b.h"\n'}), [("lo", 1), ("hi", 2)])
    ok &= rc == 1 and "src/lo/a.h:2" in out and "higher layer hi/" in out
    rc, out = tree(base, [("lo", 1), ("hi", 1)])
    ok &= rc == 1 and "src/hi/b.c:1" in out and "same layer" in out
    rc, out = tree(base, [("lo", 1)])
    ok &= rc == 1 and "src/hi/: folder not in the layering table" in out
    rc, out = tree(dict(base, **{"src/lo/a.h": '#include "hi/b.h"\n'}), [("lo", 1), ("hi", 2)])
    ok &= rc == 1 and "include cycle between folders" in out
    rc, out = tree({k: v for k, v in base.items() if k != "src/hi/README.md"}, [("lo", 1), ("hi", 2)])
    ok &= rc == 1 and "src/hi/README.md is missing" in out
    print("layers self-test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    doc, src = os.path.join(root, "docs", "ARCHITECTURE.md"), os.path.join(root, "src")
    if not os.path.isfile(doc):
        print(f"layers: {doc} is missing (the layering table lives there)")
        return 1
    ranks = read_layers(doc)
    if not ranks:
        print(f"layers: {doc}: no rows `| N | folder/ | ...` under '## Layers'")
        return 1
    bad = []
    folders = sorted(e for e in os.listdir(src) if os.path.isdir(os.path.join(src, e)))
    for f in folders:
        if f not in ranks:
            bad.append(f"src/{f}/: folder not in the layering table of docs/ARCHITECTURE.md")
    for f in sorted(ranks):
        if f not in folders:
            bad.append(f"docs/ARCHITECTURE.md: layer '{f}/' names no folder of src/")
    readme = os.path.join(root, "README.md")
    layout = open(readme, encoding="utf-8").read() if os.path.isfile(readme) else ""
    layout = layout.split("\n## Layout", 1)[1].split("\n## ", 1)[0] if "\n## Layout" in layout else ""
    for f in folders:
        if not os.path.isfile(os.path.join(src, f, "README.md")):
            bad.append(f"src/{f}/README.md is missing (what the folder owns, may include, must never be included by)")
        if f"src/{f}/" not in layout:
            bad.append(f"README.md: the layout section does not name src/{f}/")
    found = includes(src)
    for here, there, where, inc in found:
        if here not in ranks or there not in ranks:
            continue
        if ranks[there] > ranks[here]:
            bad.append(f'{where}: {here}/ (layer {ranks[here]}) includes "{inc}" of the higher layer {there}/ ({ranks[there]})')
        elif ranks[there] == ranks[here]:
            bad.append(f'{where}: {here}/ includes "{inc}" of {there}/, a folder of the same layer {ranks[here]}')
    first = {}
    for a, b, w, _ in found:
        first.setdefault((a, b), w)
    for comp in cycles(set(first)):
        path = shortest_cycle(comp[0], {e for e in first if e[0] in comp and e[1] in comp})
        steps = [f"{first[(a, b)]} ({a}/ -> {b}/)" for a, b in zip(path, path[1:])]
        bad.append("include cycle between folders " + " -> ".join(f + "/" for f in path) + ": " + "; ".join(steps))
    for b in bad:
        print("layers: " + b)
    print(f"layers: {len(found)} includes across {len(folders)} folders checked, {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
