#!/usr/bin/python3
"""Model jobs through the PyTorch harness's graph request (docs/EXEC_PROTOCOL.md
"Optional requests", docs/MODEL.md "The PyTorch harness"): the shipped
decoder-lm built as a torch module tree and run eager, TorchScript-scripted and traced
(fp32 and bf16), every node captured through forward hooks and judged against
numval's references; the scripted run's case carries the TorchScript graph;
a deliberately wrong module (--wrong-op) is localized to its op; autocast(bf16)
on the fp32 model is caught at the first lowered matmul; a harness that does not
list the request gets "not offered" naming it; compile/autocast are refused
where they cannot apply. The cnn-classifier runs eager and scripted too, and a
wrong conv2d module is localized to conv1.

usage: test_torch_model.py NUMVAL_WORKER SOURCE_ROOT   (TAP; exit 77 without torch)
Temp files live in a temp dir that is always removed."""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torchproto import TORCH_PY, torch_available  # noqa: E402
import nvschema  # noqa: E402

from nvtap import ok, finish

WORKER, ROOT = sys.argv[1:3]
HARNESS = "exec:%s %s --device cpu" % (TORCH_PY, os.path.join(ROOT, "worker/harness/torch_harness.py"))
SCHEMA_ERRORS = []


def lm_job(**extra):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = next(j for j in json.load(f)["jobs"] if j["name"] == "decoder-lm")
    job = copy.deepcopy(job)
    job.update({"samples": 1, "seed": 3, "execution": "graph"})
    job.update(extra)
    return job


def run(tmp, job, backend):
    """numval-worker run on one job: (exit code, result, stderr)."""
    path, out = os.path.join(tmp, "job.json"), os.path.join(tmp, "out.json")
    with open(path, "w") as f:
        json.dump(job, f)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([WORKER, "run", path, "--backend", backend, "--threads", "1",
                        "--output", out], capture_output=True, text=True, timeout=600)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
        SCHEMA_ERRORS.extend(nvschema.errors(nvschema.validator(), doc))
    return p.returncode, doc, p.stderr


def brief(doc, err=""):
    if not doc:
        return err[-800:]
    return json.dumps([{k: c.get(k) for k in ("dtype", "verdict", "failure_class", "error",
                                               "first_divergent")}
                       for c in doc.get("cases", [])])[:1500]


def cnn_job(**extra):
    with open(os.path.join(ROOT, "suites", "model.json")) as f:
        job = next(j for j in json.load(f)["jobs"] if j["name"] == "cnn-classifier")
    job = copy.deepcopy(job)
    job.update({"samples": 1, "seed": 3, "execution": "graph"})
    job.update(extra)
    return job


def check_cnn(tmp):
    """The CNN classifier as torch modules (F.conv2d, F.max_pool2d, torch.flatten):
    eager and scripted pass with every node in band; a wrong conv2d module is
    localized to conv1."""
    for compile_ in ("none", "script"):
        rc, doc, err = run(tmp, cnn_job(dtypes=["fp32", "bf16"], compile=compile_), HARNESS)
        cs = (doc or {}).get("cases", [])
        ok(rc == 0 and doc["verdict"] == "passed" and len(cs) == 2 and
           all(c.get("nodes") and all(nd["state"] == "in_band" for nd in c["nodes"]) for c in cs),
           "torch modules (%s): cnn-classifier passes in fp32 and bf16, every node in band"
           % compile_, brief(doc, err))
        if compile_ == "script":
            ir = (cs[0].get("compiled", {}) if cs else {}).get("ir", "")
            ok("aten::conv2d" in ir and "aten::max_pool2d" in ir and "aten::flatten" in ir,
               "the CNN's TorchScript graph holds aten::conv2d, aten::max_pool2d, aten::flatten",
               ir[:1200])
    rc, doc, err = run(tmp, cnn_job(dtypes=["fp32"]), HARNESS + " --wrong-op conv2d")
    fd = ((doc or {}).get("cases", [{}])[0]).get("first_divergent") or {}
    ok(doc and doc["verdict"] == "failed" and fd.get("op") == "conv2d" and
       fd.get("layer") == "conv1", "--wrong-op conv2d: the CNN is localized to conv1's conv2d",
       brief(doc, err))


def all_in_band(c):
    return all(nd["state"] == "in_band" for nd in c.get("nodes", [])) and len(c.get("nodes", [])) == 65


def main(tmp):
    check_cnn(tmp)
    # eager module tree, fp32 and bf16 (fp32 accumulation)
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32", "bf16"]), HARNESS)
    cs = (doc or {}).get("cases", [])
    ok(rc == 0 and doc["verdict"] == "passed" and len(cs) == 2 and all(map(all_in_band, cs)),
       "eager torch modules: decoder-lm passes in fp32 and bf16, all 65 captured nodes in band",
       brief(doc, err))
    ok(doc and doc.get("compile") == "none" and doc.get("execution") == "graph" and
       not any("compiled" in c for c in cs),
       "an eager run says compile none and carries no compiled IR", brief(doc))

    # TorchScript-scripted
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32", "bf16"], compile="script"), HARNESS)
    cs = (doc or {}).get("cases", [])
    ok(rc == 0 and doc["verdict"] == "passed" and len(cs) == 2 and all(map(all_in_band, cs)),
       "scripted torch modules: decoder-lm passes in fp32 and bf16, all 65 nodes in band",
       brief(doc, err))
    comp = cs[0].get("compiled", {}) if cs else {}
    ir = comp.get("ir", "")
    ok(comp.get("compiler", "").startswith("torchscript") and ir.startswith("graph(") and
       not comp.get("truncated") and comp.get("ir_bytes") == len(ir),
       "the scripted case carries the whole TorchScript graph (%d bytes)" % len(ir),
       json.dumps({k: v for k, v in comp.items() if k != "ir"}))
    # what the graph must hold: nn.Linear's kernel for the weight matmuls, the
    # embedding gather, the attention's bmm as matmul, the scripted hooks'
    # captures (one SetAttr per node)
    ok("aten::linear" in ir and "aten::embedding" in ir and "aten::softmax" in ir and
       ir.count('prim::SetAttr[name="captured"]') == 65,
       "the TorchScript graph holds aten::linear, aten::embedding, aten::softmax and the 65 "
       "hook captures", ir[:1200])

    # torch.jit.trace: the hooks' writes are not recorded by a trace, so the
    # harness traces the model returning its outputs and every capture
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32", "bf16"], compile="trace"), HARNESS)
    cs = (doc or {}).get("cases", [])
    ok(rc == 0 and doc["verdict"] == "passed" and doc.get("compile") == "trace" and
       len(cs) == 2 and all(map(all_in_band, cs)),
       "traced torch modules: decoder-lm passes in fp32 and bf16, all 65 nodes in band",
       brief(doc, err))
    comp = cs[0].get("compiled", {}) if cs else {}
    ir = comp.get("ir", "")
    # the graph returns one tuple: the logits and the 65 captures
    lines = ir.strip().splitlines()
    ret = lines[-1].strip() if lines else ""
    tup = lines[-2] if len(lines) > 1 else ""
    n_ret = tup.split("prim::TupleConstruct(")[-1].count("%") if "prim::TupleConstruct(" in tup else 0
    ok(comp.get("compiler", "").startswith("torchscript") and "torch.jit.trace" in
       comp.get("what", "") and ir.startswith("graph(") and not comp.get("truncated") and
       comp.get("ir_bytes") == len(ir) and "aten::linear" in ir and "aten::embedding" in ir and
       "aten::softmax" in ir and 'prim::SetAttr[name="captured"]' not in ir and
       ret.startswith("return (") and n_ret == 66,
       "the traced case carries the trace's graph (%d bytes): aten::linear, aten::embedding, "
       "aten::softmax, no hook writes, a tuple of the logits and 65 captures returned (%d)"
       % (len(ir), n_ret),
       json.dumps({k: v for k, v in comp.items() if k != "ir"}) + " " + ret[:200])

    # a deliberately wrong module, eager, scripted and traced: localized to its op
    for op, node, compile_ in (("silu", "decoder.0.act", "none"), ("softmax", "decoder.0.p", "script"),
                               ("rms_norm", "decoder.0.n1", "trace")):
        rc, doc, err = run(tmp, lm_job(dtypes=["fp32"], compile=compile_),
                           HARNESS + " --wrong-op " + op)
        c = (doc or {}).get("cases", [{}])[0]
        fd = c.get("first_divergent") or {}
        ok(doc and doc["verdict"] == "failed" and fd.get("op") == op and fd.get("node") == node and
           fd.get("layer") == "decoder.0" and
           (fd.get("local") or {}).get("verdict") == "outside_tolerance" and
           (doc.get("mode") or {}).get("wrong_op") == op,
           "--wrong-op %s (%s): localized to node %s, op %s, wrong by its own local check"
           % (op, compile_, node, op), brief(doc, err))

    # autocast(bf16) on the fp32 model: the first matmul autocast lowers leaves the band
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32"], autocast="bf16"), HARNESS)
    c = (doc or {}).get("cases", [{}])[0]
    fd = c.get("first_divergent") or {}
    ok(doc and doc["verdict"] == "failed" and fd.get("node") == "decoder.0.q" and
       fd.get("op") == "matmul" and doc.get("autocast") == "bf16",
       "autocast(bf16) on the fp32 decoder-lm fails at its first lowered matmul (decoder.0.q)",
       brief(doc, err))

    # a harness that does not list the request
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32"]), HARNESS + " --no-requests")
    c = (doc or {}).get("cases", [{}])[0]
    ok(doc and c.get("verdict") == "error" and c.get("failure_class") == "not_offered" and
       (c.get("error") or "").startswith("not offered: harness '") and
       "--no-requests" in c.get("error", "") and "'graph'" in c.get("error", ""),
       "a harness without the graph request: the case says not offered, naming the harness",
       brief(doc, err))

    # where compile/autocast cannot apply
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32"], compile="script"), "emu")
    ok(rc != 0 and doc is None and "not an exec harness" in err and "compile" in err,
       "compile on emu is refused naming why", err[-400:])
    job = lm_job(dtypes=["fp32"], autocast="bf16")
    job["execution"] = "eager"
    rc, doc, err = run(tmp, job, HARNESS)
    ok(rc != 0 and "/autocast" in err and "\"execution\": \"graph\"" in err,
       "autocast with eager execution is refused at /autocast", err[-400:])
    rc, doc, err = run(tmp, lm_job(dtypes=["fp32"], compile="jit"), HARNESS)
    ok(rc != 0 and "/compile" in err and "script" in err,
       "an unknown compile mode is refused at /compile", err[-400:])
    ok(not SCHEMA_ERRORS, "every result validates against schema/result.schema.json "
       "(compiled, seconds, compile, autocast, not_offered)", "\n".join(SCHEMA_ERRORS))


if __name__ == "__main__":
    if not torch_available():
        print("1..0 # SKIP /usr/bin/python3 cannot import torch")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="nv-torch-model-")
    try:
        main(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(finish())
