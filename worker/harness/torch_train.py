"""Device-driven training for the PyTorch harness: the exec protocol's optional
"train" request (docs/EXEC_PROTOCOL.md "Optional requests").

The device runs each whole step of the long run's MLP or CNN (the model kind's
small CNN classifier: conv1, conv2, head) in torch: the forward
under torch.autocast (CPU: bfloat16), backward from the scaled loss, the grad
scaler's unscale_ and inf check, torch.nn.utils.clip_grad_norm_, and
torch.optim.AdamW or SGD, then the scaler's update. On CUDA that scaler is
torch.cuda.amp.GradScaler; torch 1.13 has no CPU GradScaler, so on the CPU
CpuGradScaler below follows its algorithm (torch/cuda/amp/grad_scaler.py and
the _amp_update_scale_ kernel): unscale_ multiplies by the fp32 reciprocal and
records found_inf, step() skips optimizer.step() when found_inf (and unscales
first when unscale_ was not called), update() backs off on found_inf and grows
after growth_interval finite steps, never to inf.

The forward records what autocast made of each op (input and output dtypes
as torch produced them) for numval to compare with the job's AMP policy.

FAULTS (--train-fault) are the misuses numval must catch:
  skip_unscale    the loop clips without calling scaler.unscale_ first (the
                  GradScaler documentation's warning): clip_grad_norm_ sees the
                  scaled gradients, step() unscales after the clip
  update_skipped  optimizer.step() runs on a step with non-finite gradients
  drop_scaler     the checkpoint leaves out the scaler's state
  drop_rng        the checkpoint leaves out torch's RNG state
"""

import atexit
import io
import math

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import torch_dist
from torch_autograd import HarnessError

FAULTS = ("none", "skip_unscale", "update_skipped", "drop_scaler", "drop_rng")
FAULT = "none"  # set by --train-fault


class CpuGradScaler:
    def __init__(self, enabled, init_scale, growth, backoff, interval):
        self.enabled = enabled
        self.scale = torch.tensor(float(init_scale), dtype=torch.float32)
        self.growth, self.backoff, self.interval = growth, backoff, int(interval)
        self.tracker = 0
        self.found_inf = False
        self.unscaled = False

    def scale_loss(self, loss):
        return loss * self.scale if self.enabled else loss

    def unscale_(self, params):
        self.unscaled = True
        if not self.enabled:
            self.found_inf = any(not torch.isfinite(p.grad).all() for p in params)
            return
        inv = self.scale.double().reciprocal().float()
        found = False
        with torch.no_grad():
            for p in params:
                p.grad.mul_(inv)
                found |= not bool(torch.isfinite(p.grad).all())
        self.found_inf = found

    def step(self, opt, params):
        if not self.unscaled:
            self.unscale_(params)
        if self.found_inf and FAULT != "update_skipped":
            return False
        opt.step()
        return True

    def update(self):
        self.unscaled = False
        if not self.enabled:
            return
        if self.found_inf:
            self.scale = self.scale * self.backoff
            self.tracker = 0
        else:
            self.tracker += 1
            if self.tracker == self.interval:
                grown = self.scale * self.growth
                if bool(torch.isfinite(grown)):
                    self.scale = grown
                self.tracker = 0

    def state_dict(self):
        return {"scale": self.scale.clone(), "tracker": self.tracker}

    def load_state_dict(self, sd):
        self.scale = sd["scale"].clone()
        self.tracker = int(sd["tracker"])


# aten calls that move or relabel data rather than compute the op
_PLUMBING = ("_to_copy", "detach", "lift_fresh", "view", "alias", "expand", "t.default",
             "unsqueeze", "reshape", "clone", "empty", "zeros")


class _Seen(TorchDispatchMode):
    """The dtypes of the first computing aten call below autocast: what the
    kernel really got after autocast's casts."""

    def __init__(self):
        super().__init__()
        self.inputs = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func)
        if self.inputs is None and not any(p in name for p in _PLUMBING):
            self.inputs = [dname(a) for a in args if torch.is_tensor(a)]
        return out


class Run:
    def __init__(self, cfg, weights, device):
        if cfg.get("model") not in ("mlp", "cnn"):
            raise HarnessError("unsupported", f"not offered: the harness trains the \"mlp\" "
                                              f"and \"cnn\" models, not '{cfg.get('model')}'")
        if cfg.get("model") == "cnn" and (float(cfg.get("dropout", 0)) > 0 or
                                          (cfg.get("distributed") or {}).get("ranks", 1) > 1):
            raise HarnessError("unsupported", "not offered: the harness's cnn steps have no "
                                              "dropout and no ranks")
        self.cfg, self.device = cfg, device
        self.params = [torch.nn.Parameter(w.to(device).float().clone()) for w in weights]
        o = cfg["optimizer"]
        if o["name"] == "adamw":
            self.opt = torch.optim.AdamW(self.params, lr=1.0, betas=(o["beta1"], o["beta2"]),
                                         eps=o["eps"], weight_decay=o["weight_decay"])
        elif o["name"] == "sgd":
            self.opt = torch.optim.SGD(self.params, lr=1.0, momentum=o["momentum"],
                                       weight_decay=o["weight_decay"])
        else:
            raise HarnessError("unsupported", f"not offered: optimizer '{o['name']}'")
        g = cfg["grad_scaler"]
        self.scaler = CpuGradScaler(g["enabled"], g["init_scale"], g["growth_factor"],
                                    g["backoff_factor"], g["growth_interval"])
        self.amp = bool(cfg["amp"]["enabled"])
        if self.amp and cfg["amp"]["dtype"] != "bf16":
            raise HarnessError("unsupported", "not offered: CPU autocast holds bf16 only")
        torch.manual_seed(int(cfg.get("seed", 0)))
        # the job's deterministic flag, per job (the info of each step says
        # whether torch ran with it)
        torch.use_deterministic_algorithms(bool(cfg.get("deterministic", False)))
        dist_cfg = cfg.get("distributed") or {}
        self.ranks = int(dist_cfg.get("ranks", 1))
        if self.ranks > 1 and (dist_cfg.get("algorithm", "ring") != "ring" or
                               dist_cfg.get("dtype", "fp32") != "fp32"):
            raise HarnessError("unsupported", "not offered: the harness all-reduces with "
                                              "gloo's own algorithm in fp32 (declare ring, "
                                              "fp32)")
        if self.ranks > 1:
            global GROUP
            if GROUP is not None and GROUP.world != self.ranks:
                GROUP.close()
                GROUP = None
            if GROUP is None:
                GROUP = torch_dist.Group(self.ranks)

    def forward(self, x, y, ops):
        def rec(name, ins, fn):
            seen = _Seen()
            with seen:
                out = fn()
            got = seen.inputs if seen.inputs is not None else [dname(t) for t in ins]
            ops.append({"op": name, "inputs": got, "output": dname(out)})
            return out

        if self.cfg["model"] == "cnn":
            return self.forward_cnn(x, y, rec), None
        w1, b1, w2, b2 = self.params
        cfg = self.cfg
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.amp):
            # matmul then a separate bias add: the long run's graph (F.linear would
            # fuse the bias into a bf16 addmm)
            h = rec("matmul", [x, w1], lambda: torch.matmul(x, w1))
            h = rec("add", [h, b1], lambda: h + b1)
            act = F.relu if cfg.get("activation") == "relu" else F.gelu
            a = rec("relu" if act is F.relu else "gelu", [h], lambda: act(h))
            p = float(cfg.get("dropout", 0))
            mask = None
            if p > 0:  # the device's own generator, as nn.Dropout draws it
                mask = torch.empty_like(a, dtype=torch.float32).bernoulli_(1 - p) / (1 - p)
                a = rec("mul", [a, mask], lambda: a * mask)
            z = rec("matmul", [a, w2], lambda: torch.matmul(a, w2))
            z = rec("add", [z, b2], lambda: z + b2)
            loss = rec("cross_entropy", [z, y], lambda: F.cross_entropy(z, y.long()))
        return loss, mask

    def forward_cnn(self, x, y, rec):
        """The model kind's CNN (suites/model.json "cnn-classifier"): conv2d 3x3
        padding 1, activation, 2x2 max pool, twice; flatten; matmul then a
        separate bias add (as the MLP's); cross entropy."""
        c1, c2, w3, b3 = self.params
        act = F.relu if self.cfg.get("activation") == "relu" else F.gelu
        aname = "relu" if act is F.relu else "gelu"
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.amp):
            h = x
            for w in (c1, c2):
                h = rec("conv2d", [h, w], lambda h=h, w=w: F.conv2d(h, w, padding=1))
                h = rec(aname, [h], lambda h=h: act(h))
                h = rec("max_pool2d", [h], lambda h=h: F.max_pool2d(h, 2))
            f = torch.flatten(h, 1)
            z = rec("matmul", [f, w3], lambda: torch.matmul(f, w3))
            z = rec("add", [z, b3], lambda: z + b3)
            return rec("cross_entropy", [z, y], lambda: F.cross_entropy(z, y.long()))

    def dist_backward(self, x, y, ops):
        """The step's forward and backward on the ranks: rank 0's shard here,
        the others in GROUP; p.grad gets the all-reduced gradient."""
        cfg = self.cfg
        p = float(cfg.get("dropout", 0))
        mask = None
        if p > 0:  # the whole batch's mask from rank 0's generator
            h = int(cfg["sizes"]["hidden"])
            mask = torch.empty(x.shape[0], h, dtype=torch.float32).bernoulli_(1 - p) / (1 - p)
        seen = []

        def rec(name, ins, fn):
            d = _Seen()
            with d:
                out = fn()
            got = d.inputs if d.inputs is not None else [dname(t) for t in ins]
            seen.append({"op": name, "inputs": got, "output": dname(out)})
            return out

        m = {"cmd": "step", "params": [q.detach().clone() for q in self.params], "x": x,
             "y": y, "mask": mask, "amp": self.amp, "activation": cfg.get("activation"),
             "loss_weight": float(cfg.get("loss_weight", 1.0)),
             "scale": self.scaler.scale if self.scaler.enabled else torch.tensor(1.0),
             "deterministic": bool(cfg.get("deterministic", False))}
        loss, reduced, gathered = GROUP.step(m, rec)
        ops.extend(seen)
        with torch.no_grad():
            for q, g in zip(self.params, reduced):
                q.grad = g.clone()
        # rank r, parameter i at r * 4 + i; then the reduced gradient (still scaled)
        per_rank = [gathered[i][r] for r in range(self.ranks) for i in range(4)]
        self.dist_out = per_rank + [g.clone() for g in reduced]
        return torch.tensor(loss), mask

    def step(self, msg_cfg, x, y):
        lr = float(msg_cfg["lr"])
        for group in self.opt.param_groups:
            group["lr"] = lr
        ops = []
        self.opt.zero_grad(set_to_none=False)
        lw = float(self.cfg.get("loss_weight", 1.0))
        scale_used = float(self.scaler.scale) if self.scaler.enabled else 1.0
        if self.ranks > 1:
            loss, mask = self.dist_backward(x, y, ops)
        else:
            loss, mask = self.forward(x, y, ops)
            self.scaler.scale_loss(loss.float() * lw).backward()
        if FAULT != "skip_unscale":
            self.scaler.unscale_(self.params)
        clip = float(self.cfg.get("clip_grad_norm", 0))
        if clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip))
        else:
            norm = float(torch.linalg.vector_norm(
                torch.stack([torch.linalg.vector_norm(p.grad) for p in self.params])))
        stepped = self.scaler.step(self.opt, self.params)
        found_inf = self.scaler.found_inf
        self.scaler.update()
        grads = [p.grad.detach().clone() for p in self.params]
        m1, m2 = [], []
        for p in self.params:
            st = self.opt.state.get(p, {})
            if "exp_avg" in st:
                m1.append(st["exp_avg"].clone()), m2.append(st["exp_avg_sq"].clone())
            else:
                buf = st.get("momentum_buffer")
                m1.append(buf.clone() if buf is not None else torch.zeros_like(p))
                m2.append(torch.zeros_like(p))
        steps = 0
        for st in self.opt.state.values():
            steps = int(st["step"]) if "step" in st else steps
        if not steps:  # SGD keeps no count: the harness counts the steps it took
            self.sgd_steps = getattr(self, "sgd_steps", 0) + (1 if stepped else 0)
            steps = self.sgd_steps
        info = {"loss": finite(float(loss)), "scale": finite(scale_used), "found_inf": found_inf,
                "skipped": not stepped, "next_scale": finite(float(self.scaler.scale)),
                "growth_tracker": self.scaler.tracker, "optimizer_steps": steps,
                "grad_norm": finite(norm), "ops": ops,
                "deterministic": torch.are_deterministic_algorithms_enabled(),
                "ranks": self.ranks}
        if self.ranks > 1:
            info["allreduce"] = {"algorithm": "ring", "dtype": "fp32", "backend": "gloo"}
        if mask is None:
            mask = torch.zeros(0)
        outs = grads + [p.detach().clone() for p in self.params] + m1 + m2 + [mask]
        P = len(self.params)
        names = ([f"grad:{i}" for i in range(P)] + [f"weight:{i}" for i in range(P)] +
                 [f"moment1:{i}" for i in range(P)] + [f"moment2:{i}" for i in range(P)] +
                 ["dropout_mask"])
        if self.ranks > 1:
            outs += self.dist_out
            names += ([f"rank_grad:{r}:{i}" for r in range(self.ranks) for i in range(4)] +
                      [f"reduced_grad:{i}" for i in range(4)])
        return names, outs, info

    def save(self):
        ck = {"params": [p.detach().clone() for p in self.params],
              "optimizer": self.opt.state_dict(),
              "sgd_steps": getattr(self, "sgd_steps", 0)}
        if FAULT != "drop_scaler":
            ck["scaler"] = self.scaler.state_dict()
        if FAULT != "drop_rng":
            ck["rng"] = torch.get_rng_state()
        buf = io.BytesIO()
        torch.save(ck, buf)
        return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.int8)

    def load(self, blob):
        ck = torch.load(io.BytesIO(blob.numpy().tobytes()))
        with torch.no_grad():
            for p, w in zip(self.params, ck["params"]):
                p.copy_(w)
        self.opt.load_state_dict(ck["optimizer"])
        self.sgd_steps = ck.get("sgd_steps", 0)
        if "scaler" in ck:
            self.scaler.load_state_dict(ck["scaler"])
        if "rng" in ck:
            torch.set_rng_state(ck["rng"])


def param_shapes(cfg):
    """The parameters' shapes, in the order the worker sends them."""
    z = cfg["sizes"]
    i, h, c = int(z["in"]), int(z["hidden"]), int(z["classes"])
    if cfg.get("model") == "cnn":
        return [(h, 1, 3, 3), (2 * h, h, 3, 3), (2 * h * (i // 4) ** 2, c), (c,)]
    return [(i, h), (h,), (h, c), (c,)]


def dname(t):
    if not torch.is_tensor(t):
        return "fp64"
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
            torch.float64: "fp64", torch.int32: "int32", torch.int64: "int64"}.get(t.dtype, str(t.dtype))


def finite(v):
    """JSON has no inf or NaN: a non-finite number travels as null."""
    return v if math.isfinite(v) else None


RUN = None
GROUP = None  # torch_dist.Group: the ranks, kept across runs of the same size


@atexit.register
def _close_group():
    if GROUP is not None:
        GROUP.close()


def handle(device, msg, tensors):
    """(names, tensors, extra header fields) of the reply to one train request."""
    global RUN
    action, cfg = msg.get("action"), msg.get("config") or {}
    if action == "init":
        RUN = Run(cfg, tensors, device)
        return [], [], {"info": {}}
    if action == "load":
        if len(tensors) != 1:
            raise HarnessError("invalid", "train load takes one checkpoint tensor")
        RUN = Run(cfg, [torch.zeros(s) for s in param_shapes(cfg)], device)
        RUN.load(tensors[0].cpu())
        return [], [], {"info": {}}
    if RUN is None:
        raise HarnessError("invalid", "train: no run (init or load first)")
    if action == "step":
        names, outs, info = RUN.step(cfg, tensors[0], tensors[1])
        return names, outs, {"info": info}
    if action == "save":
        return ["checkpoint"], [RUN.save()], {"info": {}}
    raise HarnessError("invalid", f"unknown train action '{action}'")
