#!/usr/bin/env python3
"""Contract jobs through the service: numvalctl submit --wait of a contract job
to a real numvald, run by the worker it supervises (emu, truthful: exit 0,
stored as passed) and by a standalone worker on a lying device (plugin_liar.c
computing with FTZ, declaring none: exit 1, stored as failed with the
contract.fp32.ftz mismatch and its evidence); the stored result is valid under
schema/result.schema.json, numvalctl show prints it, and a bad contract spec is
refused at submit time with its JSON pointer (numvald validates with core/spec).

usage: test_contract_service.py NUMVALD NUMVAL-WORKER NUMVALCTL LIAR_SO"""
import json
import os
import sys

import nvschema
from nvservice import Service, check, main

LIAR = sys.argv.pop(4) if len(sys.argv) > 4 else ""
SPEC = {"kind": "contract", "dtypes": ["fp32", "bf16"], "fp32_sweep": 256}


def test(bins):
    whole = nvschema.validator("job_result")
    with Service(bins, lease_ms=3000, devices={"emu-sup": "emu"}) as s:
        s.start_daemon()
        s.start_worker("liar", "plugin:%s?ftz=on|" % LIAR)
        for name, spec in (("c.json", SPEC), ("bad.json", dict(SPEC, dtypes=["int32"]))):
            with open(os.path.join(s.tmp, name), "w") as f:
                json.dump(spec, f)

        p = s.ctl("submit", "c.json", "--device", "emu-sup", "--wait", "--timeout", "240")
        check(p.returncode == 0, "truthful emu: numvalctl exits 0 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job = s.job(p.stdout.strip())
        r = job.get("result") or {}
        check(job["state"] == "passed" and r.get("kind") == "contract" and
              r.get("mismatches") == [] and r["summary"]["cases"] > 0,
              "stored as passed, a contract result with %s judged fields and no mismatch" %
              r.get("summary", {}).get("cases"))
        errs = nvschema.errors(whole, r)
        check(not errs, "the stored passing result is valid (%s)" % errs)

        p = s.ctl("submit", "c.json", "--device", "liar", "--wait", "--timeout", "240")
        check(p.returncode == 1, "lying device: numvalctl exits 1 (got %d: %s)" %
              (p.returncode, p.stderr[-500:]))
        job_id = p.stdout.strip()
        job = s.job(job_id)
        r = job.get("result") or {}
        fields = {m["field"]: m for m in r.get("mismatches", [])}
        m = fields.get("contract.fp32.ftz", {})
        check(job["state"] == "failed" and m.get("measured") is True and m.get("evidence"),
              "stored as failed with contract.fp32.ftz (measured FTZ) and its evidence (%s)" %
              sorted(fields))
        errs = nvschema.errors(whole, r)
        check(not errs, "the stored failing result is valid (%s)" % errs)
        p = s.ctl("show", job_id, token_scope="read")
        check(p.returncode == 0 and "contract.fp32.ftz" in p.stdout,
              "numvalctl show prints the mismatch")

        p = s.ctl("submit", "bad.json", "--wait")
        check(p.returncode == 2 and "/dtypes/0" in p.stderr and "int32" in p.stderr,
              "bad contract spec refused at submit: %s" % p.stderr.strip())


if __name__ == "__main__":
    main(test)
