#!/usr/bin/env python3
"""Reads across builds, against a real numvald with a supervised emu worker:

- Build compare shows tolerances: a case that passed build 1.0 under the stored
  exp/fp32 tolerance v1 (<= 1 ULP) and fails build 1.1 after v2 (<= 0.25 ULP)
  with the same error has each side's tolerance in GET /api/v1/compare, and
  numvalctl compare says "tolerance changed". A missing build is named alone.
- GET /api/v1/history: one point per build that ran the test, oldest first,
  from the worst matching case, with the build's identity and the case's
  tolerance; filters (shape, input, device), the limit of builds, and 400s
  naming the missing or bad parameter. numvalctl history prints a line per build.
- GET /api/v1/builds lists builds newest first.
- GET /api/v1/flaky: the cases whose agent gate found them flaky, with their
  rates (uploaded here by a worker speaking the API, as an agent does);
  numvalctl flaky lists them."""
import json
import os

from nvservice import Service, check, main

EXP = {"kind": "op", "op": "exp", "dtypes": ["fp32"], "shapes": [[64], [4, 8]],
       "inputs": ["normal"], "seed": 3}
V1 = {"op": "exp", "dtype": "fp32",
      "tolerance": {"metric": "ulp", "max_ulp": 1, "reason_code": "approximation_error",
                    "reason": "history test: exp documented to 1 ulp"}}
V2 = {"op": "exp", "dtype": "fp32",
      "tolerance": {"metric": "ulp", "max_ulp": 0.25, "reason_code": "approximation_error",
                    "reason": "history test: demand a quarter ulp"}}


def submit_wait(s, build):
    p = s.ctl("submit", "exp.json", "--wait", "--build-name", "kernels", "--build-version",
              build, "--timeout", "120")
    check(p.returncode in (0, 1), "build %s: job ran (%d: %s)" % (build, p.returncode,
                                                                  p.stderr[-300:]))
    return p.stdout.split()[0], p.returncode


def history(s, query, want_status=200):
    st, body = s.api("GET", "/api/v1/history?" + query, scope="read")
    check(st == want_status, "GET /api/v1/history?%s answers %d (%s)" % (query, want_status,
                                                                        st))
    return body


def flaky_upload(s):
    """A job for device 'fake', claimed and answered over the worker API with one
    passed case and one failed case the gate found flaky (2 of 5 runs failed)."""
    st, body = s.api("POST", "/api/v1/jobs", dict(EXP, device="fake"), scope="submit")
    check(st == 201, "job for the fake device queued")
    job_id = body["job"]["id"]
    st, claim = s.api("POST", "/api/v1/worker/claim", {"device": "fake", "wait_ms": 2000},
                      scope="worker")
    check(st == 200 and claim["job"]["id"] == job_id, "claimed by the fake worker")
    base = {"op": "exp", "dtype": "fp32", "out_dtype": "fp32", "layout": "contiguous",
            "input": "normal", "seed": 3}
    cases = [dict(base, index=0, shape=[64], verdict="passed", max_ulp=0.4),
             dict(base, index=1, shape=[4, 8], verdict="failed", max_ulp=3.0, mismatches=1,
                  failure_class="ulp_exceeded", flaky=True,
                  repro_rate={"runs": 5, "failed": 2, "bit_identical": 3},
                  signature={"id": "ab" * 32, "kind": "op", "op": "exp"})]
    result = {"verdict": "failed", "kind": "op", "op": "exp",
              "summary": {"cases": 2, "passed": 1, "failed": 1, "errors": 0}, "cases": cases}
    st, body = s.api("POST", "/api/v1/worker/result",
                     {"job_id": job_id, "lease_token": claim["job"]["lease_token"],
                      "result": result}, scope="worker")
    check(st == 200 and body["job"]["state"] == "failed", "result stored (%s)" % st)
    return job_id


def test(bins):
    with Service(bins, devices={"emu0": "emu"}) as s:
        s.start_daemon()
        with open(os.path.join(s.tmp, "exp.json"), "w") as f:
            json.dump(EXP, f)
        st, _ = s.api("POST", "/api/v1/tolerances", V1)
        check(st == 201, "stored tolerance exp/fp32 v1: <= 1 ULP")
        j10, rc = submit_wait(s, "1.0")
        check(rc == 0, "build 1.0 passes under v1")
        st, _ = s.api("POST", "/api/v1/tolerances", V2)
        check(st == 201, "stored tolerance exp/fp32 v2: <= 0.25 ULP")
        j11, rc = submit_wait(s, "1.1")
        check(rc == 1, "build 1.1 fails under v2 (same emu, same errors)")

        # Compare: each side's tolerance; the CLI says it changed.
        st, cmp = s.api("GET", "/api/v1/compare?base=1.0&head=1.1", scope="read")
        nf = cmp.get("newly_failing", [])
        check(st == 200 and len(nf) == 2, "compare: 2 newly failing cases (%s)" % st)
        e = nf[0]
        bt, ht = e["base"].get("tolerance") or {}, e["head"].get("tolerance") or {}
        check(bt.get("version") == 1 and bt.get("max_ulp") == 1 and bt.get("metric") == "ulp"
              and bt.get("reason_code") == "approximation_error" and bt.get("reason"),
              "base side carries its case's tolerance v1 with its reason: %s" % bt)
        check(ht.get("version") == 2 and ht.get("max_ulp") == 0.25,
              "head side carries v2: %s" % ht)
        check(e["base"]["max_ulp"] == e["head"]["max_ulp"],
              "same max_ulp on both sides (%s): the tolerance explains the verdict"
              % e["base"]["max_ulp"])
        p = s.ctl("compare", "1.0", "1.1", token_scope="read")
        check(p.returncode == 1 and
              "tolerance changed: \u2264 1 ULP (v1) -> \u2264 0.25 ULP (v2)" in p.stdout,
              "numvalctl compare prints the tolerance change: %r" % p.stdout[-400:])
        p = s.ctl("compare", "1.0", "nosuch", token_scope="read")
        check(p.returncode == 2 and "no build 'nosuch'" in p.stderr and "'1.0'" not in p.stderr,
              "compare 1.0 nosuch names only the missing build: %r" % p.stderr)
        p = s.ctl("compare", "nosuch", "1.1", token_scope="read")
        check(p.returncode == 2 and "no build 'nosuch'" in p.stderr and "'1.1'" not in p.stderr,
              "compare nosuch 1.1 names only the missing build: %r" % p.stderr)

        # Builds newest first.
        st, body = s.api("GET", "/api/v1/builds", scope="read")
        vers = [b["identity"].get("version") for b in body["builds"]]
        check(vers == ["1.1", "1.0"], "GET /api/v1/builds: newest first (%s)" % vers)

        # History: oldest first, worst case per build, tolerance and identity.
        h = history(s, "op=exp&dtype=fp32")
        pts = h["points"]
        check(h["key"] == {"op": "exp", "dtype": "fp32"}, "key: the parameters given (%s)"
              % h["key"])
        check([p["identity"]["version"] for p in pts] == ["1.0", "1.1"] and
              [p["verdict"] for p in pts] == ["passed", "failed"],
              "two points, oldest first: 1.0 passed, 1.1 failed (%s)" %
              [(p["identity"].get("version"), p["verdict"]) for p in pts])
        cases10 = s.cases(j10)
        worst = max(cases10, key=lambda c: c["max_ulp"])
        p0 = pts[0]
        check(p0["cases"] == 2 and p0["failed"] == 0 and p0["case_id"] == worst["id"] and
              p0["job_id"] == int(j10) and p0["max_ulp"] == worst["max_ulp"] and
              p0["build_id"] == worst["build_id"] and p0["identity"]["name"] == "kernels",
              "point 1.0: 2 cases, the worst (case %s, max_ulp %s) decides" %
              (p0["case_id"], p0["max_ulp"]))
        check(p0["tolerance"]["version"] == 1 and pts[1]["tolerance"]["version"] == 2 and
              pts[1]["failed"] == 2, "points carry the tolerance of their case (v1, v2)")
        check("headroom" in p0 and p0["headroom"] is not None, "and the headroom")
        h = history(s, "op=exp&dtype=fp32&limit=1")
        check([p["identity"]["version"] for p in h["points"]] == ["1.1"],
              "limit=1: the newest build only")
        h = history(s, "op=exp&dtype=fp32&shape=%5B4%2C%208%5D&input=normal&device=emu0")
        check(len(h["points"]) == 2 and all(p["cases"] == 1 for p in h["points"]) and
              h["key"] == {"op": "exp", "dtype": "fp32", "shape": [4, 8], "input": "normal",
                           "device": "emu0"},
              "shape [4, 8], input and device filters: one case per build (%s)" % h["key"])
        for q in ("op=exp&dtype=fp32&input=uniform", "op=exp&dtype=bf16",
                  "op=exp&dtype=fp32&device=other", "op=exp&dtype=fp32&kind=gradient"):
            check(history(s, q)["points"] == [], "no matching case: no points (%s)" % q)
        for q, field in (("dtype=fp32", "op"), ("op=exp", "dtype"),
                         ("op=exp&dtype=fp32&limit=201", "limit"),
                         ("op=exp&dtype=fp32&limit=0", "limit"),
                         ("op=exp&dtype=fp32&kind=graph", "kind"),
                         ("op=exp&dtype=fp32&shape=64", "shape")):
            body = history(s, q, 400)
            check(body["error"]["field"] == field, "%s: 400 naming '%s' (%s)" %
                  (q, field, body["error"]["message"]))
        check(history(s, "op=exp&dtype=fp32&limit=200")["points"], "limit=200 is allowed")
        p = s.ctl("history", "--op", "exp", "--dtype", "fp32", token_scope="read")
        lines = p.stdout.splitlines()
        check(p.returncode == 0 and len(lines) == 3 and lines[0].split()[:2] == ["BUILD",
                                                                                 "VERDICT"] and
              lines[1].startswith("kernels 1.0") and "passed" in lines[1] and
              "\u2264 1 ULP (v1)" in lines[1] and lines[2].startswith("kernels 1.1") and
              "failed" in lines[2] and "\u2264 0.25 ULP (v2)" in lines[2],
              "numvalctl history: one line per build with verdict and tolerance:\n%s" % p.stdout)
        p = s.ctl("--json", "history", "--op", "exp", "--dtype", "fp32", "--input", "normal",
                  "--limit", "1", token_scope="read")
        check(p.returncode == 0 and len(json.loads(p.stdout)["points"]) == 1,
              "numvalctl --json history --limit 1")

        # Flaky cases.
        st, body = s.api("GET", "/api/v1/flaky", scope="read")
        check(st == 200 and body == {"flaky": []}, "no flaky case yet: %s" % body)
        fj = flaky_upload(s)
        st, body = s.api("GET", "/api/v1/flaky", scope="read")
        fl = body["flaky"]
        fcase = [c for c in s.cases(fj) if c["index"] == 1][0]
        check(len(fl) == 1, "one flaky case listed (%d)" % len(fl))
        f0 = fl[0]
        check(f0["case_id"] == fcase["id"] and f0["job_id"] == fj and f0["op"] == "exp" and
              f0["dtype"] == "fp32" and f0["shape"] == [4, 8] and f0["input"] == "normal" and
              f0["layout"] == "contiguous" and f0["device"] == "fake" and
              f0["signature"] == "ab" * 32 and
              f0["repro_rate"] == {"runs": 5, "failed": 2, "bit_identical": 3} and
              abs(f0["rate"] - 0.4) < 1e-12 and f0["created_at"].endswith("Z"),
              "flaky entry: case, job, test, device, signature, repro rate, rate 2/5: %s" % f0)
        st, body = s.api("GET", "/api/v1/flaky?limit=1001", scope="read")
        check(st == 400 and body["error"]["field"] == "limit", "flaky limit 1001: 400")
        st, body = s.api("GET", "/api/v1/flaky?limit=1000", scope="read")
        check(st == 200 and len(body["flaky"]) == 1, "flaky limit 1000 allowed")
        p = s.ctl("flaky", token_scope="read")
        rows = [l.split() for l in p.stdout.splitlines()]
        check(p.returncode == 0 and len(rows) == 2 and rows[0][0] == "CASE" and
              rows[1][0] == str(fcase["id"]) and "2/5" in rows[1] and "0.4" in rows[1],
              "numvalctl flaky lists it with its rate:\n%s" % p.stdout)


if __name__ == "__main__":
    main(test)
