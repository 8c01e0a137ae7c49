"""The graph request of the PyTorch harness (docs/EXEC_PROTOCOL.md "Optional
requests"): a numval graph (a model expanded into the fused format) built as a
tree of torch modules and run natively.

The tree is what a lab's model looks like: the model module holds one module
per layer (nodes named LAYER.NODE, docs/MODEL.md), a layer one module per node;
a parameter used by a single node is that node module's nn.Parameter (a matmul
against its own weight becomes nn.Linear's F.linear with the weight stored
[out, in], an embedding table or a norm weight lives in its module), one used by
several nodes (rotary tables, the causal mask) the model's own, passed down.
The forward methods are generated Python source (written to a file and imported,
so torch.jit.script can read it): the model runs eagerly, under torch.autocast,
or as a TorchScript-scripted module. Every node module carries a forward hook
(scriptable, so it survives scripting) that keeps its output: the captures.
"""

import contextlib
import importlib.util
import linecache
import os
import tempfile
import time

import torch

from torch_autograd import HarnessError

# Reply limit for the compiler's IR text: the reply's header line is at most
# 1 MiB (docs/EXEC_PROTOCOL.md "Framing").
IR_MAX = 512 * 1024
# --wrong-op: the named op's modules scale their output by this (a wrong
# constant of 2^-7, 0.8%: far outside fp32's band, inside no bf16 rounding).
WRONG_SCALE = 1.0078125

UNARY = {"neg": "torch.neg", "abs": "torch.abs", "sqrt": "torch.sqrt", "rsqrt": "torch.rsqrt",
         "reciprocal": "torch.reciprocal", "exp": "torch.exp", "exp2": "torch.exp2",
         "expm1": "torch.expm1", "log": "torch.log", "log2": "torch.log2",
         "log1p": "torch.log1p", "sin": "torch.sin", "cos": "torch.cos", "tanh": "torch.tanh",
         "sigmoid": "torch.sigmoid", "erf": "torch.erf", "silu": "F.silu", "relu": "torch.relu"}
BINARY = {"add": "torch.add", "sub": "torch.sub", "mul": "torch.mul", "div": "torch.div",
          "pow": "torch.pow", "maximum": "torch.maximum", "minimum": "torch.minimum"}
DTYPE_EXPR = {"fp64": "torch.float64", "fp32": "torch.float32", "bf16": "torch.bfloat16",
              "fp16": "torch.float16"}


def topo_order(nodes):
    """Kahn's algorithm taking the first ready node in listed order each step,
    as core/ops/graph.c orders a graph (the capture order)."""
    names = {n["name"] for n in nodes}
    done, order = set(), []
    while len(order) < len(nodes):
        pick = next((n for n in nodes if n["name"] not in done and
                     all(i in done for i in n.get("inputs", []) if i in names)), None)
        if pick is None:
            raise HarnessError("invalid", "the graph has a cycle")
        done.add(pick["name"])
        order.append(pick)
    return order


def expr(op, a, args):
    """The torch expression of one catalog op on argument expressions args."""
    x = args
    axis = int(a.get("axis", -1))
    if op in UNARY:
        return f"{UNARY[op]}({x[0]})"
    if op in BINARY:
        return f"{BINARY[op]}({x[0]}, {x[1]})"
    if op in ("matmul", "bmm"):
        if a.get("scale", "none") not in ("none", None):
            raise HarnessError("unsupported", f"matmul scale '{a['scale']}' has no torch module")
        return f"torch.matmul({x[0]}, {x[1]})"
    if op == "gelu":
        return f"F.gelu({x[0]}, approximate='{'tanh' if a.get('approximate') == 'tanh' else 'none'}')"
    if op in ("softmax", "log_softmax"):
        return f"torch.{op}({x[0]}, dim={axis})"
    if op in ("sum", "mean"):
        return f"torch.{op}({x[0]}, dim={axis})"
    if op == "max":
        return f"torch.amax({x[0]}, dim={axis})"
    if op == "rms_norm":
        # PyTorch 1.13 has no rms_norm: composed from its operators as models do
        eps = float(a.get("eps", 1e-5))
        return (f"{x[0]} * torch.rsqrt({x[0]}.pow(2).mean(dim=-1, keepdim=True) + {eps!r}) "
                f"* {x[1]}")
    if op == "layer_norm":
        return f"F.layer_norm({x[0]}, [{x[0]}.shape[-1]], {x[1]}, {x[2]}, {float(a.get('eps', 1e-5))!r})"
    if op == "embedding":
        return f"F.embedding({x[1]}.long(), {x[0]})"
    if op == "transpose":
        return f"{x[0]}.transpose(-2, -1)"
    if op == "split_heads":
        return f"{x[0]}.reshape({x[0]}.shape[0], {int(a['heads'])}, -1).transpose(0, 1)"
    if op == "merge_heads":
        return f"{x[0]}.transpose(0, 1).reshape({x[0]}.shape[1], -1)"
    if op == "cast":
        if a.get("to") not in DTYPE_EXPR:
            raise HarnessError("dtype", f"cast target '{a.get('to')}' is not a torch dtype")
        return f"{x[0]}.to({DTYPE_EXPR[a['to']]})"
    if op == "fma":
        return f"torch.addcmul({x[2]}, {x[0]}, {x[1]})"
    if op == "conv2d":
        return (f"F.conv2d({x[0]}, {x[1]}, None, {int(a.get('stride', 1))}, "
                f"{int(a.get('padding', 0))}, {int(a.get('dilation', 1))}, {int(a.get('groups', 1))})")
    if op in ("max_pool2d", "avg_pool2d"):
        k = int(a.get("kernel", 2))
        args = f"{x[0]}, {k}, {int(a.get('stride', k))}, {int(a.get('padding', 0))}"
        if op == "max_pool2d":
            return f"F.max_pool2d({args})"
        d = a.get("divisor_override")
        return (f"F.avg_pool2d({args}, {bool(a.get('ceil_mode', False))}, "
                f"{bool(a.get('count_include_pad', True))}, {int(d) if d is not None else None})")
    if op == "flatten":
        return f"torch.flatten({x[0]}, 1)"
    raise HarnessError("unsupported", f"op '{op}' has no module in this harness")


def ident(name):
    """A Python identifier for a graph name (prefixed: a name may be a keyword)."""
    return "v_" + "".join(ch if ch.isalnum() else "_" for ch in name)


class Plan:
    """The module tree of a graph: which node module owns which parameter,
    which layer holds which nodes, and the generated source."""

    def __init__(self, graph, params, wrong_op):
        self.inputs = [i["name"] for i in graph["inputs"]]
        self.nodes = topo_order(graph["nodes"])
        self.outputs = list(graph["outputs"])
        users = {}
        for n in self.nodes:
            for i in n.get("inputs", []):
                users.setdefault(i, set()).add(n["name"])
        params = set(params)
        # a parameter one node uses is that node's own; others are the model's
        self.owned = {p: next(iter(users[p])) for p in params if len(users.get(p, ())) == 1}
        self.shared = [p for p in self.inputs if p in params and p not in self.owned]
        self.data = [p for p in self.inputs if p not in params]
        self.layers = self.group()
        self.wrong_op = wrong_op

    def group(self):
        """Layers in order: a node named A.B belongs to layer A (docs/MODEL.md
        names LAYER.NODE); one layer when the names do not fall in runs that
        depend only on earlier layers (a fused graph's plain names)."""
        layers, seen = [], {}
        for n in self.nodes:
            lname = n["name"].rsplit(".", 1)[0] if "." in n["name"] else ""
            if lname not in seen:
                seen[lname] = len(layers)
                layers.append((lname, []))
            layers[seen[lname]][1].append(n)
        layer_of = {n["name"]: seen[l] for l, ns in layers for n in ns}
        ok = all(layer_of.get(i, -1) <= layer_of[n["name"]]
                 for _, ns in layers for n in ns for i in n.get("inputs", []))
        if not ok or any(l == "" for l, _ in layers) and len(layers) > 1:
            return [("graph", list(self.nodes))]
        return [(l or "graph", ns) for l, ns in layers]

    def source(self):
        """Python source of the node, layer and model classes and the hooks."""
        out = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F",
               "from typing import Tuple", "from torch import Tensor", ""]
        for k in range(1, 5):
            tup = ", ".join(["Tensor"] * k)
            out += [f"def hook{k}(m: nn.Module, inp: Tuple[{tup}], out: Tensor):",
                    "    m.captured = out", ""]
        self.node_cls, self.node_args, self.node_params = {}, {}, {}
        for idx, n in enumerate(self.nodes):
            ins, a, op = n.get("inputs", []), n.get("attrs") or {}, n["op"]
            args, argexprs, owned = [], [], []
            for j, i in enumerate(ins):
                if self.owned.get(i) == n["name"]:
                    owned.append(i)
                    argexprs.append(f"self.p{j}")
                else:
                    args.append(i)
                    argexprs.append(f"x{len(args) - 1}")
            linear = op == "matmul" and len(owned) == 1 and ins[1] == owned[0]
            if linear:
                # nn.Linear's form: the weight [out, in], F.linear
                body = f"F.linear({argexprs[0]}, self.p1)"
            else:
                body = expr(op, a, argexprs)
            if self.wrong_op == op:
                body = f"({body}) * {WRONG_SCALE!r}"  # --wrong-op: deliberately wrong
            cls = f"N{idx}{ident(op)}"
            sig = ", ".join(f"x{j}: Tensor" for j in range(len(args)))
            out += [f"class {cls}(nn.Module):",
                    f"    # {n['name']}: {op}",
                    f"    def forward(self{', ' if sig else ''}{sig}) -> Tensor:",
                    f"        return {body}", ""]
            self.node_cls[n["name"]] = cls
            self.node_args[n["name"]] = args
            self.node_params[n["name"]] = [(f"p{ins.index(p)}", p, linear) for p in owned]
        # layers: forward takes what the layer reads from outside, returns what
        # is read of it outside (and the graph outputs among its nodes)
        self.layer_io = []
        names_in_layer = [set(x["name"] for x in ns) for _, ns in self.layers]
        needed = set(self.outputs)
        for n in self.nodes:
            needed.update(self.node_args[n["name"]])
        for li, (lname, ns) in enumerate(self.layers):
            ext = []
            for n in ns:
                for i in self.node_args[n["name"]]:
                    if i not in names_in_layer[li] and i not in ext:
                        ext.append(i)
            later = set()
            for lj in range(li + 1, len(self.layers)):
                for n in self.layers[lj][1]:
                    later.update(self.node_args[n["name"]])
            exports = [n["name"] for n in ns if n["name"] in later or n["name"] in self.outputs]
            cls = f"L{li}{ident(lname)}"
            exports = exports or [ns[-1]["name"]]
            sig = ", ".join(f"{ident(e)}: Tensor" for e in ext)
            ret_t = ", ".join(["Tensor"] * len(exports))
            out += [f"class {cls}(nn.Module):", f"    # layer {lname}",
                    f"    def forward(self{', ' if sig else ''}{sig}) -> Tuple[{ret_t}]:"]
            for n in ns:
                call = ", ".join(ident(i) for i in self.node_args[n["name"]])
                out.append(f"        {ident(n['name'])} = self.{ident(n['name'])}({call})")
            out += [f"        return ({', '.join(ident(e) for e in exports)},)", ""]
            self.layer_io.append((cls, ext, exports))
        sig = ", ".join(f"{ident(d)}: Tensor" for d in self.data)
        ret_t = ", ".join(["Tensor"] * len(self.outputs))
        out += ["class Model(nn.Module):",
                f"    def forward(self{', ' if sig else ''}{sig}) -> Tuple[{ret_t}]:"]
        for p in self.shared:
            out.append(f"        {ident(p)} = self.{ident(p)}")
        for li, (cls, ext, exports) in enumerate(self.layer_io):
            lhs = "".join(ident(e) + ", " for e in exports)
            args = ", ".join(ident(e) for e in ext)
            out.append(f"        ({lhs}) = self.layer{li}({args})")
        out += [f"        return ({', '.join(ident(o) for o in self.outputs)},)", ""]
        return "\n".join(out)


# Imported sources by text: a job's cases and decode steps send the same graph,
# so its classes are imported (and TorchScript compiles them) once; bounded.
SOURCES = {}
SOURCES_MAX = 8


def load_source(text):
    """Import generated source from a file (TorchScript reads a class's source
    through inspect, which finds it in linecache once the file is gone)."""
    if text in SOURCES:
        return SOURCES[text]
    fd, path = tempfile.mkstemp(prefix="numval_model_", suffix=".py")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    finally:
        os.unlink(path)
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    if len(SOURCES) >= SOURCES_MAX:
        old = next(iter(SOURCES))
        linecache.cache.pop(SOURCES.pop(old).__file__, None)
    SOURCES[text] = mod
    return mod


def build(plan, tensors):
    """The module tree with its parameters (values: the request's tensors)."""
    mod = load_source(plan.source())
    by_name = dict(zip(plan.inputs, tensors))
    model = mod.Model()
    captures = []
    for li, (lname, ns) in enumerate(plan.layers):
        layer = getattr(mod, plan.layer_io[li][0])()
        for n in ns:
            m = getattr(mod, plan.node_cls[n["name"]])()
            for attr, pname, linear in plan.node_params[n["name"]]:
                t = by_name[pname]
                t = t.t().contiguous() if linear else t
                if t.is_floating_point():
                    setattr(m, attr, torch.nn.Parameter(t, requires_grad=False))
                else:
                    m.register_buffer(attr, t)
            m.captured = torch.empty(0)
            m.register_forward_hook(getattr(mod, f"hook{max(1, len(plan.node_args[n['name']]))}"))
            if not plan.node_args[n["name"]]:
                raise HarnessError("unsupported", f"node '{n['name']}' reads only its own "
                                                  "parameters: no module forward without inputs")
            setattr(layer, ident(n["name"]), m)
            captures.append(m)
        setattr(model, f"layer{li}", layer)
    for p in plan.shared:
        t = by_name[p]
        if t.is_floating_point():
            setattr(model, ident(p), torch.nn.Parameter(t, requires_grad=False))
        else:
            model.register_buffer(ident(p), t)
    return model, captures


def natural_dtypes(plan, tensors):
    """Each node's dtype as the catalog infers it (a cast's target, else its
    first floating input's): graph outputs are returned in it even when
    autocast computed them in a lower precision."""
    dt = {n: t.dtype for n, t in zip(plan.inputs, tensors)}
    for n in plan.nodes:
        a = n.get("attrs") or {}
        if n["op"] == "cast":
            dt[n["name"]] = {"fp64": torch.float64, "fp32": torch.float32,
                             "bf16": torch.bfloat16, "fp16": torch.float16}[a["to"]]
        else:
            fl = [dt[i] for i in n.get("inputs", []) if dt[i].is_floating_point]
            dt[n["name"]] = fl[0] if fl else torch.float32
    return dt


class WithCaptures(torch.nn.Module):
    """The model returning its outputs, then every node's capture (topological
    order of the layers' nodes), for torch.jit.trace."""

    def __init__(self, model, captures):
        super().__init__()
        self.model = model
        self.nodes = captures  # the same node modules, whose hooks set .captured

    def forward(self, *data):
        outs = self.model(*data)
        return tuple(outs) + tuple(m.captured for m in self.nodes)


class Held:
    """A capture the traced module returned (what a hooked module holds)."""

    def __init__(self, t):
        self.captured = t


AUTOCAST = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def run(msg, tensors, device, wrong_op):
    """(names, tensors, extra reply fields) of a graph request."""
    graph, opts = msg.get("graph"), msg.get("options") or {}
    if not isinstance(graph, dict) or not all(k in graph for k in ("inputs", "nodes", "outputs")):
        raise HarnessError("invalid", "graph request without a graph (inputs, nodes, outputs)")
    if len(tensors) != len(graph["inputs"]):
        raise HarnessError("invalid", f"{len(tensors)} tensors for {len(graph['inputs'])} graph inputs")
    compile_, cast = opts.get("compile", "none"), opts.get("autocast", "none")
    if compile_ not in ("none", "script", "trace"):
        raise HarnessError("unsupported",
                           f"compile '{compile_}': this harness offers none, script, trace")
    if cast not in AUTOCAST:
        raise HarnessError("unsupported", f"autocast '{cast}': this harness offers none, bf16, fp16")
    t0 = time.perf_counter()
    plan = Plan(graph, opts.get("params") or [], wrong_op)
    model, captures = build(plan, tensors)
    model.eval()
    t1 = time.perf_counter()
    data = [t for name, t in zip(plan.inputs, tensors) if name in plan.data]
    autocast = (torch.autocast(device_type=torch.device(device).type, dtype=AUTOCAST[cast])
                if AUTOCAST[cast] is not None else contextlib.nullcontext())
    n_out = len(plan.outputs)
    with torch.no_grad(), autocast:
        if compile_ == "trace":
            # A trace records tensor operations, not the hooks' writes to
            # m.captured; returned as outputs of the traced function, the
            # captures are values of the trace's graph like the logits.
            runnable = torch.jit.trace(WithCaptures(model, captures), tuple(data),
                                       check_trace=False)
        else:
            runnable = torch.jit.script(model) if compile_ == "script" else model
        t2 = time.perf_counter()
        # after scripting, a node module's hook writes the scripted submodule's attribute
        if compile_ == "script":
            captures = [getattr(getattr(runnable, f"layer{li}"), ident(n["name"]))
                        for li, (_, ns) in enumerate(plan.layers) for n in ns]
        outs = runnable(*data)
        if compile_ == "trace":
            outs, held = outs[:n_out], outs[n_out:]
            captures = [Held(t) for t in held]
    t3 = time.perf_counter()
    order = {n["name"]: k for k, n in enumerate(n for _, ns in plan.layers for n in ns)}
    if os.environ.get("NUMVAL_HARNESS_FORWARD_TIMES"):
        # benchmarks (bench/model_torch_bench.py): build, script, forward seconds
        with open(os.environ["NUMVAL_HARNESS_FORWARD_TIMES"], "a") as f:
            f.write(f"{t1 - t0} {t2 - t1} {t3 - t2}\n")
    dts = natural_dtypes(plan, tensors)
    names = [f"output:{i}" for i in range(len(outs))]
    result = [o.to(dts[name]) for o, name in zip(outs, plan.outputs)]
    if msg.get("capture"):
        for k, n in enumerate(plan.nodes):
            names.append(f"capture:{k}")
            result.append(captures[order[n["name"]]].captured)
    extra = {"modules": {"layers": len(plan.layers), "nodes": len(plan.nodes),
                         "parameters": sum(p.numel() for p in model.parameters()),
                         "compile": compile_, "autocast": cast}}
    if compile_ in ("script", "trace"):
        ir = str(runnable.inlined_graph)
        what = ("torch.jit.script(model).inlined_graph" if compile_ == "script" else
                "torch.jit.trace(model returning its outputs and every node's capture)"
                ".inlined_graph")
        extra["compiled"] = {"compiler": f"torchscript {torch.__version__}", "what": what,
                             "ir": ir[:IR_MAX], "ir_bytes": len(ir),
                             "truncated": len(ir) > IR_MAX}
    return names, result, extra
