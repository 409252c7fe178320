"""smelt.compile: the ahead-of-time path.  The module is captured once with
the example inputs, a smelt Session is built, and a callable comes back;
``save=DIR`` keeps the artifact (DIR/model.onnx and the compiled kernels in
DIR/cache) for smelt.load(DIR) in a later process.

Capture: Dynamo takes the whole forward (fullgraph) and smelt.fx_lower
writes its FX graph as ONNX, as the torch.compile back end does -- the
Python around the tensors (a Hugging Face model's mask and cache set-up)
runs once, at capture, so none of it has to be exportable; the result is
checked against the module's own output on the example inputs.  With
dynamic_axes, or when that capture fails or disagrees, torch.onnx.export
traces the module instead (Compiled.capture says which and why)."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Optional, Sequence, Union

from .errors import InvalidArgumentError
from .session import Session


class Compiled:
    """A module compiled by smelt: call it like the module (positional tensors
    or arrays, in the order of example_inputs)."""

    def __init__(self, session: Session, spec: Any = None, path: Optional[pathlib.Path] = None,
                 leaves: Optional[list] = None, capture: str = "torch.onnx.export"):
        self.session = session
        self.path = path
        self._spec = spec
        self._leaves = leaves  # the output's leaves, None where a session output goes
        self.capture = capture  # "dynamo" or "torch.onnx.export: <why>"
        # inputs by name: a capture drops the arguments nothing reads
        self._in = [int(n[2:]) for n in session.input_names]

    def __call__(self, *args: Any) -> Any:
        outs = self.session.run({f"in{i}": args[i] for i in self._in})
        if self._leaves is not None:
            it = iter(outs)
            outs = [next(it) if leaf is None else leaf for leaf in self._leaves]
        if self._spec is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        from torch.utils._pytree import tree_unflatten
        return tree_unflatten(outs, self._spec)

    @property
    def stats(self) -> Dict[str, Any]:
        return self.session.stats


def compile(module, example_inputs: Union[Sequence[Any], Any], *, mode: str = "default",
            threads: Optional[int] = None, precision: str = "fp32",
            dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None,
            save: Union[None, str, os.PathLike] = None,
            cache_dir: Union[None, str, os.PathLike] = None) -> Compiled:
    """Compiles a torch.nn.Module for the given example inputs.

    Args:
        module: the torch module (put it in eval() first).
        example_inputs: a tensor or a tuple of tensors, as module(*example_inputs).
        mode, threads, precision, cache_dir: as smelt.Session.
        dynamic_axes: {"in0": {0: "batch"}}: dims left symbolic (inputs are
            named in0, in1, ... in order).
        save: a folder: writes save/model.onnx and keeps the compiled kernels in
            save/cache (reload with smelt.load(save)).
    """
    import torch
    from torch.utils._pytree import tree_flatten

    from .export import export_bytes
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    if not all(isinstance(a, torch.Tensor) for a in args):
        raise InvalidArgumentError("smelt.compile: example_inputs must be tensors", 1)
    with torch.no_grad():
        ref = module(*args)
    flat, spec = tree_flatten(ref)
    spec = None if isinstance(ref, torch.Tensor) else spec
    path = None
    if save is not None:
        path = pathlib.Path(save)
        path.mkdir(parents=True, exist_ok=True)
        cache_dir = cache_dir or path / "cache"
    opts = dict(mode=mode, threads=threads, precision=precision, cache_dir=cache_dir)
    why = "dynamic_axes given" if dynamic_axes else None
    if why is None:
        try:
            return _via_dynamo(module, args, flat, spec, path, opts)
        except Exception as e:  # noqa: BLE001 -- the tracer gets its turn
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    in_names = [f"in{i}" for i in range(len(args))]
    out_names = [f"out{i}" for i in range(len(flat))]
    onnx = export_bytes(module, args, in_names, out_names, dynamic_axes)
    if path is not None:
        (path / "model.onnx").write_bytes(onnx)
    s = Session(onnx if path is None else path / "model.onnx", **opts)
    return Compiled(s, spec, path, capture=f"torch.onnx.export: {why}")


def _via_dynamo(module, args, flat, spec, path, opts) -> Compiled:
    """The module captured whole by Dynamo and lowered by smelt.fx_lower (see
    the module docstring); raises when either cannot take it, or when the
    session's outputs differ from the module's on the example inputs."""
    import torch
    from torch.utils._pytree import tree_flatten

    from . import dynamo as d
    from .fx_lower import Unmapped
    got = {}

    def backend(gm, example_inputs):
        got["gm"], got["ex"] = gm, list(example_inputs)
        return gm.forward

    class Flat(torch.nn.Module):  # the output's tensor leaves, in order
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self, *a):
            return tuple(x for x in tree_flatten(self.m(*a))[0] if isinstance(x, torch.Tensor))

    with torch.no_grad():
        torch.compile(Flat(), backend=backend, fullgraph=True, dynamic=False)(*args)
    gm, ex = got["gm"], got["ex"]
    why = d._refusal(gm, ex)
    if why:
        raise Unmapped(why)
    embed = path is not None or not d._bindable(ex)
    frozen = d._Frozen(gm, ex, bind=not embed)
    real = [ex[i] for i in frozen.tensor_idx]
    user = []  # each real graph input's position among args
    for x in real:
        j = next((k for k, a in enumerate(args) if a is x), None)
        if j is None:
            raise Unmapped("a graph input that is not one of the example inputs")
        user.append(j)
    n_out = len(next(n for n in gm.graph.nodes if n.op == "output").args[0])
    onnx, consts, how = d._to_onnx(gm, ex, frozen, real, [f"in{j}" for j in user],
                                   [f"out{k}" for k in range(n_out)], embed=embed)
    if how != "fx":
        raise Unmapped(how)
    if path is not None:
        (path / "model.onnx").write_bytes(onnx)
    s = Session(onnx if path is None else path / "model.onnx", consts=consts, **opts)
    leaves = [None if isinstance(x, torch.Tensor) else x for x in flat]
    c = Compiled(s, spec, path, leaves, "dynamo")
    outs = s.run({f"in{i}": args[i] for i in c._in})
    want = [x for x in flat if isinstance(x, torch.Tensor)]
    if len(outs) != len(want) or not all(_agrees(torch.as_tensor(o), w, opts["precision"]) for o, w in zip(outs, want)):
        raise Unmapped("the captured graph's outputs differ from the module's")
    return c


def _agrees(got, want, precision: str) -> bool:
    """got is want as smelt computes it: fp32 within summation-order slack; a
    reduced precision within 5% of want's norm (its error, not a wrong graph)."""
    import torch
    if tuple(got.shape) != tuple(want.shape):
        return False
    got = got.to(want.dtype)
    if not want.is_floating_point():
        return torch.equal(got, want)
    if precision == "fp32":
        return torch.allclose(got, want, rtol=1e-3, atol=1e-4)
    return bool((got - want).float().norm() <= 0.05 * want.float().norm() + 1e-6)


def load(path: Union[str, os.PathLike], *, mode: str = "default",
         threads: Optional[int] = None) -> Compiled:
    """Loads an artifact written by smelt.compile(..., save=path)."""
    p = pathlib.Path(path)
    return Compiled(Session(p / "model.onnx", mode=mode, threads=threads, cache_dir=p / "cache"),
                    None, p)
