"""Distributed gradient reduction for the PyTorch harness's device-driven
training (docs/JOBS.md "Distributed gradient reduction"): R real processes,
torch.distributed on the gloo backend (CPU), on 127.0.0.1.

The harness process is rank 0. It starts ranks 1..R-1 as child processes of
this file (stdout to /dev/null: the protocol's stream is rank 0's alone),
over a TCPStore that rank 0 binds on port 0 (the kernel picks a free port, no
race) and GLOO_SOCKET_IFNAME=lo (gloo's pairs on loopback). Each child asks
the kernel to kill it when the harness dies (PR_SET_PDEATHSIG: the worker
restarts a harness with SIGKILL before a checkpoint load), and exits when
rank 0 sends "quit" or its connection breaks; Group.close joins them and kills
any left after 10 s.

Each step rank 0 broadcasts the weights, the batch, the dropout mask (drawn by
rank 0's generator, so the checkpoint's RNG state is rank 0's), the loss scale
and the flags; every rank runs the forward and backward of its shard of rows
(loss = its rows' summed cross entropy / the whole batch, so the ranks'
gradients sum to the batch mean's), rank 0 gathers each rank's gradient before
the reduction (numval's exact reference sums them), then dist.all_reduce(SUM)
reduces the gradients in fp32 by gloo's own algorithm.
"""

import ctypes
import datetime
import os
import signal
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

TIMEOUT = datetime.timedelta(seconds=300)


def shard_forward(params, m, x, y, mask, total, rec=None):
    """The MLP of the long run on rows x (autocast as rank 0's), the loss summed
    over them divided by the whole batch's size `total`."""
    def run(name, ins, fn):
        return rec(name, ins, fn) if rec else fn()

    w1, b1, w2, b2 = params
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(m["amp"])):
        h = run("matmul", [x, w1], lambda: torch.matmul(x, w1))
        h = run("add", [h, b1], lambda: h + b1)
        act = F.relu if m["activation"] == "relu" else F.gelu
        a = run("relu" if act is F.relu else "gelu", [h], lambda: act(h))
        if mask is not None:
            a = run("mul", [a, mask], lambda: a * mask)
        z = run("matmul", [a, w2], lambda: torch.matmul(a, w2))
        z = run("add", [z, b2], lambda: z + b2)
        loss = run("cross_entropy", [z, y],
                   lambda: F.cross_entropy(z, y.long(), reduction="sum") / total)
    return loss


def rank_step(rank, world, m, rec=None):
    """One rank's part of a step: (loss, pre-reduction gradients, reduced
    gradients, rank 0's gathered per-rank gradients)."""
    torch.use_deterministic_algorithms(bool(m["deterministic"]))
    B = m["x"].shape[0]
    lo, hi = rank * B // world, (rank + 1) * B // world
    params = [torch.nn.Parameter(w.clone()) for w in m["params"]]
    mask = m["mask"][lo:hi] if m["mask"] is not None else None
    loss = shard_forward(params, m, m["x"][lo:hi], m["y"][lo:hi], mask, B, rec)
    (loss.float() * m["loss_weight"] * m["scale"]).backward()
    grads = [p.grad.detach().contiguous() for p in params]
    gathered = []
    for g in grads:  # each rank's own gradient, before the collective touches it
        lst = [torch.empty_like(g) for _ in range(world)] if rank == 0 else None
        dist.gather(g.clone(), lst, dst=0)
        gathered.append(lst)
    for g in grads:
        dist.all_reduce(g, op=dist.ReduceOp.SUM)
    lsum = loss.detach().float().reshape(1).clone()
    dist.all_reduce(lsum, op=dist.ReduceOp.SUM)
    return float(lsum), grads, gathered


class Group:
    """Ranks 1..R-1 as child processes and rank 0's process group."""

    def __init__(self, world):
        self.world = world
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        self.store = dist.TCPStore("127.0.0.1", 0, world, True, timeout=TIMEOUT,
                                   wait_for_workers=False)
        port = self.store.port
        env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
        self.procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), str(r),
                                        str(world), str(port)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       env=env)
                      for r in range(1, world)]
        dist.init_process_group("gloo", store=self.store, rank=0, world_size=world,
                                timeout=TIMEOUT)

    def step(self, m, rec):
        obj = [m]
        dist.broadcast_object_list(obj, src=0)
        return rank_step(0, self.world, m, rec)

    def close(self):
        try:
            dist.broadcast_object_list([{"cmd": "quit"}], src=0)
            dist.destroy_process_group()
        except RuntimeError:
            pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []


def follower(rank, world, port):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the harness
    if os.getppid() == 1:  # the harness died before prctl
        return 1
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, False, timeout=TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=TIMEOUT)
    while True:
        obj = [None]
        dist.broadcast_object_list(obj, src=0)
        m = obj[0]
        if m.get("cmd") == "quit":
            break
        rank_step(rank, world, m)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(follower(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
