#!/usr/bin/env python3
"""Model jobs with checkpoint weights through numvald and an agent worker
(docs/MODEL.md "Checkpoints"): numvald refuses a bad "weights" field at
submit naming its JSON pointer (it never opens the file: the path is the
worker host's); a job whose checkpoint the worker exported first runs and is
stored as passed; a job naming a truncated checkpoint is stored as an error
whose message names the file and the tensor."""
import copy
import json
import os
import subprocess

from nvservice import Service, check, main


def test(bins):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "suites", "model.json")) as f:
        mlp = [j for j in json.load(f)["jobs"] if j["name"] == "mlp-classifier"][0]
    mlp = dict(copy.deepcopy(mlp), dtypes=["fp32"], samples=1, seed=7)
    worker = bins["worker"]
    with Service(bins, lease_ms=3000, devices={"emu-w": "emu"}) as s:
        s.start_daemon()
        d = s.tmp
        spec = os.path.join(d, "mlp.json")
        with open(spec, "w") as f:
            json.dump(mlp, f)
        ck = os.path.join(d, "mlp.safetensors")
        p = subprocess.run([worker, "export-weights", spec, "-o", ck], capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0, "export-weights wrote the checkpoint (%s)" % p.stderr.strip())
        sha = json.loads(p.stdout)["sha256"] if p.returncode == 0 else ""
        with open(ck, "rb") as f:
            data = f.read()
        cut = os.path.join(d, "cut.safetensors")
        with open(cut, "wb") as f:
            f.write(data[:-64])
        jobs = {
            "good.json": dict(mlp, weights={"safetensors": ck, "sha256": sha}),
            "cut.json": dict(mlp, weights={"safetensors": cut}),
            "badfield.json": dict(mlp, weights={"safetensors": ck, "sha256": "xyz"}),
        }
        for name, job in jobs.items():
            with open(os.path.join(d, name), "w") as f:
                json.dump(job, f)

        p = s.ctl("submit", "badfield.json", "--wait")
        check(p.returncode == 2 and "/weights/sha256" in p.stderr,
              "a bad weights field is refused at submit naming it (%s)" % p.stderr.strip()[-200:])

        p = s.ctl("submit", "good.json", "--device", "emu-w", "--wait", "--timeout", "240")
        check(p.returncode == 0, "the MLP from its exported checkpoint: numvalctl exits 0 "
              "(got %d: %s)" % (p.returncode, p.stderr[-500:]))
        job = s.job(p.stdout.strip())
        check(job["state"] == "passed", "stored as passed (%s)" % job["state"])

        p = s.ctl("submit", "cut.json", "--device", "emu-w", "--wait", "--timeout", "240")
        job_id = p.stdout.strip()
        job = s.job(job_id) if job_id else {}
        text = json.dumps(job)
        check(p.returncode == 2 and job.get("state") == "error" and cut in text and
              "tensor '" in text and "truncated" in text,
              "a truncated checkpoint: stored as error naming the file and the tensor "
              "(rc %d, %s)" % (p.returncode, text[-600:]))


if __name__ == "__main__":
    main(test)
