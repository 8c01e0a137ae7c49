#!/usr/bin/env python3
"""What CI and people read from numvalctl, against a real numvald with a
supervised emu worker and an agent on emu-fast (exp off by up to ~3 ULP):

- JUnit of every kind: an op case each; a gradient case's checks; a fused case's
  outputs and first divergent node; a long run's acceptance rules (the failing
  ones with the rule's reason); every test case has a time; suite names are
  numval.KIND.NAME and the same in a second run of the same file.
- submit --wait prints why a job failed (a long run's acceptance reason) and
  ends with a pytest-style summary line.
- show prints a long-run result readably: no base64, nested keys indented;
  --json is the raw JSON.
- cases --csv: RFC 4180 with the table's header.
- submit --rerun-failed: the failed cases' dtypes (and other axes) only; a job
  without a failed case is refused; a long run is rerun whole.
- --help names every command and option; repro prints text (JSON with --json)
  and never a temporary file that is gone; suite show prints text."""
import csv
import io
import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET

from nvservice import Service, check, main

OP = {"kind": "op", "op": "exp", "dtypes": ["fp32", "bf16"], "shapes": [[64], [4, 8]],
      "inputs": ["normal", "uniform"], "seed": 3, "device": "emu-fast"}
GRAD = {"kind": "gradient", "op": "mul", "dtypes": ["fp32"], "shapes": [[16]],
        "inputs": ["normal"], "seed": 105, "order": 2, "device": "emu0"}
FUSED = {"kind": "fused", "name": "mlp_epilogue",
         "graph": {"inputs": [{"name": "x", "shape": [8, 16]}, {"name": "w", "shape": [16, 8]},
                              {"name": "bias", "shape": [8, 8]}],
                   "nodes": [{"name": "mm", "op": "matmul", "inputs": ["x", "w"]},
                             {"name": "pre", "op": "add", "inputs": ["mm", "bias"]},
                             {"name": "y", "op": "gelu", "inputs": ["pre"]}],
                   "outputs": ["y"]},
         "dtypes": ["bf16"], "inputs": ["normal"], "seed": 1, "device": "emu0"}
# fp16 without gradient scaling and a tiny loss weight: gradients underflow.
LONGRUN = {"kind": "longrun", "name": "mlp-fp16-unscaled", "model": "mlp",
           "sizes": {"in": 8, "hidden": 16, "classes": 4},
           "data": {"seed": 7, "eval_examples": 128}, "steps": 60, "batch": 16, "n_seeds": 3,
           "seed": 1, "log_every": 2, "optimizer": {"name": "adamw", "lr": 0.01, "eps": 1e-16},
           "amp": {"dtype": "fp16"}, "loss_weight": 2.0 ** -20, "device": "emu0"}
SUMMARY = re.compile(r"^== 4 jobs: (\d+) passed, (\d+) failed, (\d+) errors in [0-9.]+s ==$")


def junit(path):
    root = ET.parse(path).getroot()
    return {ts.get("name"): ts for ts in root.findall("testsuite")}, root


def names(ts):
    return [tc.get("name") for tc in ts.findall("testcase")]


def kinds_checks(s):
    with open(os.path.join(s.tmp, "kinds.json"), "w") as f:
        json.dump({"name": "kinds", "jobs": [OP, GRAD, FUSED, LONGRUN]}, f)
    p = s.ctl("submit", "kinds.json", "--wait", "--junit", "a.xml", "--timeout", "240",
              timeout=300)
    ids = p.stdout.split()
    check(p.returncode == 1 and len(ids) == 4, "4 jobs, some failed: exit 1 (%d: %s)" %
          (p.returncode, p.stderr[-500:]))
    err = p.stderr.strip().splitlines()
    check(SUMMARY.match(err[-1]) is not None, "ends with the summary line: %r" % err[-1])
    m = SUMMARY.match(err[-1])
    check(m and m.groups() == ("6", "5", "0"),
          "8 op cases (4 failed), a gradient and a fused case passed, the long run failed: %r"
          % ((m.groups() if m else None),))
    lr = s.job(ids[3])
    reason = lr["result"]["acceptance"]["reason"]
    check(any(("numval.longrun.mlp-fp16-unscaled: failed: " + reason) in l for l in err),
          "the long run's line gives its acceptance reason: %r" % [l for l in err if
                                                                   "longrun" in l])
    suites, root = junit(os.path.join(s.tmp, "a.xml"))
    check(sorted(suites) == ["numval.fused.mlp_epilogue", "numval.gradient.mul",
                             "numval.longrun.mlp-fp16-unscaled", "numval.op.exp"],
          "suite names numval.KIND.NAME, no job id: %s" % sorted(suites))
    op = suites["numval.op.exp"]
    check(op.get("tests") == "8" and op.get("failures") == "4" and
          "exp/fp32/4x8/uniform/contiguous" in names(op), "op: a test case per case")
    g = suites["numval.gradient.mul"]
    check(names(g) == ["mul/fp32/16/normal/formula", "mul/fp32/16/normal/device",
                       "mul/fp32/16/normal/second_order", "mul/fp32/16/normal/double_backward"],
          "gradient: one per check (emu offers the double backward): %s" % names(g))
    fu = suites["numval.fused.mlp_epilogue"]
    check(names(fu) == ["fused/bf16/normal/output y", "fused/bf16/normal/first divergent node"],
          "fused: the output and the first divergent node: %s" % names(fu))
    ts = suites["numval.longrun.mlp-fp16-unscaled"]
    acc = lr["result"]["acceptance"]
    check(names(ts) == ["final_loss.welch", "final_loss.trimmed_mean", "envelope",
                        "matched_weights.gradient", "matched_weights.eval_loss", "determinism"],
          "long run: one per acceptance rule: %s" % names(ts))
    want_failed = [n for n, ok in (("final_loss.welch", acc["final_loss"]["welch"]["passed"]),
                                   ("final_loss.trimmed_mean",
                                    acc["final_loss"]["trimmed_mean"]["passed"]),
                                   ("envelope", acc["envelope"]["passed"])) if not ok]
    got_failed = [tc.get("name") for tc in ts.findall("testcase")
                  if tc.find("failure") is not None]
    check(want_failed and got_failed == want_failed and ts.get("failures") == str(len(want_failed)),
          "the failed rules fail: %s" % got_failed)
    for tc in ts.findall("testcase"):
        f = tc.find("failure")
        if f is not None:
            check(f.get("type") == acc["failure_class"] and f.get("message") and
                  reason in (f.text or ""),
                  "%s: <failure type=%s message=%r> with the acceptance reason" %
                  (tc.get("name"), f.get("type"), f.get("message")))
    all_tc = root.findall(".//testcase")
    check(all(re.match(r"^\d+\.\d{3}$", tc.get("time") or "") for tc in all_tc) and
          all(ts.get("time") for ts in root.findall("testsuite")),
          "every one of %d test cases has time=" % len(all_tc))
    check(float(fu.findall("testcase")[0].get("time")) < 1,
          "the fused case's own timing is used (%s s)" % fu.findall("testcase")[0].get("time"))
    prop = {p.get("name"): p.get("value") for p in op.iter("property")}
    check(prop.get("job.id") == ids[0], "the job id stays a property")

    # A second run of the same file: the same suite and test case names. --quiet
    # (the demo's): each job once, then the summary line, nothing else.
    p = s.ctl("submit", "kinds.json", "--wait", "--quiet", "--junit", "b.xml", "--timeout", "240",
              timeout=300)
    err = p.stderr.strip().splitlines()
    check(len(err) == 5 and all(l.startswith("numvalctl: job ") for l in err[:4]) and
          len({l.split()[2] for l in err[:4]}) == 4 and SUMMARY.match(err[4]),
          "--wait --quiet: one line per job and the summary: %r" % err)
    again, _ = junit(os.path.join(s.tmp, "b.xml"))
    check(sorted(again) == sorted(suites) and
          all(names(again[k]) == names(suites[k]) for k in suites),
          "a second run has the same suite and test case names")
    return ids


def show_checks(s, ids):
    lr = ids[3]
    p = s.ctl("show", lr, token_scope="read")
    lines = p.stdout.splitlines()
    series = s.job(lr)["result"]["series"]
    blob = "<%d bytes zstd, GET /api/v1/jobs/%s for the data>" % (series["compressed_bytes"], lr)
    check(p.returncode == 0 and max(len(l) for l in lines) < 300,
          "show: no line longer than 300 characters (longest %d)" % max(len(l) for l in lines))
    check(any(l.strip().startswith("data ") and l.strip().endswith(blob) for l in lines),
          "series.data named by its size and where to get it: %s" % blob)
    check(series["data"][:40] not in p.stdout, "no base64 in the text")
    check("result:" in lines and any(l.startswith("  acceptance:") for l in lines) and
          any(l.startswith("    verdict") for l in lines),
          "nested objects indented (result: / acceptance: / verdict)")
    p = s.ctl("show", lr, "--json", token_scope="read")
    check(p.returncode == 0 and json.loads(p.stdout)["job"]["result"]["series"]["data"] ==
          series["data"], "show --json is the raw JSON, series data included")


def csv_checks(s, ids):
    p = s.ctl("cases", ids[0], "--csv", token_scope="read")
    rows = list(csv.reader(io.StringIO(p.stdout, newline="")))
    table = s.ctl("cases", ids[0], token_scope="read").stdout.splitlines()[0].split()
    check(p.returncode == 0 and rows[0] == table, "CSV header = the table's columns: %s"
          % rows[0])
    cases = s.cases(ids[0])
    check(len(rows) == 1 + len(cases) and [r[0] for r in rows[1:]] ==
          [str(c["id"]) for c in cases], "a row per case, by id")
    c = cases[2]
    r = rows[3]
    col = dict(zip(rows[0], r))
    check(col["SHAPE"] == "[4,8]" and '"[4,8]"' in p.stdout.splitlines()[3] and
          float(col["MAX_ULP"]) == c["max_ulp"],
          "a field with a comma is quoted, numbers keep every digit: %s" % r)
    raw = subprocess.run([s.bins["ctl"], "--server", s.url, "cases", ids[0], "--csv"],
                         capture_output=True, timeout=60).stdout
    check(raw.count(b"\r\n") == len(rows) and raw.endswith(b"\r\n"),
          "records end with CRLF (RFC 4180)")


def rerun_checks(s, ids):
    p = s.ctl("submit", "--rerun-failed", ids[0], "--wait", "--timeout", "120")
    new = p.stdout.split()
    check(p.returncode == 1 and len(new) == 1, "rerun of the op job: one job, it fails (%d: %s)"
          % (p.returncode, p.stderr[-300:]))
    job = s.job(new[0])
    old = s.job(ids[0])
    failed = [c for c in s.cases(ids[0]) if c["verdict"] == "failed"]
    check(job["spec"]["dtypes"] == ["fp32"] and job["spec"]["shapes"] == old["spec"]["shapes"] and
          {c["dtype"] for c in failed} == {"fp32"},
          "its spec keeps the dtypes that failed (%s)" % job["spec"]["dtypes"])
    check(job["cases_total"] == len(failed) and job["cases_failed"] == len(failed),
          "it reruns the %d failed combinations" % len(failed))
    check("rerunning 4 case(s)" in p.stderr, "and says what it reruns: %r" % p.stderr[:300])
    p = s.ctl("submit", "--rerun-failed", ids[1])
    check(p.returncode == 2 and "no failed case" in p.stderr and not p.stdout.strip(),
          "a job with no failed case is refused: %r" % p.stderr.strip())
    p = s.ctl("submit", "--rerun-failed", ids[3])
    new = p.stdout.split()
    check(p.returncode == 0 and len(new) == 1 and "rerun whole" in p.stderr,
          "a long run is rerun whole")
    spec = s.job(new[0])["spec"]
    check(spec == s.job(ids[3])["spec"], "with the same spec")
    s.ctl("cancel", new[0])
    p = s.ctl("submit", "kinds.json", "--rerun-failed", ids[0])
    check(p.returncode == 2, "--rerun-failed with a job file is refused")


def help_checks(s):
    p = s.ctl("--help", token_scope="read")
    out = p.stdout
    cmds = ["submit", "jobs", "show", "cancel", "cases", "artifact", "tolerance list",
            "tolerance history", "tolerance set", "builds", "devices", "repro", "compare",
            "history", "flaky", "suite list", "suite show", "suite retire", "schedules"]
    opts = ["--device", "--new-device", "--priority", "--build", "--build-name",
            "--build-version", "--commit", "--wait", "--junit", "--timeout", "--rerun-failed",
            "--state", "--kind", "--limit", "--cursor", "--failed", "--csv", "--tensor",
            "--manifest", "--op", "--dtype", "--mode", "--metric", "--max-ulp", "--atol",
            "--rtol", "--growth", "--u-dtype", "--reason-code", "--reason", "--backend",
            "--minimized", "--runs", "--worker", "--keep", "--shape", "--layout", "--input",
            "--server", "--token", "--json"]
    missing = [c for c in cmds if ("  " + c) not in out] + [o for o in opts if o not in out]
    check(p.returncode == 0 and not missing, "--help names every command and option (missing %s)"
          % missing)
    w = subprocess.run([s.bins["worker"], "--help"], capture_output=True, text=True, timeout=60)
    missing = [o for o in ("--claim-wait-ms", "--max-artifacts", "--minimize-deadline", "--once",
                           "--threads") if o not in w.stdout + w.stderr]
    check(not missing, "numval-worker --help names the agent's options (missing %s)" % missing)


def repro_checks(s, bins, ids):
    c = [c for c in s.cases(ids[0]) if c["verdict"] == "failed"][0]
    p = s.ctl("repro", str(c["id"]), "--runs", "2", "--worker", bins["worker"],
              token_scope="read")
    check(p.returncode == 1 and not p.stdout.lstrip().startswith("{") and
          ("case %d" % c["id"]) in p.stdout and "still_fails" in p.stdout,
          "repro prints text: %r" % p.stdout[:300])
    check("numvalctl-repro" not in p.stdout + p.stderr and c["artifact"][:12] in p.stderr,
          "and names the artifact, not its deleted temporary file: %r" % p.stderr[:300])
    p = s.ctl("repro", str(c["id"]), "--runs", "1", "--json", "--worker", bins["worker"],
              token_scope="read")
    check(p.returncode == 1 and json.loads(p.stdout)["still_fails"], "repro --json: the JSON")
    keep = os.path.join(s.tmp, "kept.nvart")
    p = s.ctl("repro", str(c["id"]), "--runs", "1", "--keep", keep, "--worker", bins["worker"],
              token_scope="read")
    check(p.returncode == 1 and os.path.exists(keep) and keep in p.stdout,
          "repro --keep FILE keeps the artifact and names it")


def suite_show_checks(s):
    st, body = s.api("GET", "/api/v1/suite", scope="read")
    if not body.get("suite"):
        return
    sid = str(body["suite"][0]["id"])
    p = s.ctl("suite", "show", sid, token_scope="read")
    check(p.returncode == 0 and not p.stdout.startswith("{") and
          any(l.startswith("signature ") for l in p.stdout.splitlines()),
          "suite show prints text: %r" % p.stdout[:200])
    p = s.ctl("suite", "show", sid, "--json", token_scope="read")
    check(json.loads(p.stdout)["suite_case"]["id"] == int(sid), "suite show --json: the JSON")


def test(bins):
    with Service(bins, lease_ms=4000, devices={"emu0": "emu"}) as s:
        s.start_daemon()
        s.start_worker("emu-fast", "emu:transcendental=fast", extra=["--minimize-deadline", "20"])
        ids = kinds_checks(s)
        show_checks(s, ids)
        csv_checks(s, ids)
        rerun_checks(s, ids)
        help_checks(s)
        repro_checks(s, bins, ids)
        suite_show_checks(s)


if __name__ == "__main__":
    main(test)
