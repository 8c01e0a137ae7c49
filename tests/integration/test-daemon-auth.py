#!/usr/bin/env python3
"""Auth with anonymous reads off: reads need a token, any scope may read,
/healthz stays open, and a token revoked on the host (while numvald runs)
stops working at once."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvdaemon import Daemon, check, main  # noqa: E402


def test(numvald):
    with Daemon(numvald, server={"anonymous_read": "no"}) as d:
        d.start()
        st, b, _ = d.request("GET", "/api/v1/jobs")
        check(st == 401 and b["error"]["code"] == "unauthorized",
              "anonymous read refused when anonymous_read = no")
        st, _, _ = d.request("GET", "/metrics")
        check(st == 401, "/metrics is a read too")
        st, b, _ = d.request("GET", "/healthz")
        check(st == 200, "/healthz needs no token")
        for scope in ("read", "submit", "worker"):
            st, _, _ = d.request("GET", "/api/v1/jobs", scope=scope)
            check(st == 200, "a %s token may read" % scope)
        st, _, _ = d.request("POST", "/api/v1/jobs", scope="read",
                             body={"kind": "op", "op": "exp", "dtypes": ["fp32"]})
        check(st == 403, "a read token may not submit")
        p = subprocess.run([numvald, "--config", d.conf, "token", "revoke", "it-read"],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "token revoke while numvald runs (%s)" % p.stderr.strip())
        st, b, _ = d.request("GET", "/api/v1/jobs", scope="read")
        check(st == 401 and "revoked" in b["error"]["message"], "the revoked token is refused")
        p = subprocess.run([numvald, "--config", d.conf, "token", "list"],
                           capture_output=True, text=True, timeout=30)
        rows = {l.split()[0]: l.split() for l in p.stdout.splitlines()[1:]}
        check(rows["it-read"][-1] != "-" and rows["it-submit"][-1] == "-",
              "token list shows it-read revoked, it-submit live")
        check(all(d.tokens[s] not in p.stdout for s in d.tokens), "token list never shows tokens")
        p = subprocess.run([numvald, "--config", d.conf, "token", "create", "x",
                            "--scope", "root"], capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and "root" in p.stderr, "unknown scope refused, named")


if __name__ == "__main__":
    main(test)
