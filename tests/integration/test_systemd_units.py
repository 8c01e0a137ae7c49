#!/usr/bin/env python3
"""The systemd units (packaging/systemd, configured by meson) pass
`systemd-analyze verify` with no message, and say what docs/DEPLOY.md promises:
numvald Type=notify as the numval user with the file system read-only but its data
dir; one worker per device instance whose token comes from LoadCredential= and
--token-file, never the command line. systemd-analyze checks that ExecStart's
program exists and that Documentation= man pages resolve, so the units are verified
with their program paths pointed at this build and MANPATH at the built pages.

usage: test_systemd_units.py NUMVALD WORKER UNIT... [-- MANPAGE...]"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

args = sys.argv[1:]
NUMVALD, WORKER = os.path.abspath(args[0]), os.path.abspath(args[1])
rest = args[2:]
units = rest[:rest.index("--")] if "--" in rest else rest
pages = rest[rest.index("--") + 1:] if "--" in rest else []
failed = 0


def check(cond, what):
    global failed
    print(("ok - " if cond else "not ok - ") + what, flush=True)
    failed += not cond


def directives(text):
    d = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            d.setdefault(m.group(1), []).append(m.group(2))
    return d


analyze = shutil.which("systemd-analyze")
if not analyze:
    print("1..0 # SKIP systemd-analyze not installed")
    sys.exit(77)

by_name = {os.path.basename(u): u for u in units}
check(set(by_name) == {"numvald.service", "numval-worker@.service", "numval-prune.service",
                       "numval-prune.timer"}, "the units built (%s)" % sorted(by_name))
d = directives(open(by_name["numvald.service"]).read())
w = directives(open(by_name["numval-worker@.service"]).read())
for key, want in (("Type", "notify"), ("User", "numval"), ("ProtectSystem", "strict"),
                  ("PrivateTmp", "yes"), ("NoNewPrivileges", "yes"), ("ProtectHome", "yes"),
                  ("KillMode", "mixed")):
    check(d.get(key) == [want], "numvald.service: %s=%s (%s)" % (key, want, d.get(key)))
rw = d.get("ReadWritePaths", [""])[0]
check(rw.endswith("/lib/numval"), "numvald.service: ReadWritePaths is the data dir (%s)" % rw)
ini = d["ExecStart"][0].split()
check(ini[1:3] == ["--config", ini[2]] and ini[2].endswith("/numval/numvald.ini"),
      "numvald.service runs with the installed config (%s)" % ini)
for key, want in (("User", "numval"), ("ProtectSystem", "strict"), ("PrivateTmp", "yes"),
                  ("NoNewPrivileges", "yes")):
    check(w.get(key) == [want], "numval-worker@.service: %s=%s (%s)" % (key, want, w.get(key)))
cred = w.get("LoadCredential", [""])[0]
check(re.match(r"^token:/.*/worker-%i\.token$", cred) is not None,
      "numval-worker@.service: the token is a credential per instance (%s)" % cred)
ws = w["ExecStart"][0]
check("--token-file %d/token" in ws and not re.search(r"--token(?!-file)", ws)
      and not any("NUMVAL_TOKEN" in e for e in w.get("Environment", [])),
      "numval-worker@.service: --token-file from $CREDENTIALS_DIRECTORY, no --token, "
      "no NUMVAL_TOKEN in Environment=")
check("--device %i" in ws, "numval-worker@.service: the instance name is the device")

pr = directives(open(by_name["numval-prune.service"]).read())
check(pr.get("User") == ["numval"] and pr.get("ReadWritePaths") == [rw] and
      pr["ExecStart"][0].split()[1:] == ["--config", ini[2], "prune"],
      "numval-prune.service: numvald prune as numval with the same config and data dir")
with tempfile.TemporaryDirectory(prefix="numval-units-") as tmp:
    for u in units:
        text = open(u).read()
        for prog, built in (("numvald", NUMVALD), ("numval-worker", WORKER)):
            text = re.sub(r"(ExecStart=)\S*/%s(\s)" % re.escape(prog), r"\g<1>%s\2" % built, text)
        name = os.path.basename(u).replace("@.service", "@gpu0.service")
        open(os.path.join(tmp, name), "w").write(text)
    man = os.path.join(tmp, "man")
    for p in pages:
        sec = p.rsplit(".", 1)[1]
        os.makedirs(os.path.join(man, "man" + sec), exist_ok=True)
        shutil.copy(p, os.path.join(man, "man" + sec))
    env = dict(os.environ, MANPATH=man, SYSTEMD_LOG_COLOR="0")
    cmd = [analyze, "verify"] + (["--man=no"] if not pages else [])
    names = sorted(os.listdir(tmp))
    names.remove("man") if "man" in names else None
    p = subprocess.run(cmd + [os.path.join(tmp, n) for n in names], capture_output=True,
                       text=True, env=env, timeout=120)
    out = (p.stdout + p.stderr).strip()
    check(p.returncode == 0 and out == "",
          "systemd-analyze verify%s: no message (rc %d: %s)" %
          ("" if pages else " --man=no (no man pages built)", p.returncode, out[:600]))
sys.exit(1 if failed else 0)
