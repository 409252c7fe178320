"""smelt: ONNX inference runtime and compiler.

- ``smelt.Session(model, mode=..., threads=..., dims=...)`` loads an ONNX model
  (path or bytes) and runs it on NumPy arrays or torch tensors without copies.
- ``torch.compile(model, backend="smelt", options={"mode": ...})`` (registered
  by entry point; importing smelt is not needed).
- ``smelt.compile(module, example_inputs)``: ahead-of-time, returns a callable.
- ``python -m smelt bench``: smelt against eager, Inductor, onnxrt, openvino.
"""
from __future__ import annotations

from . import _smelt
from .errors import (BY_STATUS, Error, InternalError, InvalidArgumentError, InvalidModelError,
                     IOError, OutOfMemoryError, RuntimeFailure, UnsupportedError)
from .session import PRECISIONS, Generator, Session, ValueInfo

_smelt.set_errors(BY_STATUS)

#: the library's version (CMakeLists.txt project(VERSION), compiled into libsmelt)
__version__: str = _smelt.version()


def compile(module, example_inputs, **kwargs):  # noqa: A001 - smelt.compile
    """Ahead-of-time: exports ``module`` to ONNX with ``example_inputs``, builds a
    smelt Session and returns a callable (smelt.aot.Compiled); see smelt.aot."""
    from .aot import compile as _compile
    return _compile(module, example_inputs, **kwargs)


def load(path, **kwargs):
    """Loads an artifact saved by smelt.compile(..., save=path); see smelt.aot.load."""
    from .aot import load as _load
    return _load(path, **kwargs)


__all__ = ["load", "Session", "Generator", "ValueInfo", "PRECISIONS", "Error", "InvalidArgumentError",
           "InvalidModelError", "UnsupportedError", "IOError", "OutOfMemoryError",
           "RuntimeFailure", "InternalError", "compile", "__version__"]
