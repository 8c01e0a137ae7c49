#!/usr/bin/env python3
"""The man pages (packaging/man/*.scd, built by scdoc) render without a warning, and
they cannot go stale: every option a page documents is in its program's --help and
every option the --help shows is in the page; every key numvald.ini(5) documents is
one numvald's parser knows (it never answers "unknown key"), and every key the
annotated packaging/numvald.ini.in names is documented.

usage: test_man_pages.py SOURCE_ROOT NUMVALD WORKER NUMVALCTL PAGE..."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, NUMVALD, WORKER, CTL = sys.argv[1:5]
PAGES = {os.path.basename(p): p for p in sys.argv[5:]}
PROGRAM = {"numvald.8": NUMVALD, "numval-worker.1": WORKER, "numvalctl.1": CTL}
OPT = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")
failed = 0


def check(cond, what):
    global failed
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    failed += not cond


def scd(page):
    return open(os.path.join(SRC, "packaging", "man", page + ".scd")).read()


def render(page):
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    p = subprocess.run(["man", "-l", "--warnings", PAGES[page]], capture_output=True, text=True,
                       env=env, timeout=60)
    return p


if not shutil.which("man"):
    print("1..0 # SKIP man (man-db) not installed")
    sys.exit(77)
for page in ("numvald.8", "numval-worker.1", "numvalctl.1", "numvald.ini.5"):
    check(page in PAGES, "%s was built" % page)
    if page not in PAGES:
        continue
    p = render(page)
    warn = [l for l in p.stderr.splitlines() if l.strip()]
    check(p.returncode == 0 and not warn and len(p.stdout) > 500,
          "man -l --warnings %s: rendered, no warning lines (%s)" % (page, warn[:3]))
    if page not in PROGRAM:
        continue
    prog = PROGRAM[page]
    # Options the page documents: bold tokens *--opt* in the scdoc source.
    documented = set(re.findall(r"\*(--?[a-z][a-z0-9-]*)\*", scd(page)))
    h = subprocess.run([prog, "--help"], capture_output=True, text=True, timeout=30)
    check(h.returncode == 0, "%s --help exits 0" % prog)
    shown = set(OPT.findall(h.stdout))
    for meta in ("--help", "--version"):
        if meta in documented:
            r = subprocess.run([prog, meta], capture_output=True, text=True, timeout=30)
            check(r.returncode == 0 and r.stdout, "%s %s works as %s documents" % (prog, meta, page))
    stale = sorted(documented - shown - {"--help", "--version", "-h"})
    check(not stale, "%s: every documented option is in %s --help (not: %s)" %
          (page, os.path.basename(prog), stale))
    undocumented = sorted(shown - documented)
    check(not undocumented, "%s: every option of %s --help is documented (not: %s)" %
          (page, os.path.basename(prog), undocumented))

# numvald.ini(5): "# [section]" headings, then *key* entries at line start.
keys, section = [], None
for line in scd("numvald.ini.5").splitlines():
    m = re.match(r"# \[([a-z]+)(?: NAME)?\]", line)
    if m:
        section = m.group(1)
    elif line.startswith("# "):
        section = None
    elif section and not line.startswith("\t"):
        m = re.match(r"\*([a-z_]+)\* =", line)
        # "*key* = VALUE" names one key; a comma list of *key*s names several.
        for k in [m.group(1)] if m else re.findall(r"\*([a-z_]+)\*,?", line):
            keys.append((section, k))
check(len(keys) >= 30, "numvald.ini(5) documents the config keys (%d found)" % len(keys))
with tempfile.TemporaryDirectory(prefix="numval-man-") as tmp:
    unknown = []
    for sec, k in keys:
        head = {"device": "[device d0]\nbackend = emu\n", "schedule": "[schedule s0]\n",
                "pool": "[pool p0]\n",
                "webhook": "[webhook w0]\n"}
        text = head.get(sec, "[%s]\n" % sec) + "%s = 1\n" % k
        conf = os.path.join(tmp, "t.ini")
        open(conf, "w").write(text)
        p = subprocess.run([NUMVALD, "--config", conf, "--data-dir", os.path.join(tmp, "d"),
                            "--check-config"], capture_output=True, text=True, timeout=60)
        if "unknown key" in p.stderr or "unknown section" in p.stderr:
            unknown.append("[%s] %s" % (sec, k))
    check(not unknown, "numvald knows every key numvald.ini(5) documents (not: %s)" % unknown)
documented_keys = {k for _, k in keys}
example = open(os.path.join(SRC, "packaging", "numvald.ini.in")).read()
named = set(re.findall(r"^#? ?([a-z_]+) = ", example, re.M))
missing = sorted(named - documented_keys)
check(named and not missing, "every key of packaging/numvald.ini.in is in numvald.ini(5) "
      "(not: %s)" % missing)
sys.exit(1 if failed else 0)
