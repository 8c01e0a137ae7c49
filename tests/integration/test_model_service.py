#!/usr/bin/env python3
"""Model jobs through numvald (docs/JOBS.md "Model jobs"): numvald validates a
model spec with the worker's parser (a bad model is refused at submit with the
model field's JSON pointer), a worker on emu runs the shipped MLP classifier
and the job is stored as passed with one case per dtype; a worker on
emu:storage=fp8_e5m2 fails it, and the stored failed cases carry the failure
class that names the band."""
import copy
import json
import os

from nvservice import Service, check, main


def test(bins):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "suites", "model.json")) as f:
        mlp = [j for j in json.load(f)["jobs"] if j["name"] == "mlp-classifier"][0]
    with Service(bins, lease_ms=3000, devices={"emu-sup": "emu"}) as s:
        s.start_daemon()
        s.start_worker("emu-fp8", "emu:storage=fp8_e5m2")
        d = s.tmp
        bad = copy.deepcopy(mlp)
        bad["model"]["layers"][1]["block"] = "nope"
        for name, job in (("mlp.json", mlp), ("bad.json", bad)):
            with open(os.path.join(d, name), "w") as f:
                json.dump(job, f)

        p = s.ctl("submit", "bad.json", "--wait")
        check(p.returncode == 2 and "/model/layers/1/block" in p.stderr,
              "a bad model is refused at submit naming the field (%s)" % p.stderr.strip()[-200:])

        p = s.ctl("submit", "mlp.json", "--device", "emu-sup", "--wait", "--timeout", "240")
        check(p.returncode == 0, "the MLP on emu: numvalctl exits 0 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job = s.job(p.stdout.strip())
        check(job["state"] == "passed" and job["cases_total"] == len(mlp["dtypes"]),
              "stored as passed with one case per dtype (%s, %s)" %
              (job["state"], job["cases_total"]))

        p = s.ctl("submit", "mlp.json", "--device", "emu-fp8", "--wait", "--timeout", "240")
        check(p.returncode == 1, "the MLP with fp8 e5m2 storage: numvalctl exits 1 (got %d: %s)"
              % (p.returncode, p.stderr[-500:]))
        job_id = p.stdout.strip()
        stored = s.cases(job_id)
        check(s.job(job_id)["state"] == "failed" and len(stored) == len(mlp["dtypes"]) and
              all(c["verdict"] == "failed" and c.get("failure_class") == "out_of_band"
                  for c in stored),
              "stored as failed, every case out_of_band (%s)" %
              [(c["verdict"], c.get("failure_class")) for c in stored])


if __name__ == "__main__":
    main(test)
