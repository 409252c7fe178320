"""Dynamo's FX graph -> ONNX bytes directly, for the ops smelt knows.

torch.onnx.export traces the graph again (a real forward pass) and runs the
TorchScript ONNX passes: seconds on BERT-base.  This walks the FX graph once
instead.  It takes graphs whose shapes are all static (Dynamo's
``example_value`` metadata gives every node's shape and dtype); a graph with
symbolic dims, or with an op missing from the table below, raises
``Unmapped`` and the caller exports it with torch.onnx.export as before, so
nothing here can give a wrong result by guessing.

Nodes that depend on no real input (position ids, causal masks built with
arange, anything read only from weights and buffers) are evaluated here with
torch, once, and enter the model as constants (a tensor that *is* a frozen
weight is referenced as its bound graph input, never copied).  The rest is
written in the forms torch.onnx.export writes (Linear as MatMul(x,
Transpose(W)), attention as MatMul/Mul/Where/Softmax/MatMul, erf GELU), so
smelt's passes fuse them as they fuse the exporter's graphs.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from . import onnx_write as W

#: ONNX opset the lowered models declare
OPSET = 17


class Unmapped(Exception):
    """The graph holds something this lowering does not take (the message
    says what); the caller falls back to torch.onnx.export."""


class _Val:
    """A value computed by the ONNX graph: its name, torch dtype and shape."""
    __slots__ = ("name", "dtype", "shape")

    def __init__(self, name: str, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, tuple(int(d) for d in shape)


def _np_dtype(dt) -> str:
    import torch
    names = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
             torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
             torch.uint8: "uint8", torch.bool: "bool"}
    if dt not in names:
        raise Unmapped(f"dtype {dt}")
    return names[dt]


_HANDLERS: Dict[str, Callable] = {}


def _op(*names):
    def reg(fn):
        for n in names:
            _HANDLERS[n] = fn
        return fn
    return reg


def _target_name(n) -> str:
    import torch
    t = n.target
    if n.op == "call_method":
        return "." + t
    if t is torch.nn.functional.max_pool2d:
        return "max_pool2d"
    if t is torch.nn.functional.max_pool1d:
        return "max_pool1d"
    return getattr(t, "__name__", str(t))


#: in-place operators (x += y): never evaluated here, a weight could change
_INPLACE = {"iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor",
            "ilshift", "irshift", "imatmul"}

#: ops with an inplace flag (F.relu(x, inplace=True))
_INPLACE_FLAG = {"relu", "hardtanh", "relu6", "hardswish", "hardsigmoid", "silu", "dropout", "dropout1d",
                 "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}

#: ops whose result may be a view of their input (an in-place op on it would
#: change that input too)
_ALIASING = {".view", ".reshape", "reshape", ".flatten", "flatten", ".unsqueeze", "unsqueeze", ".squeeze",
             "squeeze", ".contiguous", ".detach", "detach", ".view_as", ".reshape_as", "dropout", ".to",
             ".type", ".float", ".double", ".long", ".int", ".bool", ".type_as", ".expand", ".expand_as",
             "broadcast_to", ".transpose", "transpose", ".permute", "permute", ".t", "t", ".split", "split",
             ".chunk", "chunk", "getitem", "iadd", "isub", "imul", "itruediv"} | _INPLACE_FLAG

#: targets whose value differs from call to call: never evaluated here
_RANDOM = ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "uniform",
           "rand_like", "randn_like", "randint_like", "empty", "empty_like")


def _raw(t) -> tuple:
    """(shape, little-endian bytes) of a tensor, on the CPU."""
    a = np.ascontiguousarray(t.detach().cpu().numpy())
    return a.shape, a.tobytes()


class Lowering:
    """One FX graph -> ONNX.  ``inputs``: per placeholder, ("in", name) for a
    real input or ("const", name, tensor) for a frozen weight bound by name
    (embed: written into the model as an initializer instead, for a model
    that must stand alone: smelt.compile(..., save=DIR))."""

    def __init__(self, gm, placeholders: List[tuple], embed: bool = False):
        self.gm = gm
        self.ph = placeholders
        self.embed = embed
        self.embedded: set = set()
        self.nodes: List[bytes] = []
        self.inits: List[bytes] = []
        self.inputs: List[bytes] = []
        self.outputs: List[bytes] = []
        self.used_consts: Dict[str, Any] = {}
        self.const_of: Dict[int, str] = {}  # id(tensor) -> bound input name
        self.env: Dict[Any, Any] = {}
        self.n = 0
        self.node = None

    # ---- naming and constants ----
    def fresh(self, hint: str = "v") -> str:
        self.n += 1
        return f"{hint}_{self.n}"

    def emit(self, op: str, inputs: Sequence[str], n_out: int = 1, **attrs) -> List[str]:
        outs = [self.fresh(op.lower()) for _ in range(n_out)]
        self.nodes.append(W.node(op, inputs, outs, name=outs[0], **attrs))
        return outs

    def emit1(self, op: str, inputs: Sequence[str], **attrs) -> str:
        return self.emit(op, inputs, 1, **attrs)[0]

    def const(self, value, dtype=None) -> str:
        """A known tensor or scalar as an ONNX value: the bound input when it
        is a frozen weight itself, else an initializer."""
        import torch
        if isinstance(value, torch.Tensor):
            name = self.const_of.get(id(value))
            if name is not None and (dtype is None or value.dtype == dtype):
                if self.embed:
                    if name not in self.embedded:
                        self.embedded.add(name)
                        shape, raw = _raw(value)
                        self.inits.append(W.tensor(name, _np_dtype(value.dtype), shape, raw))
                    return name
                self.used_consts[name] = value
                return name
            t = value.detach()
            if dtype is not None:
                t = t.to(dtype)
        else:
            if dtype is None:
                raise Unmapped(f"a scalar {value!r} without a dtype")
            t = torch.tensor(value, dtype=dtype)
        shape, raw = _raw(t)
        name = self.fresh("const")
        self.inits.append(W.tensor(name, _np_dtype(t.dtype), shape, raw))
        return name

    def ints(self, xs) -> str:
        import torch
        return self.const(torch.tensor([int(x) for x in xs], dtype=torch.int64))

    def operand(self, a, dtype=None) -> str:
        """An argument (node result or Python scalar) as an ONNX value name,
        cast to dtype when given."""
        v = self.env[a] if _is_node(a) else a
        if isinstance(v, _Val):
            if dtype is not None and v.dtype != dtype:
                return self.emit1("Cast", [v.name], to=W.DTYPES[_np_dtype(dtype)])
            return v.name
        return self.const(v, dtype)

    # ---- the walk ----
    def run(self):
        import torch
        ph_i = 0
        for nd in self.gm.graph.nodes:
            self.node = nd
            if nd.op == "placeholder":
                kind = self.ph[ph_i]
                ph_i += 1
                if kind[0] == "in":
                    t = kind[2]
                    self.env[nd] = _Val(kind[1], t.dtype, t.shape)
                    self.inputs.append(W.value_info(kind[1], _np_dtype(t.dtype), list(t.shape)))
                else:
                    self.env[nd] = kind[2]
                    self.const_of[id(kind[2])] = kind[1]
            elif nd.op in ("call_function", "call_method"):
                self.env[nd] = self.lower_node(nd)
            elif nd.op == "output":
                outs = nd.args[0] if isinstance(nd.args[0], (list, tuple)) else (nd.args[0],)
                for k, o in enumerate(outs):
                    v = self.env.get(o) if _is_node(o) else None
                    if not isinstance(v, (_Val, torch.Tensor)):
                        raise Unmapped(f"output {k} is not a tensor")
                    src = self.operand(o)
                    name = f"out{k}"
                    self.nodes.append(W.node("Identity", [src], [name], name=name))
                    dt = v.dtype
                    self.outputs.append(W.value_info(name, _np_dtype(dt), list(v.shape)))
            else:
                raise Unmapped(f"an FX {nd.op} node ({nd.target})")
        for name, t in self.used_consts.items():
            self.inputs.append(W.value_info(name, _np_dtype(t.dtype), list(t.shape)))
        return W.model(self.nodes, self.inputs, self.outputs, self.inits, [("", OPSET)])

    def lower_node(self, nd):
        import torch
        name = _target_name(nd)
        flat = []
        torch.fx.node.map_arg((nd.args, nd.kwargs), flat.append)
        if all(not isinstance(self.env[a], _Val) for a in flat):
            return self.evaluate(nd, name)
        fn = _HANDLERS.get(name)
        if fn is None:
            raise Unmapped(f"op {name.lstrip('.')} (node {nd.name})")
        if name in _INPLACE_FLAG and (nd.kwargs.get("inplace") or any(a is True for a in nd.args[1:])):
            _inplace_ok(self, nd, nd.args[0])
        ev = nd.meta.get("example_value")
        return fn(self, nd, ev, *nd.args, **nd.kwargs)

    def evaluate(self, nd, name: str):
        """A node that reads no real input: computed now, a constant."""
        import torch
        if name.lstrip(".") in _RANDOM:
            raise Unmapped(f"random op {name.lstrip('.')}")
        if name in _INPLACE or (name.startswith(".") and name.endswith("_") and not name.endswith("__")):
            raise Unmapped(f"in-place {name.lstrip('.')} on a constant")
        args = torch.fx.node.map_arg(nd.args, lambda a: self.env[a])
        kwargs = torch.fx.node.map_arg(nd.kwargs, lambda a: self.env[a])
        with torch.no_grad():
            if nd.op == "call_method":
                return getattr(args[0], nd.target)(*args[1:], **kwargs)
            return nd.target(*args, **kwargs)

    # ---- helpers for handlers ----
    def val(self, a) -> _Val:
        v = self.env[a] if _is_node(a) else None
        if not isinstance(v, _Val):
            raise Unmapped(f"node {self.node.name}: operand {a} is not a computed tensor")
        return v

    def out(self, name: str, ev) -> _Val:
        import torch
        if not isinstance(ev, torch.Tensor):
            raise Unmapped(f"node {self.node.name}: no example value")
        return _Val(name, ev.dtype, ev.shape)

    def meta(self, a):
        """dtype and shape of an argument: a node's example value, or a constant."""
        import torch
        v = self.env[a] if _is_node(a) else a
        if isinstance(v, _Val):
            return v.dtype, v.shape
        if isinstance(v, torch.Tensor):
            return v.dtype, tuple(v.shape)
        return None, ()

    def reshape(self, x: _Val, ev) -> _Val:
        shape = tuple(int(d) for d in ev.shape)
        if shape == x.shape:
            return _Val(x.name, ev.dtype, shape)
        return self.out(self.emit1("Reshape", [x.name, self.ints(shape)]), ev)


def _is_node(a) -> bool:
    import torch
    return isinstance(a, torch.fx.Node)


def _static(ev) -> bool:
    import torch
    if isinstance(ev, torch.Tensor):
        return all(isinstance(d, int) for d in ev.shape)
    if isinstance(ev, (list, tuple)):
        return all(_static(e) for e in ev)
    return isinstance(ev, (int, float, bool)) or ev is None


# ---------------------------------------------------------------- elementwise
_BINARY = {"add": "Add", "iadd": "Add", "sub": "Sub", "isub": "Sub", "mul": "Mul", "imul": "Mul",
           "truediv": "Div", "itruediv": "Div", "div": "Div", ".add": "Add", ".sub": "Sub", ".mul": "Mul",
           ".div": "Div", "pow": "Pow", ".pow": "Pow", "maximum": "Max", "minimum": "Min"}
_COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
            "ne": "Equal", ".eq": "Equal", ".lt": "Less", ".le": "LessOrEqual", ".gt": "Greater",
            ".ge": "GreaterOrEqual", ".ne": "Equal"}
_LOGICAL = {"and_": "And", "or_": "Or", "logical_and": "And", "logical_or": "Or"}


def _compute_dtype(lw: Lowering, a, b):
    """torch's type promotion for a op b."""
    import torch

    def rep(x):
        dt, shape = lw.meta(x)
        if dt is None:
            return lw.env[x] if _is_node(x) else x
        return torch.empty((1,) if len(shape) else (), dtype=dt)
    return torch.result_type(rep(a), rep(b))


def _inplace_ok(lw: Lowering, nd, a):
    """An in-place op (x += y, relu(x, inplace=True)) is its out-of-place
    form when x is a value of its own (not a graph input, not a view of
    another value) that nothing else reads."""
    # every value that may share a's memory (a, and back through views to
    # the value that owns it) must be read by the next one alone
    while _is_node(a):
        if a.op == "placeholder" or len(a.users) > 1:
            raise Unmapped(f"in-place {_target_name(nd).lstrip('.')} on {a.name}, which other nodes "
                           f"read (or a view of it, or a graph input)")
        if a.op not in ("call_function", "call_method") or _target_name(a) not in _ALIASING:
            return
        a = a.args[0] if a.args else None


def _binary(lw: Lowering, nd, ev, a, b, *rest, alpha=1, rounding_mode=None, **kw):
    name = _target_name(nd)
    if rest or kw or alpha != 1 or rounding_mode is not None:
        raise Unmapped(f"{name} with extra arguments")
    if name.startswith("i"):
        _inplace_ok(lw, nd, a)
    ct = ev.dtype if name in ("truediv", "div", ".div", "itruediv") else _compute_dtype(lw, a, b)
    op = _BINARY[name]
    if op == "Pow" and not _is_node(b):  # exponent as a constant of the base's type
        return lw.out(lw.emit1("Pow", [lw.operand(a, ct), lw.const(float(b) if ct.is_floating_point
                                                                    else b, ct)]), ev)
    y = lw.emit1(op, [lw.operand(a, ct), lw.operand(b, ct)])
    if ct != ev.dtype:
        y = lw.emit1("Cast", [y], to=W.DTYPES[_np_dtype(ev.dtype)])
    return lw.out(y, ev)


def _compare(lw: Lowering, nd, ev, a, b):
    ct = _compute_dtype(lw, a, b)
    y = lw.emit1(_COMPARE[_target_name(nd)], [lw.operand(a, ct), lw.operand(b, ct)])
    if _target_name(nd).endswith("ne"):
        y = lw.emit1("Not", [y])
    return lw.out(y, ev)


def _logical(lw: Lowering, nd, ev, a, b):
    import torch
    if ev.dtype != torch.bool:
        raise Unmapped(f"{_target_name(nd)} on {ev.dtype}")
    return lw.out(lw.emit1(_LOGICAL[_target_name(nd)], [lw.operand(a, torch.bool), lw.operand(b, torch.bool)]), ev)


_op(*_BINARY)(_binary)
_op(*_COMPARE)(_compare)
_op(*_LOGICAL)(_logical)

_UNARY = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid", "erf": "Erf", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "cos": "Cos", "sin": "Sin", "reciprocal": "Reciprocal",
          "logical_not": "Not", "floor": "Floor", "ceil": "Ceil"}


@_op(*_UNARY, *("." + k for k in _UNARY))
def _unary(lw: Lowering, nd, ev, x, *rest, inplace=False, **kw):
    if rest and not (len(rest) == 1 and isinstance(rest[0], bool)):  # F.relu(x, inplace)
        raise Unmapped(f"{_target_name(nd)} with extra arguments")
    if kw:
        raise Unmapped(f"{_target_name(nd)} with {sorted(kw)}")
    return lw.out(lw.emit1(_UNARY[_target_name(nd).lstrip(".")], [lw.val(x).name]), ev)


@_op("rsqrt", ".rsqrt")
def _rsqrt(lw, nd, ev, x):
    return lw.out(lw.emit1("Reciprocal", [lw.emit1("Sqrt", [lw.val(x).name])]), ev)


@_op("silu")
def _silu(lw, nd, ev, x, inplace=False):
    xv = lw.val(x).name
    return lw.out(lw.emit1("Mul", [xv, lw.emit1("Sigmoid", [xv])]), ev)


@_op("gelu")
def _gelu(lw, nd, ev, x, approximate="none"):
    xv = lw.val(x)
    dt = xv.dtype
    if approximate == "none":  # torch.onnx.export's form, which smelt fuses into Gelu
        e = lw.emit1("Erf", [lw.emit1("Div", [xv.name, lw.const(math.sqrt(2.0), dt)])])
        y = lw.emit1("Mul", [xv.name, lw.emit1("Add", [e, lw.const(1.0, dt)])])
        return lw.out(lw.emit1("Mul", [y, lw.const(0.5, dt)]), ev)
    if approximate == "tanh":
        c = lw.const
        x3 = lw.emit1("Pow", [xv.name, c(3.0, dt)])
        inner = lw.emit1("Add", [xv.name, lw.emit1("Mul", [x3, c(0.044715, dt)])])
        t = lw.emit1("Tanh", [lw.emit1("Mul", [inner, c(math.sqrt(2.0 / math.pi), dt)])])
        y = lw.emit1("Mul", [lw.emit1("Mul", [xv.name, c(0.5, dt)]), lw.emit1("Add", [t, c(1.0, dt)])])
        return lw.out(y, ev)
    raise Unmapped(f"gelu approximate={approximate!r}")


@_op("hardtanh", "relu6")
def _clip(lw, nd, ev, x, min_val=-1.0, max_val=1.0, inplace=False):
    if _target_name(nd) == "relu6":
        min_val, max_val = 0.0, 6.0
    dt = lw.val(x).dtype
    return lw.out(lw.emit1("Clip", [lw.val(x).name, lw.const(float(min_val), dt), lw.const(float(max_val), dt)]), ev)


@_op("hardswish")
def _hardswish(lw, nd, ev, x, inplace=False):
    return lw.out(lw.emit1("HardSwish", [lw.val(x).name]), ev)


@_op("hardsigmoid")
def _hardsigmoid(lw, nd, ev, x, inplace=False):
    return lw.out(lw.emit1("HardSigmoid", [lw.val(x).name], alpha=1.0 / 6, beta=0.5), ev)


@_op("softmax", ".softmax", "log_softmax", ".log_softmax")
def _softmax(lw, nd, ev, x, dim=None, _stacklevel=3, dtype=None):
    if dim is None or dtype is not None:
        raise Unmapped("softmax without dim or with dtype")
    op = "LogSoftmax" if "log" in _target_name(nd) else "Softmax"
    return lw.out(lw.emit1(op, [lw.val(x).name], axis=int(dim)), ev)


@_op("where")
def _where(lw, nd, ev, cond, a, b):
    import torch
    return lw.out(lw.emit1("Where", [lw.operand(cond, torch.bool), lw.operand(a, ev.dtype),
                                     lw.operand(b, ev.dtype)]), ev)


@_op(".masked_fill")
def _masked_fill(lw, nd, ev, x, mask, value):
    import torch
    return lw.out(lw.emit1("Where", [lw.operand(mask, torch.bool), lw.operand(value, ev.dtype),
                                     lw.operand(x, ev.dtype)]), ev)


# ---------------------------------------------------------------- layout
@_op(".view", ".reshape", "reshape", ".flatten", "flatten", ".unsqueeze", "unsqueeze", ".squeeze",
     "squeeze", ".contiguous", ".clone", "clone", ".detach", "detach", ".view_as", ".reshape_as")
def _reshape(lw, nd, ev, x, *a, **kw):
    # the result is x's elements in C order with ev's shape (memory_format
    # changes strides, not values)
    return lw.reshape(lw.val(x), ev)


@_op(".size", ".dim")
def _size(lw, nd, ev, x, *a):
    shape = lw.val(x).shape
    if _target_name(nd) == ".dim":
        return len(shape)
    return shape[a[0]] if a else torch_size(shape)


def torch_size(shape):
    import torch
    return torch.Size(shape)


@_op("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
def _dropout(lw, nd, ev, x, p=0.5, training=True, inplace=False):
    if training:
        raise Unmapped("dropout with training=True")
    return lw.reshape(lw.val(x), ev)


@_op(".to", ".type", ".float", ".double", ".long", ".int", ".bool", ".type_as")
def _to(lw, nd, ev, x, *a, **kw):
    xv = lw.val(x)
    if ev.dtype == xv.dtype:
        return lw.reshape(xv, ev)
    return lw.out(lw.emit1("Cast", [xv.name], to=W.DTYPES[_np_dtype(ev.dtype)]), ev)


@_op(".expand", ".expand_as", "broadcast_to")
def _expand(lw, nd, ev, x, *a):
    xv = lw.val(x)
    shape = tuple(ev.shape)
    if shape == xv.shape:
        return lw.reshape(xv, ev)
    return lw.out(lw.emit1("Expand", [xv.name, lw.ints(shape)]), ev)


@_op(".transpose", "transpose", ".permute", "permute", ".t", "t")
def _transpose(lw, nd, ev, x, *a, **kw):
    xv = lw.val(x)
    r = len(xv.shape)
    name = _target_name(nd).lstrip(".")
    if name == "transpose":
        d0, d1 = (list(a) + [kw.get("dim0"), kw.get("dim1")])[:2]
        perm = list(range(r))
        d0, d1 = d0 % r, d1 % r
        perm[d0], perm[d1] = perm[d1], perm[d0]
    elif name == "permute":
        dims = a[0] if len(a) == 1 and isinstance(a[0], (list, tuple)) else (a or kw.get("dims"))
        perm = [int(d) % r for d in dims]
    else:
        perm = list(range(r))[::-1]
    if perm == list(range(r)):
        return lw.reshape(xv, ev)
    return lw.out(lw.emit1("Transpose", [xv.name], perm=perm), ev)


@_op(".split", "split", ".chunk", "chunk")
def _split(lw, nd, ev, x, *a, dim=0, **kw):
    xv = lw.val(x)
    if len(a) > 1:
        dim = a[1]
    if not isinstance(ev, (list, tuple)):
        raise Unmapped("split without example values")
    r = len(xv.shape)
    dim = int(dim) % r
    sizes = [int(e.shape[dim]) for e in ev]
    names = lw.emit("Split", [xv.name, lw.ints(sizes)], len(sizes), axis=dim)
    return [_Val(nm, e.dtype, e.shape) for nm, e in zip(names, ev)]


@_op("cat", "concat")
def _cat(lw, nd, ev, xs, dim=0):
    r = len(ev.shape)
    # torch.cat skips 1-D tensors of no elements whatever the others' rank (a
    # legacy rule Hugging Face's DynamicCache relies on: a layer's empty cache
    # is torch.tensor([]), concatenated with the first step's keys); ONNX
    # Concat takes one rank only, so they are dropped here
    if r > 1:
        xs = [x for x in xs if tuple(lw.meta(x)[1]) != (0,)]
    return lw.out(lw.emit1("Concat", [lw.operand(x, ev.dtype) for x in xs], axis=int(dim) % r), ev)


@_op("getitem")
def _getitem(lw, nd, ev, x, idx):
    import torch
    v = lw.env[x] if _is_node(x) else x
    if isinstance(v, (list, tuple)):
        return v[idx]
    xv = lw.val(x)
    items = idx if isinstance(idx, tuple) else (idx,)
    if items and all(_is_node(i) and isinstance(lw.env[i], torch.Tensor) for i in items):
        return _gather_index(lw, ev, xv, [lw.env[i] for i in items])
    starts, ends, axes, steps = [], [], [], []
    d = 0
    n_real = sum(1 for i in items if i is not None and i is not Ellipsis)
    for it in items:
        if it is None:
            continue
        if it is Ellipsis:
            d += len(xv.shape) - n_real
            continue
        if isinstance(it, slice):
            st = 1 if it.step is None else it.step
            if not all(isinstance(s, (int, type(None))) for s in (it.start, it.stop, it.step)) or st <= 0:
                raise Unmapped("getitem with a slice of non-constant or negative step")
            b, e, st = it.indices(xv.shape[d])
            if (b, e, st) != (0, xv.shape[d], 1):
                starts.append(b), ends.append(e), axes.append(d), steps.append(st)
        elif isinstance(it, int):
            i = it % xv.shape[d]
            starts.append(i), ends.append(i + 1), axes.append(d), steps.append(1)
        else:
            raise Unmapped(f"getitem with an index of type {type(it).__name__}")
        d += 1
    y = xv
    if axes:
        name = lw.emit1("Slice", [xv.name, lw.ints(starts), lw.ints(ends), lw.ints(axes), lw.ints(steps)])
        y = _Val(name, xv.dtype, [0])
    return lw.reshape(y, ev)


def _gather_index(lw, ev, xv: _Val, idx):
    """x[i0, i1, ...] with known integer index tensors on x's leading dims:
    one Gather over the flattened leading dims."""
    import torch
    if any(t.dtype not in (torch.int64, torch.int32) for t in idx) or len(idx) > len(xv.shape):
        raise Unmapped("getitem with non-integer index tensors")
    k = len(idx)
    lead = xv.shape[:k]
    flat = torch.zeros((), dtype=torch.int64)
    for j, t in enumerate(idx):
        stride = int(np.prod(lead[j + 1:], dtype=np.int64)) if j + 1 < k else 1
        flat = flat + (t.to(torch.int64) % lead[j]) * stride
    src = xv.name
    if k != 1:
        src = lw.emit1("Reshape", [xv.name, lw.ints((int(np.prod(lead)),) + tuple(xv.shape[k:]))])
    return lw.out(lw.emit1("Gather", [src, lw.const(flat.contiguous())], axis=0), ev)


# ---------------------------------------------------------------- matmul family
@_op("linear")
def _linear(lw, nd, ev, x, w, b=None):
    xv = lw.val(x)
    wt = lw.emit1("Transpose", [lw.operand(w)], perm=[1, 0])
    y = lw.emit1("MatMul", [xv.name, wt])
    if b is not None:
        y = lw.emit1("Add", [y, lw.operand(b)])
    return lw.out(y, ev)


@_op("addmm")
def _addmm(lw, nd, ev, b, x, w, beta=1, alpha=1):
    if beta != 1 or alpha != 1:
        raise Unmapped("addmm with beta or alpha")
    return lw.out(lw.emit1("Gemm", [lw.operand(x), lw.operand(w), lw.operand(b)]), ev)


@_op("matmul", "mm", "bmm", ".matmul", "matmul_")
def _matmul(lw, nd, ev, a, b):
    return lw.out(lw.emit1("MatMul", [lw.operand(a), lw.operand(b)]), ev)


@_op("scaled_dot_product_attention")
def _sdpa(lw, nd, ev, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch.onnx.export's form (smelt's fuse_attention matches it).  With
    enable_gqa (Llama, Qwen2, Mistral: fewer key/value heads than query
    heads), each key/value head is repeated for its group of query heads,
    as torch does (repeat_interleave along the heads) and as Hugging Face's
    own repeat_kv writes it: Unsqueeze, Expand, Reshape."""
    import torch
    if dropout_p != 0.0:
        raise Unmapped("scaled_dot_product_attention with dropout")
    qv, kv = lw.val(q), lw.val(k)
    vname = lw.operand(v)
    if enable_gqa and len(qv.shape) >= 3 and qv.shape[-3] != kv.shape[-3]:
        hq, hk = int(qv.shape[-3]), int(kv.shape[-3])
        if hk < 1 or hq % hk:
            raise Unmapped(f"scaled_dot_product_attention with enable_gqa: {hq} query heads, {hk} key heads")
        kv = _Val(_repeat_heads(lw, kv, hq // hk), kv.dtype, tuple(kv.shape[:-3]) + (hq,) + tuple(kv.shape[-2:]))
        vname = _repeat_heads(lw, lw.val(v), hq // hk)
    dt = qv.dtype
    if scale is None:
        scale = 1.0 / math.sqrt(qv.shape[-1])
    mask, add = attn_mask, None
    if is_causal:
        if mask is not None:
            raise Unmapped("scaled_dot_product_attention with a mask and is_causal")
        L, S = qv.shape[-2], kv.shape[-2]
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        mdt, _ = lw.meta(mask)
        if mdt == torch.bool:
            add = lw.emit1("Where", [lw.operand(mask), lw.const(0.0, dt), lw.const(float("-inf"), dt)])
        else:
            add = lw.operand(mask, dt)
    _, out = _attend(lw, qv.name, kv.name, vname, len(kv.shape), scale, dt, add)
    return lw.out(out, ev)


def _attend(lw, q: str, k: str, v: str, rank: int, scale: float, dt, add: Optional[str] = None) -> tuple:
    """(probabilities, output) of softmax(q k^T scale + add) v, in
    torch.onnx.export's form, which smelt's fuse_attention matches: the
    scale's square root on q and on k^T; with a mask (add), rows masked
    entirely give zeros, as torch does."""
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    kt = lw.emit1("Transpose", [k], perm=perm)
    s = math.sqrt(scale)
    qs = lw.emit1("Mul", [q, lw.const(s, dt)])
    ks = lw.emit1("Mul", [kt, lw.const(s, dt)])
    scores = lw.emit1("MatMul", [qs, ks])
    if add is not None:
        scores = lw.emit1("Add", [scores, add])
    p = lw.emit1("Softmax", [scores], axis=-1)
    if add is not None:
        p = lw.emit1("Where", [lw.emit1("IsNaN", [p]), lw.const(0.0, dt), p])
    return p, lw.emit1("MatMul", [p, v])


@_op("multi_head_attention_forward")
def _mha(lw, nd, ev, query, key, value, embed_dim, num_heads, in_w, in_b, bias_k, bias_v, add_zero_attn,
         dropout_p, out_w, out_b, training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
         use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None, v_proj_weight=None,
         static_k=None, static_v=None, average_attn_weights=True, is_causal=False):
    """nn.MultiheadAttention's self-attention (torchvision's ViT, most
    hand-written transformer blocks): one packed in-projection, the
    attention in torch.onnx.export's form (which fuse_attention matches),
    the out-projection; the heads' weights too when asked for.  Masks,
    separate projections, bias_k/v, cross attention: not lowered."""
    if (bias_k is not None or bias_v is not None or add_zero_attn or (training and dropout_p) or
            key_padding_mask is not None or attn_mask is not None or use_separate_proj_weight or
            static_k is not None or static_v is not None or is_causal or in_w is None):
        raise Unmapped("multi_head_attention_forward with a mask, separate projections or bias_k/v")
    if query is not key or key is not value:
        raise Unmapped("multi_head_attention_forward across two inputs")
    xv = lw.val(query)
    if len(xv.shape) != 3 or not isinstance(ev, (list, tuple)) or len(ev) != 2:
        raise Unmapped("multi_head_attention_forward on an unbatched input")
    L, N, E = (int(d) for d in xv.shape)
    H = int(num_heads)
    if E != int(embed_dim) or E % H:
        raise Unmapped("multi_head_attention_forward: embed_dim not a multiple of the heads")
    hd = E // H
    y = lw.emit1("MatMul", [xv.name, lw.emit1("Transpose", [lw.operand(in_w)], perm=[1, 0])])
    if in_b is not None:
        y = lw.emit1("Add", [y, lw.operand(in_b)])
    q, k, v = lw.emit("Split", [y, lw.ints([E, E, E])], 3, axis=-1)

    def heads(t):  # (L, N, E) -> (N, H, L, hd)
        return lw.emit1("Transpose", [lw.emit1("Reshape", [t, lw.ints([L, N, H, hd])])], perm=[1, 2, 0, 3])

    p, o = _attend(lw, heads(q), heads(k), heads(v), 4, 1.0 / math.sqrt(hd), xv.dtype)  # o: (N, H, L, hd)
    o = lw.emit1("Reshape", [lw.emit1("Transpose", [o], perm=[2, 0, 1, 3]), lw.ints([L, N, E])])
    out = lw.emit1("MatMul", [o, lw.emit1("Transpose", [lw.operand(out_w)], perm=[1, 0])])
    if out_b is not None:
        out = lw.emit1("Add", [out, lw.operand(out_b)])
    weights = None
    if need_weights:  # (N, H, L, L), or its mean over the heads
        w = lw.emit1("ReduceMean", [p], axes=[1], keepdims=0) if average_attn_weights else p
        weights = lw.out(w, ev[1])
    return [lw.out(out, ev[0]), weights]


def _repeat_heads(lw, xv, g: int) -> str:
    """[..., H, S, D] -> [..., H*g, S, D], each head g times in a row."""
    shape = [int(d) for d in xv.shape]
    r = len(shape)
    u = lw.emit1("Unsqueeze", [xv.name, lw.ints([r - 2])])  # [..., H, 1, S, D]
    e = lw.emit1("Expand", [u, lw.ints(shape[:-2] + [g] + shape[-2:])])
    return lw.emit1("Reshape", [e, lw.ints(shape[:-3] + [shape[-3] * g] + shape[-2:])])


# ---------------------------------------------------------------- normalization, embedding
@_op("layer_norm")
def _layer_norm(lw, nd, ev, x, shape, weight=None, bias=None, eps=1e-5):
    import torch
    xv = lw.val(x)
    n = len(shape)
    ones = weight if weight is not None else torch.ones(tuple(shape), dtype=xv.dtype)
    zeros = bias if bias is not None else torch.zeros(tuple(shape), dtype=xv.dtype)
    return lw.out(lw.emit1("LayerNormalization", [xv.name, lw.operand(ones), lw.operand(zeros)],
                           axis=-n, epsilon=float(eps)), ev)


@_op("embedding")
def _embedding(lw, nd, ev, ids, w, padding_idx=None, max_norm=None, *rest):
    if max_norm is not None:
        raise Unmapped("embedding with max_norm")
    return lw.out(lw.emit1("Gather", [lw.operand(w), lw.operand(ids)], axis=0), ev)


@_op("batch_norm")
def _batch_norm(lw, nd, ev, x, mean, var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    import torch
    if training:
        raise Unmapped("batch_norm with training=True")
    xv = lw.val(x)
    c = xv.shape[1]
    w = weight if weight is not None else torch.ones(c, dtype=xv.dtype)
    b = bias if bias is not None else torch.zeros(c, dtype=xv.dtype)
    return lw.out(lw.emit1("BatchNormalization", [xv.name, lw.operand(w), lw.operand(b), lw.operand(mean),
                                                  lw.operand(var)], epsilon=float(eps)), ev)


# ---------------------------------------------------------------- convolution, pooling
def _pair(v, n):
    return [int(x) for x in v] if isinstance(v, (list, tuple)) else [int(v)] * n


@_op("conv2d", "conv1d")
def _conv(lw, nd, ev, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    n = 2 if _target_name(nd) == "conv2d" else 1
    if isinstance(padding, str):
        if padding != "valid":
            raise Unmapped(f"conv padding={padding!r}")
        padding = 0
    p = _pair(padding, n)
    ins = [lw.val(x).name, lw.operand(w)] + ([lw.operand(b)] if b is not None else [])
    _, wshape = lw.meta(w)
    return lw.out(lw.emit1("Conv", ins, strides=_pair(stride, n), pads=p + p, dilations=_pair(dilation, n),
                           group=int(groups), kernel_shape=[int(s) for s in wshape[2:]]), ev)


@_op("max_pool2d")
def _max_pool(lw, nd, ev, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
              return_indices=False):
    if return_indices:
        raise Unmapped("max_pool2d with return_indices")
    k = _pair(kernel_size, 2)
    s = _pair(stride if stride not in (None, [], ()) else kernel_size, 2)
    p = _pair(padding, 2)
    return lw.out(lw.emit1("MaxPool", [lw.val(x).name], kernel_shape=k, strides=s, pads=p + p,
                           dilations=_pair(dilation, 2), ceil_mode=int(bool(ceil_mode))), ev)


@_op("avg_pool2d")
def _avg_pool(lw, nd, ev, x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    if divisor_override is not None:
        raise Unmapped("avg_pool2d with divisor_override")
    k = _pair(kernel_size, 2)
    s = _pair(stride if stride not in (None, [], ()) else kernel_size, 2)
    p = _pair(padding, 2)
    return lw.out(lw.emit1("AveragePool", [lw.val(x).name], kernel_shape=k, strides=s, pads=p + p,
                           ceil_mode=int(bool(ceil_mode)), count_include_pad=int(bool(count_include_pad))), ev)


@_op("adaptive_avg_pool2d")
def _adaptive_avg(lw, nd, ev, x, output_size):
    xv = lw.val(x)
    h, w = xv.shape[-2:]
    oh, ow = ev.shape[-2:]
    if (oh, ow) == (1, 1):
        return lw.out(lw.emit1("GlobalAveragePool", [xv.name]), ev)
    if h % oh or w % ow:
        raise Unmapped("adaptive_avg_pool2d with a size that does not divide the input")
    k = [h // oh, w // ow]
    return lw.out(lw.emit1("AveragePool", [xv.name], kernel_shape=k, strides=k), ev)


# ---------------------------------------------------------------- reductions
@_op(".mean", "mean", ".sum", "sum")
def _reduce(lw, nd, ev, x, dim=None, keepdim=False, dtype=None, **kw):
    xv = lw.val(x)
    if dtype is not None or kw or dim is None:
        raise Unmapped(f"{_target_name(nd)} without dims or with dtype")
    r = len(xv.shape)
    dims = [int(d) % r for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    if "mean" in _target_name(nd):
        y = lw.emit1("ReduceMean", [xv.name], axes=dims, keepdims=int(bool(keepdim)))
    else:
        y = lw.emit1("ReduceSum", [xv.name, lw.ints(dims)], keepdims=int(bool(keepdim)))
    return lw.out(y, ev)


def inplace_hazard(gm) -> Optional[str]:
    """Why gm's in-place ops cannot be read as out-of-place ones (a value
    changed in place is read elsewhere, or is a graph input or a view of
    one), or None.  Neither this lowering nor torch.onnx.export keeps such
    aliasing, so such a graph goes to the fallback path."""
    for nd in gm.graph.nodes:
        if nd.op not in ("call_function", "call_method") or not nd.args:
            continue
        name = _target_name(nd)
        flagged = name in _INPLACE_FLAG and (nd.kwargs.get("inplace") or any(a is True for a in nd.args[1:]))
        method = name.startswith(".") and name.endswith("_") and not name.endswith("__")
        if name in _INPLACE or flagged or method:
            try:
                _inplace_ok(None, nd, nd.args[0])
            except Unmapped as e:
                return str(e)
    return None


def lower(gm, placeholders: List[tuple], embed: bool = False) -> tuple:
    """(ONNX bytes, {bound input name: tensor} the model reads; empty with
    embed, where the weights are initializers in the bytes).  Raises
    Unmapped when the graph holds something not lowered here."""
    import torch
    for nd in gm.graph.nodes:
        if nd.op in ("call_function", "call_method", "placeholder"):
            ev = nd.meta.get("example_value")
            if nd.op != "placeholder" and isinstance(ev, (torch.Tensor, list, tuple)) and not _static(ev):
                raise Unmapped(f"node {nd.name} has a symbolic shape")
    lw = Lowering(gm, placeholders, embed)
    onnx = lw.run()
    return onnx, lw.used_consts

