#!/usr/bin/env python3
"""The layout rules of docs/DESIGN.md "Layout", checked on the source tree (TAP).

usage: check_layout.py SOURCE_ROOT [NUMVALD]

1. No import circle between code folders (a folder is a module; an arrow A -> B is
   a file of A including a header of B).
2. A `*_internal.h` is included only from its own folder.
3. A kind folder (worker/kinds/<k>/, with its subfolders) includes no other kind's
   folder and nothing of worker/agent/.
4. No source includes a `.c` file.
5. worker/ holds at most 10 files at its top level.
6. No "issue N" in product code (history belongs in git).
7. numvald needs neither libmpfr nor libgmp (its ELF NEEDED entries).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1])
NUMVALD = sys.argv[2] if len(sys.argv) > 2 else None
CODE = ["include", "common", "core", "worker", "daemon", "client"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

n = 0
failed = 0


def check(ok, what, detail=""):
    global n, failed
    n += 1
    print(("ok %d - %s" if ok else "not ok %d - %s") % (n, what))
    if not ok:
        failed += 1
        for line in detail.splitlines()[:40]:
            print("#   " + line)


def sources():
    for top in CODE:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def resolve(src, inc):
    """The file an include names, as the build finds it: the includer's own folder,
    then include/, then the repository root. A header meson generates from NAME.in
    (configure_file) resolves to its template."""
    for base in (os.path.dirname(src), "include", ""):
        p = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(ROOT, p)) or os.path.isfile(os.path.join(ROOT, p + ".in")):
            return p
    return None


files = sorted(sources())
edges = {}  # folder -> {folder: [(file, include)]}
internal_bad, kind_bad, dotc_bad, unresolved = [], [], [], []
for src in files:
    text = open(os.path.join(ROOT, src), encoding="utf-8").read()
    for inc in INCLUDE.findall(text):
        if inc.endswith(".c"):
            dotc_bad.append("%s includes %s" % (src, inc))
        target = resolve(src, inc)
        if target is None:
            unresolved.append("%s: %s" % (src, inc))
            continue
        a, b = os.path.dirname(src), os.path.dirname(target)
        if target.endswith("_internal.h") and a != b:
            internal_bad.append("%s includes %s" % (src, target))
        m = re.match(r"worker/kinds/([^/]+)/", src + "/")
        if m and a.startswith("worker/kinds/" + m.group(1)):
            k = m.group(1)
            mt = re.match(r"worker/kinds/([^/]+)/", target)
            if (mt and mt.group(1) != k) or target.startswith("worker/agent/"):
                kind_bad.append("%s includes %s" % (src, target))
        if a != b:
            edges.setdefault(a, {}).setdefault(b, []).append((src, inc))

check(not unresolved, "every quoted include resolves from its folder, include/ or the root",
      "\n".join(unresolved))


def find_cycle():
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, {})):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in state:
                c = visit(v)
                if c:
                    return c
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(edges):
        if u not in state:
            c = visit(u)
            if c:
                return c
    return None


cycle = find_cycle()
detail = ""
if cycle:
    for a, b in zip(cycle, cycle[1:]):
        f, inc = edges[a][b][0]
        detail += "%s -> %s (%s includes \"%s\")\n" % (a, b, f, inc)
check(cycle is None, "no import circle between code folders", detail)
check(not internal_bad, "*_internal.h only from its own folder", "\n".join(internal_bad))
check(not kind_bad, "a kind folder includes no other kind and nothing of worker/agent/",
      "\n".join(kind_bad))
check(not dotc_bad, "no source includes a .c file", "\n".join(dotc_bad))
for d, _, fs in os.walk(os.path.join(ROOT, "tests")):
    if "node_modules" in d:
        continue
    for f in fs:
        if f.endswith((".c", ".h")):
            p = os.path.join(d, f)
            for inc in INCLUDE.findall(open(p, encoding="utf-8").read()):
                if inc.endswith(".c"):
                    dotc_bad.append("%s includes %s" % (os.path.relpath(p, ROOT), inc))
check(not dotc_bad, "no test includes a .c file", "\n".join(dotc_bad))

top = [f for f in os.listdir(os.path.join(ROOT, "worker"))
       if os.path.isfile(os.path.join(ROOT, "worker", f))]
check(len(top) <= 10, "worker/ has at most 10 files at its top level (%d)" % len(top),
      " ".join(sorted(top)))

issue = re.compile(r"\b[Ii]ssue \d+\b")
mentions = []
for top_dir in CODE + ["web/app", "worker/harness"]:
    for d, _, fs in os.walk(os.path.join(ROOT, top_dir)):
        for f in fs:
            if f.endswith((".c", ".h", ".py", ".js", ".build")):
                p = os.path.join(d, f)
                for i, line in enumerate(open(p, encoding="utf-8"), 1):
                    if issue.search(line):
                        mentions.append("%s:%d: %s" % (os.path.relpath(p, ROOT), i, line.strip()))
check(not mentions, "no issue numbers in product code", "\n".join(mentions))

if NUMVALD:
    out = subprocess.run(["readelf", "-d", NUMVALD], capture_output=True, text=True)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)
    bad = [lib for lib in needed if re.match(r"lib(mpfr|gmp)\b", lib)]
    check(out.returncode == 0 and needed and not bad,
          "numvald needs neither libmpfr nor libgmp (NEEDED: %s)" % ", ".join(needed))

print("1..%d" % n)
sys.exit(1 if failed else 0)
