#!/usr/bin/env python3
"""Fused failures through the service, with real processes.

The attention graph of suites/fused.json (S = Q K^T, Z = S * 1/8, P =
softmax(Z), O = P V) fails on emu's faulty fused mode fused_intermediate=bf16
(intermediates held in bf16 inside the fused region; docs/JOBS.md "emu's fused
mode") with the QK^T matmul "s" as its first divergent node. Through numvald
and a worker in agent mode:
- the agent gates the failure (5/5 runs fail the same way), minimizes it to at
  most 3 nodes with "s" among them and uploads the reproducer; the case carries
  the fused signature (its id recomputed here as the SHA-256 of the canonical
  JSON, docs/ARTIFACTS.md "Fused reproducers");
- numvald promotes it once: one suite case of kind "fused", named by the first
  divergent op and its judged dtype (matmul, fp32);
- a second failing job with the same fault (another seed, another build)
  records an occurrence, no second suite case;
- a suite job replays it with the fused probe: it fails on the faulty mode with
  the stored signature, every node's fused value bit-identical to the stored
  one, and passes on the correct emu;
- `numvalctl repro CASE_ID` downloads the case's artifact and reproduces it.

Sequence length: the suite runs attention at L = 2048, where one execution
takes about 90 s on a shared 2-core host; the fault (bf16 held intermediates)
does not depend on L, so the test runs the suite's graph with every extent 2048
replaced by 128 (same nodes, ops, attributes and dtypes), as
test_minimize_fused.py does.

usage: test_fused_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL SOURCE_ROOT"""
import hashlib
import json
import os
import sys
import urllib.request

from nvartifact import MAGIC, parse, signature_id, unzstd
from nvservice import Service, check, main

ROOT = sys.argv.pop(4) if len(sys.argv) > 4 else ""
FAULTY = "emu:fused_intermediate=bf16"


def attention():
    with open(os.path.join(ROOT, "suites", "fused.json")) as f:
        att = [j for j in json.load(f)["jobs"] if j["name"] == "attention"][0]
    for i in att["graph"]["inputs"]:
        i["shape"] = [128 if e == 2048 else e for e in i["shape"]]
    att.pop("description", None)
    return att


def decode(blob):
    """(manifest, tensor names) of a container (nvartifact.py)."""
    raw = unzstd(blob=blob, timeout=60)
    check(raw[:8] == MAGIC, "artifact magic NVARTF01")
    man, records = parse(raw)
    return man, [r[0] for r in records]


def artifact(s, sha):
    with urllib.request.urlopen(s.url + "/api/v1/artifacts/" + sha, timeout=30) as r:
        blob = r.read()
    check(hashlib.sha256(blob).hexdigest() == sha, "artifact %s.. hash-verified" % sha[:12])
    return blob


def submit(s, spec, device, build):
    st, body = s.api("POST", "/api/v1/jobs", dict(spec, device=device,
                                                  build={"name": build, "version": build}),
                     scope="submit")
    check(st == 201, "submitted %s on %s (%s)" % (spec["kind"], device,
                                                 body if st != 201 else body["job"]["id"]))
    return body["job"]["id"]


def failed_case(s, job_id):
    cs = [c for c in s.cases(job_id) if c["verdict"] == "failed"]
    check(len(cs) == 1, "job %s: one failed case (%d)" % (job_id, len(cs)))
    return cs[0]


def test(bins):
    att = attention()
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("faulty", FAULTY)
        s.start_worker("emu", "emu")

        j1 = submit(s, att, "faulty", "f1")
        check(s.wait_jobs([j1], 60)[j1]["state"] == "failed",
              "attention fails on %s" % FAULTY)
        c1 = failed_case(s, j1)
        fd = c1.get("first_divergent") or {}
        check(fd.get("node") == "s" and fd.get("op") == "matmul",
              "first divergent node 's' (matmul): %s" % json.dumps(fd))
        check(c1.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
              "gate: 5/5 runs fail, every node bit-identical (%s)" % c1.get("repro_rate"))
        check(c1.get("flaky") is False and len(c1.get("minimized_artifact", "")) == 64,
              "case carries its minimized artifact (%s)" % sorted(c1))
        sig = c1["signature"]
        check(sig["kind"] == "fused" and sig["op"] == "matmul" and sig["dtype"] == "fp32" and
              sig["case_dtype"] == "bf16" and sig["failure_class"] == c1["failure_class"] and
              sig["id"] == signature_id(sig),
              "fused signature (matmul judged in fp32, bf16 case, %s), id = sha256 of its "
              "canonical JSON" % c1["failure_class"])
        mn = c1.get("minimized_nodes") or {}
        check(mn.get("before") == 4 and mn.get("after", 9) <= 3 and "s" in mn.get("nodes", []),
              "minimized to %s nodes %s (<= 3, 's' kept)" % (mn.get("after"), mn.get("nodes")))

        man, names = decode(artifact(s, c1["minimized_artifact"]))
        g = man["spec"]["graph"]
        check(len(g["nodes"]) <= 3 and any(n["name"] == "s" and n["op"] == "matmul"
                                            for n in g["nodes"]),
              "the minimized artifact's graph: %s" % [n["name"] for n in g["nodes"]])
        check(all("input:%s" % i["name"] in names for i in g["inputs"]) and
              all("fused:%s" % n["name"] in names for n in g["nodes"]),
              "it holds every input and every node's fused value")
        check(man.get("minimized_from") == c1["artifact"] and
              man.get("signature", {}).get("id") == sig["id"] and
              str(man.get("job_id")) == str(j1),
              "it names the original artifact, the signature and the job")

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["kind"] == "fused" and sc["op"] == "matmul" and sc["dtype"] == "fp32" and
              sc["signature"] == sig["id"] and sc["artifact"] == c1["minimized_artifact"] and
              sc["occurrences"] == 1 and sc["origin_job"] == int(j1) and
              sc["first_failing_build"]["name"] == "f1",
              "suite case: kind fused, matmul fp32, signature, origin job, build f1 (%s)"
              % {k: sc.get(k) for k in ("kind", "op", "dtype", "occurrences")})

        p = s.ctl("suite", "list", token_scope="read")
        row = [l.split() for l in p.stdout.splitlines()[1:] if l.strip()]
        check(p.returncode == 0 and len(row) == 1 and row[0][2:5] == ["fused", "matmul", "fp32"],
              "numvalctl suite list: KIND fused, OP matmul, DTYPE fp32 (%s)" % p.stdout.strip())

        j2 = submit(s, dict(att, seed=6), "faulty", "f2")
        check(s.wait_jobs([j2], 60)[j2]["state"] == "failed", "second job fails too")
        c2 = failed_case(s, j2)
        check(c2.get("signature", {}).get("id") == sig["id"] and
              len(c2.get("minimized_artifact", "")) == 64,
              "second failure: same signature, minimized again")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(len(suite["suite"]) == 1 and suite["suite"][0]["occurrences"] == 2,
              "same fault, second job: no second suite case, occurrences 2")

        # f2 is qualified before f3 (builds follow each other): history order.
        sj_bad = submit(s, {"kind": "suite"}, "faulty", "f2")
        done = s.wait_jobs([sj_bad], 60)
        sj_ok = submit(s, {"kind": "suite", "filter": {"kind": "fused"}}, "emu", "f3")
        done.update(s.wait_jobs([sj_ok], 60))
        check(done[sj_bad]["state"] == "failed", "suite run on the faulty mode fails")
        check(done[sj_ok]["state"] == "passed", "suite run on emu passes")
        rc = s.cases(sj_bad)[0]
        check(rc["verdict"] == "failed" and rc.get("kind") == "fused" and
              rc.get("op") == "matmul" and rc.get("dtype") == "fp32" and
              rc.get("failure_class") == rc.get("stored_class") == c1["failure_class"] and
              rc.get("same_signature") is True and rc.get("bit_identical") is True and
              rc.get("max_ulp", 0) > 0,
              "fused replay: same signature, every node bit-identical (%s)" % json.dumps(rc))
        ok = s.cases(sj_ok)[0]
        check(ok["verdict"] == "passed" and ok.get("stored_class") == c1["failure_class"]
              and "failure_class" not in ok, "fused replay on emu passes")
        st, one = s.api("GET", "/api/v1/suite/%d" % sc["id"], scope="read")
        hist = [(h["build_name"], h["verdict"]) for h in one["suite_case"]["history"]]
        check(hist == [("f2", "failed"), ("f3", "passed")], "history by build: %s" % hist)

        st, body = s.api("POST", "/api/v1/jobs", {"kind": "suite", "device": "emu",
                                                  "filter": {"kind": "op"}}, scope="submit")
        check(st == 400, "a suite job filtered to kind op (none promoted) is refused")

        # Build compare covers fused cases: the same attention job passes on emu
        # (build f0) and fails on the faulty mode (f1); matched by graph name and
        # hash, dtype and input class, with the output's max ULP on both sides.
        j0 = submit(s, att, "emu", "f0")
        check(s.wait_jobs([j0], 60)[j0]["state"] == "passed", "attention passes on emu (f0)")
        st, cmp = s.api("GET", "/api/v1/compare?base=f0&head=f1&kind=fused", scope="read")
        nf = cmp.get("newly_failing", []) if st == 200 else []
        check(len(nf) == 1 and nf[0]["match"]["kind"] == "fused"
              and nf[0]["match"]["graph"] == att.get("name")
              and nf[0]["match"]["graph_hash"] == c1.get("graph_hash")
              and nf[0]["base"]["verdict"] == "passed" and nf[0]["head"]["verdict"] == "failed",
              "compare f0 -> f1: the fused case newly fails (%s)" % json.dumps(nf)[:400])
        p = s.ctl("compare", "f0", "f1", "--kind", "fused", token_scope="read")
        check(p.returncode == 1 and "fused " + str(att.get("name")) in p.stdout,
              "numvalctl compare --kind fused names the graph, exits 1: %s" % p.stdout[-300:])

        # numvalctl repro: the case's artifact downloaded and re-run by numval-worker.
        p = s.ctl("repro", str(c1["id"]), "--json", "--runs", "2", "--worker", bins["worker"],
                  token_scope="read")
        out = json.loads(p.stdout) if p.stdout.strip() else {}
        check(p.returncode == 1 and out.get("kind") == "fused" and out.get("still_fails") and
              out.get("bit_identical") == 2 and out["signature"]["id"] == sig["id"],
              "numvalctl repro: still fails, bit for bit 2/2 (%s)" % p.stderr.strip()[-300:])
        p = s.ctl("repro", str(c1["id"]), "--minimized", "--runs", "1", "--backend", "emu",
                  "--worker", bins["worker"], token_scope="read")
        check(p.returncode == 0, "numvalctl repro --minimized --backend emu: passes (rc %d)"
              % p.returncode)


if __name__ == "__main__":
    main(test)
