#!/usr/bin/env python3
"""The summation tree, block width and alignment of contract jobs on emu
(docs/CONTRACT.md "Summation tree, block width, alignment"): numval-worker run
of a contract job on emu orders (sequential, pairwise, tree:K, splitk:K, the
arbitrary randtree:S) and adders (accum_block=W: W terms per rounding;
accum_align=truncate: alignment drops shifted-out bits). The expected tree of
each mode is built here from the order's definition (Python, not numval's
code: the families of emu_sum.c and splitmix64 for randtree); every measured
tree, block width and alignment must equal it for sum and matmul, fp32 and
bf16, with no mismatch against emu's truthful describe(). Then devices that
lie (plugin_liar.c, REAL|CLAIMED): blocks done, none declared; truncation done,
rounding declared; one randtree done, another declared: each must fail with
its contract_mismatch, the evidence checked from its numbers alone.

usage: test_contract_tree.py NUMVAL_WORKER LIAR_SO   (TAP; temp dir removed)"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

import nvschema

from nvtap import ok, finish, checks

WORKER, LIAR = sys.argv[1:3]
SPEC = {"kind": "contract", "dtypes": ["fp32", "bf16"],
        "probes": ["conversion", "arithmetic", "accumulation"]}
N = 32
VALIDATOR = nvschema.validator()
signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))


# ---- expected trees: a node is a tuple of children, a leaf an int ----
def run_tree(idx, w):
    """A sequential run adding w terms per rounding."""
    node = None
    for start in range(0, len(idx), w):
        block = idx[start:start + w]
        kids = ([node] if node is not None else []) + block
        node = kids[0] if len(kids) == 1 else tuple(kids)
    return node


def halving(parts):
    if len(parts) == 1:
        return parts[0]
    h = len(parts) // 2
    return (halving(parts[:h]), halving(parts[h:]))


def splitmix(z):
    z = (z + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


def randtree(seed, lo, m):
    if m == 1:
        return lo
    z = ((seed * 0x9E3779B97F4A7C15) & (2**64 - 1)) ^ ((lo << 32) & (2**64 - 1)) ^ m
    h = 1 + splitmix(z) % (m - 1)
    return (randtree(seed, lo, h), randtree(seed, lo + h, m - h))


def family(order, w):
    if order == "sequential":
        return run_tree(list(range(N)), w)
    if order == "pairwise":
        return halving(list(range(N)))
    name, k = order.split(":")
    k = int(k)
    if name == "tree":
        return halving([run_tree(list(range(j, N, k)), w) for j in range(min(k, N))])
    if name == "splitk":
        chunk = -(-N // k)
        node = None
        for lo in range(0, N, chunk):
            r = run_tree(list(range(lo, min(N, lo + chunk))), w)
            node = r if node is None else (node, r)
        return node
    if name == "randtree":
        return randtree(k, 0, N)
    raise ValueError(order)


def leaves(t):
    return [t] if isinstance(t, int) else [x for c in t for x in leaves(c)]


def text(t):
    """numval's text: children by their smallest leaf."""
    if isinstance(t, int):
        return str(t)
    return "(" + ",".join(text(c) for c in sorted(t, key=lambda c: min(leaves(c)))) + ")"


def parse(s):
    pos = 0

    def node():
        nonlocal pos
        if s[pos] == "(":
            pos += 1
            kids = [node()]
            while s[pos] == ",":
                pos += 1
                kids.append(node())
            pos += 1
            return tuple(kids)
        start = pos
        while s[pos].isdigit():
            pos += 1
        return int(s[start:pos])
    return node()


def fan_in(t):
    return 0 if isinstance(t, int) else max([len(t)] + [fan_in(c) for c in t])


def run(tmp, backend, want_rc):
    path = os.path.join(tmp, "job-%d.json" % checks())
    with open(path, "w") as f:
        json.dump(SPEC, f)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "2"],
                       capture_output=True, text=True, timeout=600)
    ok(p.returncode == want_rc, "%s: exit %d (want %d)" % (backend, p.returncode, want_rc),
       p.stderr[-2000:])
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        ok(False, "%s: the output is JSON" % backend, p.stdout[-2000:])
        return None
    errs = nvschema.errors(VALIDATOR, doc)
    ok(not errs, "%s: the result is valid under the schema" % backend, "\n".join(errs))
    return doc


MODES = [  # mode, order, terms per rounding, alignment, family fit expected
    ("", "sequential", 1, "round"),
    ("reduce=pairwise", "pairwise", 1, "round"),
    ("reduce=tree:4", "tree:4", 1, "round"),
    ("reduce=splitk:4", "splitk:4", 1, "round"),
    ("reduce=randtree:7", "randtree:7", 1, "round"),
    ("reduce=randtree:9999991", "randtree:9999991", 1, "round"),
    ("accum_block=4", "sequential", 4, "round"),
    ("accum_block=4,accum_align=truncate", "sequential", 4, "truncate"),
    ("accum_align=truncate,reduce=pairwise", "pairwise", 1, "truncate"),
    ("accum_block=3,reduce=tree:2", "tree:2", 3, "round"),
    ("accum_block=5,reduce=splitk:3,rounding=up", "splitk:3", 5, "round"),
    ("accum_block=2,accum_align=truncate,rounding=down", "sequential", 2, "truncate"),
]


def check_mode(doc, mode, order, w, align):
    want = text(family(order, w))
    for dt in ("fp32", "bf16"):
        c = doc["measured"]["contract"][dt]
        for pre, op in (("", "sum"), ("matmul_", "matmul")):
            what = "emu:%s %s %s" % (mode, dt, op)
            got = c.get(pre + "reduction_tree")
            ok(got == want, "%s: the tree is the order's" % what, "want %s\n got %s" % (want, got))
            ok(c.get(pre + "block_width") == w, "%s: %d terms per rounding (measured %r)"
               % (what, w, c.get(pre + "block_width")))
            ok(c.get(pre + "alignment") == align, "%s: alignment %s (measured %r)"
               % (what, align, c.get(pre + "alignment")))
            fit = c.get(pre + "reduction_order")
            want_fit = "unrecognized" if order.startswith("randtree") else order
            ok(fit == want_fit, "%s: the order fit (models the measured adder) reads %s (%r)"
               % (what, want_fit, fit))
    ok(doc["verdict"] == "passed" and not doc["mismatches"],
       "emu:%s: truthful describe(), no mismatch" % mode, json.dumps(doc["mismatches"])[:1500])
    judged = {j["field"] for j in doc["judged"]}
    need = {"contract.fp32.block_width", "contract.fp32.alignment(matmul)"}
    if order.startswith("randtree"):
        need.add("contract.fp32.reduction_tree")
    ok(need <= judged, "emu:%s: %s judged" % (mode, ", ".join(sorted(need))), sorted(judged))


def mismatch(doc, field):
    return next((m for m in doc.get("mismatches", []) if m["field"] == field), None)


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", int(bits, 16)))[0]


def rn32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    tmp = tempfile.mkdtemp(prefix="nv-contract-tree-")
    try:
        for mode, order, w, align in MODES:
            doc = run(tmp, "emu:" + mode, 0)
            if doc:
                check_mode(doc, mode, order, w, align)
        # lies
        doc = run(tmp, "plugin:%s?accum_block=4|" % LIAR, 1)
        m = doc and mismatch(doc, "contract.fp32.block_width")
        ok(m and m["declared"] == 1 and m["measured"] == 4,
           "blocks of 4 done, 1 declared: contract_mismatch", doc and doc.get("mismatches"))
        if m:
            t = parse(m["evidence"][0]["tree"])
            ok(fan_in(t) == 5 and len(t) == 5,
               "evidence: the tree's nodes add an accumulator and 4 terms with one rounding: %s"
               % m["evidence"][0]["tree"][:80])
        doc = run(tmp, "plugin:%s?accum_align=truncate|" % LIAR, 1)
        m = doc and mismatch(doc, "contract.fp32.alignment")
        ok(m and m["declared"] == "round" and m["measured"] == "truncate",
           "truncation done, rounding declared: contract_mismatch", doc and doc.get("mismatches"))
        if m:
            e = m["evidence"][0]
            xs = [f32(i["bits"]) for i in e["inputs"]]
            # positions 0, 1 and 66 with zeros between: in float32 summed left
            # to right the rounded difference of the first two survives -B.
            s = rn32(rn32(xs[0] + xs[1]) + xs[2])
            ok(f32(e["output"]["bits"]) == 0 and s != 0 and s != -xs[1] and s != -xs[0],
               "evidence: %r + %r + %r gave 0; a rounding adder gives %r" % (xs[0], xs[1], xs[2], s))
        doc = run(tmp, "plugin:%s?reduce=randtree:7|reduce=randtree:8" % LIAR, 1)
        m = doc and mismatch(doc, "contract.fp32.reduction_tree")
        ok(m and m["declared"] == text(family("randtree:8", 1)) and
           m["measured"] == text(family("randtree:7", 1)),
           "one tree done, another declared: contract_mismatch naming both trees",
           doc and json.dumps(doc.get("mismatches"))[:1500])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
