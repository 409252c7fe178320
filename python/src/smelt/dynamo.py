"""torch.compile(model, backend="smelt", options={...}).

Registered by the entry point ``torch_dynamo_backends: smelt`` (pyproject.toml),
so it works without importing smelt first.  Each FX graph Dynamo hands over
(one per piece between graph breaks) is written as ONNX in memory -- lowered
directly by smelt.fx_lower when its shapes are static and its ops are in
that table, else by torch.onnx.export -- with the parameters and buffers
Dynamo passes as static inputs frozen into the model as weights, and run by
a smelt Session on the live tensors.  Dims Dynamo marks
dynamic become symbolic ONNX dims (smelt compiles one specialization per new
shape, see recompile_limit and buckets).

A graph smelt cannot take (export or session creation fails, an output that
is not a tensor) runs on the fallback path with one warning naming the
reason; so does a training-mode graph (dropout or batch norm with
training=True, or an op that updates a graph input in place, such as
BatchNorm's running statistics).

Grad enabled with inputs that require grad (an eval-mode model whose weights
require grad, as after ``model.eval()``): the forward runs on smelt and the
outputs carry autograd history through a function whose backward recomputes
the graph eagerly, so ``.backward()`` gives PyTorch's own gradients.

Weights are frozen into the smelt model when the graph is compiled.  Each
call checks their version counters: once a weight has been changed in place
(an optimizer step, ``weight.copy_(...)`` under no_grad), the graph moves to
the fallback path for good, with one warning, instead of using stale weights.

options (all optional):
    mode: "default" | "reduce-overhead" | "max-autotune" | "eager"  (default "default")
    precision: "fp32", "bf16", "int8" or "int4" (README: Precision; others raise smelt.UnsupportedError)
    threads: worker threads (default: the machine's cores)
    cache_dir: compiled-kernel cache folder
    fallback: "inductor" (default) or "eager": what runs graphs smelt does not take
    buckets, recompile_limit: as smelt.Session
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _smelt
from .errors import UnsupportedError
from .session import PRECISIONS, Session

_KNOWN = {"mode", "precision", "threads", "cache_dir", "fallback", "buckets", "recompile_limit"}


class SmeltFallbackWarning(UserWarning):
    """A graph torch.compile(backend="smelt") handed to the fallback path."""


def _fallback(gm, example_inputs, how: str, reason: str) -> Callable:
    warnings.warn(f"smelt: this graph runs on {how}, not smelt: {reason}", SmeltFallbackWarning,
                  stacklevel=3)
    if how == "inductor":
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)
    return gm.forward


def _is_static(x) -> bool:
    import torch
    return isinstance(x, torch.nn.Parameter) or getattr(x, "_dynamo_static_input_type", None) is not None


class _Frozen:
    """Builds the module that is exported: gm with static inputs frozen as
    buffers, SymInt inputs read from the tensor dims they stand for."""

    def __init__(self, gm, example_inputs, bind: bool = False):
        import torch
        self.gm = gm
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.kinds: List[Any] = []  # ("in", j) | ("const", name) | ("dim", j, axis)
        self.tensor_idx: List[int] = []
        self.dynamic_axes: Dict[str, Dict[int, str]] = {}
        consts = {}
        sym_of: Dict[str, tuple] = {}
        # tensor inputs first, so every SymInt can be matched to a dim
        for i, x in enumerate(example_inputs):
            if isinstance(x, torch.Tensor) and not _is_static(x):
                j = len(self.tensor_idx)
                self.tensor_idx.append(i)
                ev = placeholders[i].meta.get("example_value") if i < len(placeholders) else None
                for axis, d in enumerate(getattr(ev, "shape", ())):
                    if not isinstance(d, int):
                        name = str(d)
                        sym_of.setdefault(name, (j, axis))
                        self.dynamic_axes.setdefault(f"in{j}", {})[axis] = name.replace(" ", "")
        for i, x in enumerate(example_inputs):
            if isinstance(x, torch.Tensor):
                if _is_static(x):
                    name = f"c{len(consts)}"
                    consts[name] = x.detach()
                    self.kinds.append(("const", name))
                else:
                    self.kinds.append(("in", self.tensor_idx.index(i)))
            elif isinstance(x, torch.SymInt) or isinstance(x, int):
                where = sym_of.get(str(x)) if isinstance(x, torch.SymInt) else None
                if where is None:
                    raise UnsupportedError(f"graph input {i} is a scalar ({x}) that is not an input dim", 3)
                self.kinds.append(("dim",) + where)
            else:
                raise UnsupportedError(f"graph input {i} is a {type(x).__name__}, not a tensor", 3)
        kinds = self.kinds
        # bind: the static inputs stay inputs of the export, after the real
        # ones, and smelt gets them as bound constants (Session(consts=)):
        # nothing serialises the weights.  Else they are frozen as buffers
        # and travel in the ONNX bytes as initializers.
        self.consts = consts if bind else {}
        self.all_consts = consts  # bound or not
        n_real = len(self.tensor_idx)
        const_pos = {k: n_real + i for i, k in enumerate(consts)}

        class Mod(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gm = gm
                if not bind:
                    for k, v in consts.items():
                        self.register_buffer(k, v)

            def forward(self, *xs):
                args = []
                for k in kinds:
                    if k[0] == "in":
                        args.append(xs[k[1]])
                    elif k[0] == "const":
                        args.append(xs[const_pos[k[1]]] if bind else getattr(self, k[1]))
                    else:
                        args.append(xs[k[1]].shape[k[2]])
                out = self.gm(*args)
                return tuple(out) if isinstance(out, (list, tuple)) else (out,)

        self.module = Mod()


def _bfloat16(example_inputs) -> Optional[str]:
    """Why a graph of bfloat16 tensors cannot run on smelt from torch, or None."""
    import torch
    if any(isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 for x in example_inputs):
        return ("bfloat16 tensors: smelt's Python API does not exchange bfloat16 with torch yet "
                "(a model in float32 or float16 runs on smelt)")
    return None


def _refusal(gm, example_inputs) -> Optional[str]:
    """Why smelt does not take gm at all (the graph runs on the fallback),
    or None: a training-mode graph, outputs that are not tensors, an
    in-place op on a value read elsewhere, bfloat16 tensors.  For the back
    end and smelt.compile alike."""
    from .fx_lower import inplace_hazard
    return _training_mode(gm) or _outputs_are_tensors(gm) or inplace_hazard(gm) or _bfloat16(example_inputs)


def _bindable(example_inputs) -> bool:
    """Whether every static input (weight) can be handed to smelt in place:
    a CPU tensor of a dtype NumPy can view (not bfloat16)."""
    import torch
    return all(x.device.type == "cpu" and x.dtype != torch.bfloat16
               for x in example_inputs if isinstance(x, torch.Tensor) and _is_static(x))


_TRAINING_FNS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
                 "feature_dropout", "batch_norm", "instance_norm", "rrelu"}


def _training_mode(gm) -> Optional[str]:
    """Why gm is a training-mode graph (smelt's export would freeze it into
    inference semantics), or None."""
    import inspect
    for n in gm.graph.nodes:
        if n.op == "call_method" and isinstance(n.target, str) and n.target.endswith("_") \
                and not n.target.endswith("__") and n.args and getattr(n.args[0], "op", None) == "placeholder":
            return f"a training-mode graph: {n.target} updates graph input {n.args[0].name} in place"
        if n.op != "call_function":
            continue
        name = getattr(n.target, "__name__", "")
        if name not in _TRAINING_FNS:
            continue
        try:
            bound = inspect.signature(n.target).bind(*n.args, **n.kwargs)
        except (TypeError, ValueError):  # a builtin (torch.dropout(x, p, train)): read the flag by place
            if name.endswith("dropout") and len(n.args) >= 3 and n.args[2] is True:
                return f"a training-mode graph: {name} with train=True"
            continue
        bound.apply_defaults()
        if bound.arguments.get("training") is True or bound.arguments.get("use_input_stats") is True:
            return f"a training-mode graph: {name} with training=True"
    return None


def _outputs_are_tensors(gm) -> Optional[str]:
    import torch
    for n in gm.graph.nodes:
        if n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (list, tuple)) else (n.args[0],)
            for k, o in enumerate(outs):
                ev = o.meta.get("example_value") if hasattr(o, "meta") else None
                if not isinstance(ev, torch.Tensor):
                    return f"output {k} is not a tensor"
    return None


def _to_onnx(gm, example_inputs, frozen: _Frozen, real, in_names: List[str], out_names: List[str],
             embed: bool = False):
    """(ONNX bytes, consts to bind or None, how it was made).  Graphs of
    static shapes whose weights are bound (or, with embed, written into the
    model) go through smelt.fx_lower (the FX graph written as ONNX
    directly, ~100x faster than re-tracing it); the rest, and any graph
    holding an op fx_lower does not map, through torch.onnx.export.
    in_names: per real input (frozen.tensor_idx order), its ONNX name."""
    why = "symbolic dims" if frozen.dynamic_axes or any(k[0] == "dim" for k in frozen.kinds) else \
        "weights not bound" if not embed and not frozen.consts and any(k[0] == "const" for k in frozen.kinds) \
        else None
    if why is None:
        from .fx_lower import Unmapped, lower
        ph = [("in", in_names[k[1]], example_inputs[frozen.tensor_idx[k[1]]]) if k[0] == "in"
              else ("const", k[1], frozen.all_consts[k[1]]) for k in frozen.kinds]
        try:
            onnx, used = lower(gm, ph, embed=embed and not frozen.consts)
            return onnx, used or None, "fx"
        except Unmapped as e:
            why = str(e)
        except Exception as e:  # a bug here must not cost the graph smelt: the exporter takes it
            why = f"fx_lower failed: {type(e).__name__}: {str(e)[:200]}"
    const_names = list(frozen.consts)
    from .export import expand_gqa, export_bytes
    expand_gqa(gm)  # the exporter cannot write enable_gqa
    try:
        onnx = export_bytes(frozen.module, real + [frozen.consts[k] for k in const_names],
                            in_names + const_names, out_names, frozen.dynamic_axes)
    except Exception as e:  # the exporter's message names the op
        raise UnsupportedError(f"ONNX export failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}", 3)
    consts = None
    if const_names:  # the exporter drops the inputs nothing reads
        present = set(_smelt.model_input_names(onnx))
        consts = {k: frozen.consts[k] for k in const_names if k in present}
    return onnx, consts, f"torch.onnx.export: {why}"


def smelt_backend(gm, example_inputs: Sequence[Any], options: Optional[Dict[str, Any]] = None,
                  **kwargs) -> Callable:
    """The torch.compile back end (see the module docstring for options)."""
    import torch
    opts = dict(options or {})
    opts.update(kwargs)
    unknown = set(opts) - _KNOWN
    if unknown:
        raise UnsupportedError(f"torch.compile(backend='smelt'): unknown option(s) {sorted(unknown)}; "
                               f"known: {sorted(_KNOWN)}", 3)
    precision = opts.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise UnsupportedError(f"precision {precision!r}: smelt implements only {', '.join(PRECISIONS)} today", 3)
    how = opts.get("fallback", "inductor")
    if how not in ("inductor", "eager"):
        raise UnsupportedError(f"fallback {how!r}: expected 'inductor' or 'eager'", 3)

    why = _refusal(gm, example_inputs)
    if why:
        return _fallback(gm, example_inputs, how, why)
    try:
        frozen = _Frozen(gm, example_inputs, bind=_bindable(example_inputs))
        real = [example_inputs[i] for i in frozen.tensor_idx]
        n_out = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])
        in_names = [f"in{j}" for j in range(len(real))]
        out_names = [f"out{k}" for k in range(n_out)]
        onnx, consts, lowering = _to_onnx(gm, example_inputs, frozen, real, in_names, out_names)
        sess = Session(onnx, mode=opts.get("mode", "default"), threads=opts.get("threads"),
                       precision=precision, cache_dir=opts.get("cache_dir"),
                       buckets=opts.get("buckets"), recompile_limit=opts.get("recompile_limit"),
                       consts=consts)
        if len(sess.output_names) != n_out:
            raise UnsupportedError(f"the exported model has {len(sess.output_names)} outputs, "
                                   f"the graph {n_out}", 3)
    except Exception as e:
        return _fallback(gm, example_inputs, how, str(e))

    idx = frozen.tensor_idx
    names = [n for n in in_names if n in set(sess.input_names)]  # the exporter drops unused inputs
    pick = [idx[int(n[2:])] for n in names]
    run, run_arrays = sess._s.run, sess._s.run_arrays
    from_numpy = torch.from_numpy
    import numpy as np
    # the weights frozen into the model, with their version counters now
    frozen_weights = [(x, x._version) for x in example_inputs if isinstance(x, torch.Tensor) and _is_static(x)]
    fallback: Optional[Callable] = None  # set for good once a frozen weight has changed

    def smelt_forward(args):
        arrays = []
        for i in pick:
            t = args[i]
            if t.requires_grad:
                t = t.detach()
            if not t.is_contiguous():
                t = t.contiguous()
            arrays.append(t.numpy())
        outs = run_arrays(arrays, names)  # NumPy's C API path; NotImplemented: the buffer path
        if outs is NotImplemented:
            outs = [np.asarray(b) for b in run(arrays, names)]
        return [from_numpy(o) for o in outs]

    def weights_changed() -> bool:
        for w, v in frozen_weights:
            if w._version != v:
                return True
        return False

    def call(*args):
        nonlocal fallback
        if fallback is None and weights_changed():
            fallback = _fallback(gm, example_inputs, how,
                                 "a weight frozen into the smelt model was changed in place "
                                 "(an optimizer step?); smelt would use the old values")
        if fallback is not None:
            return fallback(*args)
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return list(_grad_fn().apply(gm, smelt_forward, len(args), *args))
        return smelt_forward(args)

    call.smelt_session = sess  # for tests and diagnostics
    call.smelt_lowering = lowering  # "fx" or "torch.onnx.export: <why the FX lowering did not take it>"
    return call


@functools.lru_cache(maxsize=None)
def _grad_fn():
    """The autograd Function, made once (torch is imported lazily)."""
    import torch

    class SmeltGrad(torch.autograd.Function):
        """Outputs from smelt, gradients from an eager recompute of the graph."""

        @staticmethod
        def forward(ctx, gm, fwd, n, *args):
            ctx.gm = gm
            ctx.n = n
            ctx.tensor_at = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
            ctx.others = {k: a for k, a in enumerate(args) if not isinstance(a, torch.Tensor)}
            ctx.save_for_backward(*[args[k] for k in ctx.tensor_at])
            outs = fwd(args)
            ctx.mark_non_differentiable(*[o for o in outs if not o.is_floating_point()])
            return tuple(outs)

        @staticmethod
        def backward(ctx, *grads):
            saved = ctx.saved_tensors
            args: List[Any] = [None] * ctx.n
            for k, v in ctx.others.items():
                args[k] = v
            wrt = []
            for k, t in zip(ctx.tensor_at, saved):
                d = t.detach().requires_grad_(t.requires_grad)
                args[k] = d
                if t.requires_grad:
                    wrt.append((k, d))
            with torch.enable_grad():
                outs = ctx.gm(*args)
            outs = outs if isinstance(outs, (list, tuple)) else (outs,)
            pairs = [(o, g) for o, g in zip(outs, grads)
                     if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
            got = torch.autograd.grad([o for o, _ in pairs], [d for _, d in wrt], [g for _, g in pairs],
                                      allow_unused=True) if pairs and wrt else [None] * len(wrt)
            result: List[Any] = [None] * ctx.n
            for (k, _), g in zip(wrt, got):
                result[k] = g
            return (None, None, None, *result)

    return SmeltGrad
