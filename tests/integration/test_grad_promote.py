#!/usr/bin/env python3
"""Gradient failures through the service (gradient kind), with real
processes.

The badgrad test plugin's sigmoid backward uses x where the saved output y
belongs. Through numvald and a worker in agent mode:
- a gradient job on it fails the device check; the agent gates the failure
  (5/5 runs fail the same way, gradients bit-identical), minimizes it and
  uploads the reproducer; the case carries the gradient signature (its id
  recomputed here as the SHA-256 of the canonical JSON, docs/ARTIFACTS.md
  "Gradient reproducers") and the minimized element count: at most 2 (x = 0
  and one cotangent element: at x = 0 the plugin's gy x (1 - x) is 0 where the
  reference gy s(0) (1 - s(0)) is gy / 4);
- numvald promotes it once; a second failing job (another seed, another build)
  records an occurrence, no second suite case;
- a suite job replays it: it fails on the plugin with the stored signature and
  bit-identical gradients, and passes on emu;
- `numvalctl repro CASE_ID` reproduces it from its artifact.

usage: test_grad_promote.py NUMVALD NUMVAL-WORKER NUMVALCTL BADGRAD_PLUGIN_SO"""
import hashlib
import json
import sys
import urllib.request

from nvartifact import MAGIC, parse, signature_id, unzstd
from nvservice import Service, check, main

PLUGIN = sys.argv.pop(4) if len(sys.argv) > 4 else ""
SIGMOID = {"kind": "gradient", "op": "sigmoid", "dtypes": ["fp32"], "shapes": [[4, 32]],
           "seed": 1}


def manifest(blob):
    """The manifest of a container (nvartifact.py)."""
    raw = unzstd(blob=blob, timeout=60)
    check(raw[:8] == MAGIC, "artifact magic NVARTF01")
    return parse(raw)[0]


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
    with Service(bins, lease_ms=4000) as s:
        s.start_daemon()
        s.start_worker("badgrad", "plugin:" + PLUGIN)
        s.start_worker("emu", "emu")

        j1 = submit(s, SIGMOID, "badgrad", "g1")
        check(s.wait_jobs([j1], 90)[j1]["state"] == "failed", "sigmoid gradient job fails")
        c1 = failed_case(s, j1)
        check(c1.get("failure_class") == "gradient_mismatch" and len(c1.get("artifact", "")) == 64,
              "case: gradient_mismatch with its artifact")
        check(c1.get("repro_rate") == {"runs": 5, "failed": 5, "bit_identical": 5},
              "gate: 5/5 runs fail, gradients bit-identical (%s)" % c1.get("repro_rate"))
        check(c1.get("flaky") is False and len(c1.get("minimized_artifact", "")) == 64,
              "case carries its minimized artifact (%s)" % sorted(c1))
        sig = c1["signature"]
        check(sig["kind"] == "gradient" and sig["op"] == "sigmoid" and sig["dtype"] == "fp32"
              and sig["check"] == "device" and sig["failure_class"] == "gradient_mismatch"
              and sig["id"] == signature_id(sig),
              "gradient signature (sigmoid fp32, device, gradient_mismatch), id = sha256 of its "
              "canonical JSON")
        me = c1.get("minimized_elements") or {}
        check(me.get("total", 99) <= 2 and me.get("non_neutral", 99) <= 1,
              "minimized to %s elements (<= 2), %s non-neutral" % (me.get("total"),
                                                                   me.get("non_neutral")))
        man = manifest(artifact(s, c1["minimized_artifact"]))
        check(man.get("minimized_from") == c1["artifact"] and
              man.get("signature", {}).get("id") == sig["id"] and str(man.get("job_id")) == str(j1)
              and man.get("check") == "device",
              "the minimized artifact names the original, the signature and the job")

        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(st == 200 and len(suite["suite"]) == 1, "promoted: one suite case")
        sc = suite["suite"][0]
        check(sc["op"] == "sigmoid" and sc["dtype"] == "fp32" and sc["signature"] == sig["id"]
              and sc["artifact"] == c1["minimized_artifact"] and sc["occurrences"] == 1
              and sc["origin_job"] == int(j1), "suite case: sigmoid fp32, signature, origin job")

        j2 = submit(s, dict(SIGMOID, seed=2), "badgrad", "g2")
        check(s.wait_jobs([j2], 90)[j2]["state"] == "failed", "second job fails too")
        c2 = failed_case(s, j2)
        check(c2.get("signature", {}).get("id") == sig["id"], "second failure: same signature")
        st, suite = s.api("GET", "/api/v1/suite", scope="read")
        check(len(suite["suite"]) == 1 and suite["suite"][0]["occurrences"] == 2,
              "same fault, second job: no second suite case, occurrences 2")

        sj_bad = submit(s, {"kind": "suite"}, "badgrad", "g2")
        done = s.wait_jobs([sj_bad], 60)
        sj_ok = submit(s, {"kind": "suite"}, "emu", "g3")
        done.update(s.wait_jobs([sj_ok], 60))
        check(done[sj_bad]["state"] == "failed", "suite run on the plugin fails")
        check(done[sj_ok]["state"] == "passed", "suite run on emu passes")
        rc = s.cases(sj_bad)[0]
        check(rc["verdict"] == "failed" and rc.get("kind") == "gradient"
              and rc.get("failure_class") == rc.get("stored_class") == "gradient_mismatch"
              and rc.get("same_signature") is True and rc.get("bit_identical") is True,
              "gradient replay: same signature, gradients bit-identical (%s)" % json.dumps(rc))
        ok = s.cases(sj_ok)[0]
        check(ok["verdict"] == "passed" and "failure_class" not in ok, "replay on emu passes")

        # Build compare covers gradient cases: the same sigmoid job passes on emu
        # (build g0) and fails on the plugin (g1); matched by op, dtype, shape,
        # input, attrs and check mode, judged on the device check's headroom.
        j0 = submit(s, SIGMOID, "emu", "g0")
        check(s.wait_jobs([j0], 90)[j0]["state"] == "passed", "sigmoid on emu passes (g0)")
        st, cmp = s.api("GET", "/api/v1/compare?base=g0&head=g1&kind=gradient", scope="read")
        nf = cmp.get("newly_failing", []) if st == 200 else []
        check(len(nf) == 1 and nf[0]["match"]["kind"] == "gradient"
              and nf[0]["match"]["op"] == "sigmoid" and nf[0]["match"]["mode"] == "full"
              and nf[0]["base"]["headroom"] <= 1 < nf[0]["head"]["headroom"]
              and cmp["counts"]["newly_failing"] == 1,
              "compare g0 -> g1: the gradient case newly fails, headroom %s -> %s"
              % ([e["base"].get("headroom") for e in nf], [e["head"].get("headroom") for e in nf]))
        st, cmp = s.api("GET", "/api/v1/compare?base=g0&head=g1&kind=op", scope="read")
        check(st == 200 and cmp["counts"]["matched"] == 0, "?kind=op leaves the gradient cases out")
        st, err = s.api("GET", "/api/v1/compare?base=g0&head=g1&kind=graph", scope="read")
        check(st == 400 and "'graph'" in err["error"]["message"], "an unknown kind is refused")

        p = s.ctl("repro", str(c1["id"]), "--json", "--runs", "2", "--worker", bins["worker"],
                  token_scope="read")
        out = json.loads(p.stdout) if p.stdout.strip() else {}
        check(p.returncode == 1 and out.get("kind") == "gradient" and out.get("still_fails")
              and out.get("bit_identical") == 2 and out["signature"]["id"] == sig["id"],
              "numvalctl repro: still fails, bit for bit 2/2 (%s)" % p.stderr.strip()[-300:])
        p = s.ctl("repro", str(c1["id"]), "--minimized", "--runs", "1", "--backend", "emu",
                  "--worker", bins["worker"], token_scope="read")
        check(p.returncode == 0, "numvalctl repro --minimized --backend emu: passes (rc %d)"
              % p.returncode)


if __name__ == "__main__":
    main(test)
