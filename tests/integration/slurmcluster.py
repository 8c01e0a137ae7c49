"""A one-node Slurm cluster on 127.0.0.1 for the integration tests: munged with
a key generated into a temp dir, slurmctld and slurmd in the foreground as our
children, a slurm.conf of free ports, temp state and spool dirs, and one
partition 'numval' whose node offers a count-only GRES 'nvdev'. Debian 12's
slurm-wlm 22.05 and munge 0.5.15. Everything it starts is ended by its own pid
(the Slurm jobs by scancel, their leftover step processes by the pids slurmd
reports) and the temp dir removed.

CLUSTER.env is the environment the Slurm client programs need (SLURM_CONF);
give it to anything that calls sbatch or squeue."""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time

PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo",
            "scontrol")


def _find(prog):
    for d in ("/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        p = os.path.join(d, prog)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(prog)


def missing():
    """The Slurm or munge programs that are not installed (empty: all are)."""
    return [p for p in PROGRAMS if not _find(p)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ClusterError(Exception):
    pass


class Cluster:
    def __init__(self, cpus=4, gres=4):
        self.tmp = tempfile.mkdtemp(prefix="numval-slurm-")
        os.chmod(self.tmp, 0o755)
        self.procs = {}
        self.bin = {p: _find(p) for p in PROGRAMS}
        user = pwd.getpwuid(os.getuid()).pw_name
        self.munge_dir = os.path.join(self.tmp, "munge")
        os.mkdir(self.munge_dir, 0o700)
        self.socket = os.path.join(self.munge_dir, "munge.socket")
        self.conf = os.path.join(self.tmp, "slurm.conf")
        for d in ("state", "spool"):
            os.mkdir(os.path.join(self.tmp, d), 0o755)
        t = self.tmp
        # CPUs and the GRES count are what the test asks for, not this host's:
        # config_overrides keeps slurmd from draining a node whose hardware
        # differs. proctrack/linuxproc and task/none need no cgroups.
        lines = [
            "ClusterName=numvaltest",
            "SlurmctldHost=localhost(127.0.0.1)",
            "SlurmctldPort=%d" % _free_port(),
            "SlurmdPort=%d" % _free_port(),
            "SlurmUser=%s" % user,
            "SlurmdUser=%s" % user,
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s" % self.socket,
            "StateSaveLocation=%s/state" % t,
            "SlurmdSpoolDir=%s/spool" % t,
            "SlurmctldPidFile=%s/slurmctld.pid" % t,
            "SlurmdPidFile=%s/slurmd.pid" % t,
            "SlurmctldLogFile=%s/slurmctld.log" % t,
            "SlurmdLogFile=%s/slurmd.log" % t,
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "MailProg=/bin/true",
            "ReturnToService=2",
            "KillWait=5",
            "MinJobAge=600",
            "GresTypes=nvdev",
            "NodeName=localhost NodeAddr=127.0.0.1 CPUs=%d RealMemory=1000 Gres=nvdev:%d "
            "State=UNKNOWN" % (cpus, gres),
            "PartitionName=numval Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
        ]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(self.tmp, "gres.conf"), "w") as f:
            f.write("NodeName=localhost Name=nvdev Count=%d\n" % gres)
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    # -- start -----------------------------------------------------------------
    def _spawn(self, name, argv):
        log = open(os.path.join(self.tmp, name + ".out"), "wb")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env, start_new_session=True)
        log.close()

    def start(self, timeout=90):
        key = os.path.join(self.munge_dir, "munge.key")
        subprocess.run([self.bin["mungekey"], "--create", "--keyfile=" + key, "--bits=1024"],
                       check=True, timeout=30)
        m = self.munge_dir
        # --force: run although the temp dir's parents are not what munged
        # wants of a system install (it checks their owners and modes).
        self._spawn("munged", [self.bin["munged"], "--foreground", "--force",
                               "--key-file=" + key, "--socket=" + self.socket,
                               "--pid-file=" + os.path.join(m, "munged.pid"),
                               "--log-file=" + os.path.join(m, "munged.log"),
                               "--seed-file=" + os.path.join(m, "munged.seed")])
        self._wait(lambda: os.path.exists(self.socket), 20, "munged's socket")
        self._spawn("slurmctld", [self.bin["slurmctld"], "-D", "-i"])
        self._wait(lambda: self._ok([self.bin["scontrol"], "ping"], "UP"), 30,
                   "slurmctld answering scontrol ping")
        self._spawn("slurmd", [self.bin["slurmd"], "-D", "-N", "localhost"])
        self._wait(lambda: self._ok([self.bin["sinfo"], "--noheader", "--format=%t"], "idle"),
                   timeout, "the node idle in sinfo")

    def _ok(self, argv, want):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=15)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0 and want in p.stdout

    def _wait(self, cond, timeout, what):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise ClusterError("%s exited with %s while waiting for %s:\n%s" %
                                       (name, p.returncode, what, self.tail()))
            if cond():
                return
            time.sleep(0.2)
        raise ClusterError("no %s within %d s:\n%s" % (what, timeout, self.tail()))

    # -- use -------------------------------------------------------------------
    def run(self, *argv, timeout=30):
        """A Slurm client program (scancel, squeue, ...) against this cluster."""
        return subprocess.run([self.bin.get(argv[0]) or argv[0]] + list(argv[1:]),
                              capture_output=True, text=True, env=self.env, timeout=timeout)

    def jobs(self, name):
        """{slurm id: state} of the jobs named name, one entry per array task."""
        p = self.run("squeue", "--noheader", "--array", "--name=" + name, "--format=%i %t")
        if p.returncode != 0:
            raise ClusterError("squeue failed: %s" % p.stderr)
        return dict(l.split() for l in p.stdout.splitlines() if l.strip())

    def tail(self, n=3000):
        out = []
        for name in ("munged.out", "slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            try:
                with open(os.path.join(self.tmp, name), "rb") as f:
                    out.append("== %s ==\n%s" % (name, f.read()[-n:].decode("utf-8", "replace")))
            except OSError:
                pass
        return "\n".join(out)

    # -- stop ------------------------------------------------------------------
    def _step_pids(self):
        p = self.run("scontrol", "listpids", timeout=15)
        pids = []
        for line in p.stdout.splitlines()[1:]:
            f = line.split()
            if f and f[0].isdigit() and int(f[0]) != os.getpid():
                pids.append(int(f[0]))
        return pids

    def close(self):
        try:
            if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
                self.run("scancel", "--full", "--user=%d" % os.getuid(), timeout=30)
                deadline = time.time() + 30
                while time.time() < deadline and self.run("squeue", "--noheader").stdout.strip():
                    time.sleep(0.3)
            if self.procs.get("slurmd") and self.procs["slurmd"].poll() is None:
                # What a step left running (slurmstepd and its job), by the
                # pids slurmd tracks for our jobs; nothing else is touched.
                for pid in self._step_pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except (OSError, subprocess.SubprocessError):
            pass
        for name in ("slurmd", "slurmctld", "munged"):
            p = self.procs.get(name)
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=20)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and et is not SystemExit:
            print("# --- slurm logs ---\n" + "\n".join("# " + l for l in self.tail().splitlines()))
        self.close()
        return False
