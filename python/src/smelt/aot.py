"""smelt.compile: the ahead-of-time path.  The module is exported to ONNX once
with the example inputs, a smelt Session is built, and a callable comes back;
``save=DIR`` keeps the artifact (DIR/model.onnx and the compiled kernels in
DIR/cache) for smelt.load(DIR) in a later process."""
from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Optional, Sequence, Union

from .errors import InvalidArgumentError
from .session import Session


class Compiled:
    """A module compiled by smelt: call it like the module (positional tensors
    or arrays, in the order of example_inputs)."""

    def __init__(self, session: Session, spec: Any = None, path: Optional[pathlib.Path] = None):
        self.session = session
        self.path = path
        self._spec = spec

    def __call__(self, *args: Any) -> Any:
        outs = self.session.run(list(args))
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
    in_names = [f"in{i}" for i in range(len(args))]
    out_names = [f"out{i}" for i in range(len(flat))]
    onnx = export_bytes(module, args, in_names, out_names, dynamic_axes)
    path = None
    if save is not None:
        path = pathlib.Path(save)
        path.mkdir(parents=True, exist_ok=True)
        (path / "model.onnx").write_bytes(onnx)
        cache_dir = cache_dir or path / "cache"
    s = Session(onnx if path is None else path / "model.onnx", mode=mode, threads=threads,
                precision=precision, cache_dir=cache_dir)
    return Compiled(s, None if isinstance(ref, torch.Tensor) else spec, path)


def load(path: Union[str, os.PathLike], *, mode: str = "default",
         threads: Optional[int] = None) -> Compiled:
    """Loads an artifact written by smelt.compile(..., save=path)."""
    p = pathlib.Path(path)
    return Compiled(Session(p / "model.onnx", mode=mode, threads=threads, cache_dir=p / "cache"),
                    None, p)
