"""smelt.Session: a model loaded and prepared for running, over the C API
(smelt_model_load / smelt_session_create / smelt_session_run)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _smelt
from .errors import InvalidArgumentError, UnsupportedError

Shape = Tuple[Union[int, str, None], ...]

#: the precisions the library implements today
PRECISIONS = ("fp32", "bf16", "fp16", "int8", "int4")


class ValueInfo(NamedTuple):
    """A model input or output: dims are ints, symbolic names (str) or None (unknown)."""
    name: str
    dtype: str
    shape: Optional[Shape]


def _dims_string(dims: Union[None, str, Mapping[str, int]]) -> Optional[str]:
    if dims is None or isinstance(dims, str):
        return dims
    return ",".join(f"{k}={int(v)}" for k, v in dims.items())


def _buckets_string(buckets: Union[None, str, Mapping[str, Sequence[int]]]) -> Optional[str]:
    if buckets is None or isinstance(buckets, str):
        return buckets
    return ";".join(f"{k}=" + ",".join(str(int(x)) for x in v) for k, v in buckets.items())


def _torch():
    import sys
    return sys.modules.get("torch")


def _as_array(x: Any) -> Tuple[Any, bool]:
    """An object exporting a C-contiguous buffer over x's memory (no copy when
    x already is one), and whether x was a torch tensor."""
    if type(x) is np.ndarray:
        return (x if x.flags.c_contiguous else np.ascontiguousarray(x)), False
    torch = _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if not t.is_contiguous():
            t = t.contiguous()
        if t.dtype == torch.bfloat16:
            raise UnsupportedError("bfloat16 tensors are not read by smelt's Python API yet", 3)
        return t.numpy(), True
    a = np.asarray(x)
    return (a if a.flags.c_contiguous else np.ascontiguousarray(a)), False


class Session:
    """A model prepared for running.

    Args:
        model: a path to an .onnx file, or the model's bytes.
        mode: "eager", "default", "reduce-overhead" or "max-autotune".
        threads: worker threads (None: the machine's cores).
        precision: "fp32" (default), "int8" (constant-weight MatMul/Gemm as
            dynamically quantized int8 GEMMs, the rest fp32) or "bf16" (those
            weights stored in bf16, activations fp32), "fp16" (likewise in
            IEEE fp16) or "int4" (those weights in int4 groups of 32 with an
            fp32 scale; README: Precision).
        dims: sizes for symbolic dims, {"batch": 1, "seq": 128} or "batch=1,seq=128";
            when every input shape is fixed, compiled modes compile at creation.
        cache_dir: the compiled-kernel cache (None: $SMELT_CACHE_DIR, else
            $XDG_CACHE_HOME/smelt, else ~/.cache/smelt).
        dynamic, fullgraph, recompile_limit, buckets: smelt_session_options
            fields of the same names (buckets: {"input:axis": [64, 128]} or the
            C string form).
        device: "cpu" (None: the default) or "cpu-ref" (test-only: the
            reference kernels through the device seam, eager mode only);
            "cuda:N" raises smelt.UnsupportedError (not built in).
        consts: {input name: array or tensor}: graph inputs given values that
            become constants of the model (C: smelt_model_load_bytes_with);
            model must be bytes.  Not copied: smelt views their memory, and
            the session keeps them alive; they must not change while it is
            open.  The torch.compile back end hands over weights this way.

    ``run`` is thread-safe (concurrent calls on one session are allowed) and
    releases the GIL while smelt runs.
    """

    def __init__(self, model: Union[str, os.PathLike, bytes, bytearray, memoryview],
                 mode: str = "default", threads: Optional[int] = None, precision: str = "fp32",
                 dims: Union[None, str, Mapping[str, int]] = None,
                 cache_dir: Union[None, str, os.PathLike] = None, *, dynamic: bool = False,
                 fullgraph: bool = False, recompile_limit: Optional[int] = None,
                 buckets: Union[None, str, Mapping[str, Sequence[int]]] = None,
                 device: Optional[str] = None, consts: Optional[Mapping[str, Any]] = None) -> None:
        if precision not in PRECISIONS:
            raise UnsupportedError(
                f"precision {precision!r}: smelt implements only {', '.join(PRECISIONS)} today", 3)
        if threads is not None and threads < 0:
            raise InvalidArgumentError(f"threads must be >= 0, got {threads}", 1)
        self.precision = precision
        self.mode = mode
        bound = None if consts is None else [(str(k), _as_array(v)[0]) for k, v in consts.items()]
        self._s = _smelt.Session(
            model if isinstance(model, (bytes, bytearray, memoryview)) else os.fspath(model),
            mode, int(threads or 0), _dims_string(dims),
            None if cache_dir is None else os.fspath(cache_dir), _buckets_string(buckets),
            bool(dynamic), bool(fullgraph), -1 if recompile_limit is None else int(recompile_limit),
            precision, device, bound)
        #: names of the graph inputs given as consts (bound constants)
        self.bound_consts = tuple(k for k, _ in bound) if bound else ()
        self._input_names = self._s.input_names
        self._output_names = self._s.output_names

    # ---- description ----
    @property
    def inputs(self) -> List[ValueInfo]:
        """The model's inputs: name, dtype name ("float32"...), shape."""
        return [ValueInfo(*v) for v in self._s.value_infos(True)]

    @property
    def outputs(self) -> List[ValueInfo]:
        """The model's outputs: name, dtype name, shape."""
        return [ValueInfo(*v) for v in self._s.value_infos(False)]

    @property
    def input_names(self) -> Tuple[str, ...]:
        return self._input_names

    @property
    def output_names(self) -> Tuple[str, ...]:
        return self._output_names

    @property
    def stats(self) -> Dict[str, Any]:
        """What the session has done so far (smelt_session_get_stats): compiles,
        cache_hits, eager_fallback, graph_breaks, kernels_generated,
        compile_seconds, arena_bytes, eager_peak_bytes, prepared_loaded, prepared_saved."""
        return self._s.stats()

    @property
    def closed(self) -> bool:
        return self._s.closed

    # ---- running ----
    def run(self, inputs: Union[Mapping[str, Any], Sequence[Any]]) -> List[Any]:
        """Runs the model.

        inputs: {name: array} or a list in the model's input order; NumPy
        arrays, torch tensors (CPU) or anything np.asarray takes.  C-contiguous
        arrays of a dtype smelt reads are read in place, without a copy.

        Returns the outputs in the model's order: NumPy arrays viewing smelt's
        buffers (no copy; freed when the last view dies), or torch tensors over
        the same memory when any input was a torch tensor.
        """
        # The fast path: NumPy arrays smelt reads in place, handed over and
        # returned through NumPy's C API (run_arrays answers NotImplemented
        # for anything else).  A list is tried before the Mapping check.
        kind = type(inputs)
        if kind is list or kind is tuple:
            outs = self._s.run_arrays(inputs, None)
            if outs is not NotImplemented:
                return outs
        if isinstance(inputs, Mapping):
            names: Optional[List[str]] = list(inputs.keys())
            values = list(inputs.values())
            outs = self._s.run_arrays(values, names)
            if outs is not NotImplemented:
                return outs
        else:
            names = None
            values = inputs
        arrays = []
        torch_in = False
        for v in values:
            a, t = _as_array(v)
            arrays.append(a)
            torch_in |= t
        bufs = self._s.run(arrays, names)
        outs = [np.asarray(b) for b in bufs]
        if torch_in:
            torch = _torch()
            return [torch.from_numpy(o) for o in outs]
        return outs

    __call__ = run

    def close(self) -> None:
        """Frees the session and its model; later calls raise smelt.Error."""
        self._s.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"inputs={list(self._input_names)}, outputs={list(self._output_names)}"
        return f"smelt.Session(mode={self.mode!r}, {state})"


class Generator:
    """Text generation with a decoder-only model exported with its KV cache
    (the C API's smelt_generator_*; see src/generate/README.md).

    gen = smelt.Generator(smelt.Session("model.onnx"), max_length=256, eos_token_id=50256)
    gen.prefill([5, 17, 42])
    while not gen.done: print(gen.next())

    Greedy by default; temperature > 0 samples (top_k, top_p) from seed.
    batch > 1: prefill takes one row of ids per sequence (same length) and
    next() returns one token per sequence.  static_cache (default True): the
    static KV cache -- allocated once, written in place, decode replayed
    without re-planning -- when the model's past -> Concat -> present
    matches (the static_cache property says whether it is used); False: the
    model as written."""

    def __init__(self, session: "Session", *, batch: int = 1, max_length: int = 0, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0, eos_token_id: int = -1,
                 static_cache: bool = True) -> None:
        self._session = session  # keeps it alive
        self._g = _smelt.Generator(session._s, batch, max_length, temperature, top_k, top_p, seed, eos_token_id,
                                   static_cache)

    def prefill(self, ids: Sequence[Any]) -> None:
        """Starts over with the prompt (a list of ids; rows of ids for batch > 1)."""
        self._g.prefill(ids)

    def next(self) -> Any:
        """The next token (a list of tokens for batch > 1)."""
        return self._g.next()

    def step(self, tokens: Any) -> None:
        """Feeds one token per sequence (the decode half of next())."""
        self._g.step(tokens)

    def sample(self) -> Any:
        """Picks the next token(s) from the last logits (the sampling half of next())."""
        return self._g.sample()

    def reset(self) -> None:
        self._g.reset()

    @property
    def done(self) -> bool:
        return self._g.done

    @property
    def length(self) -> int:
        return self._g.length

    @property
    def kv_bytes(self) -> int:
        return self._g.kv_bytes

    @property
    def static_cache(self) -> bool:
        return self._g.static_cache

    def generate(self, ids: Sequence[Any], max_new_tokens: int) -> List[Any]:
        """prefill(ids), then up to max_new_tokens tokens (fewer at EOS or max_length)."""
        self.prefill(ids)
        out = []
        while len(out) < max_new_tokens and not (out and self.done):
            out.append(self.next())
        return out
