"""Exporting torch modules and FX graphs to ONNX in memory (for the
torch.compile back end and smelt.compile)."""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from typing import Dict, List, Optional, Sequence

#: ONNX opset the exports ask for
OPSET = 17


def export_bytes(module, args: Sequence, input_names: List[str], output_names: List[str],
                 dynamic_axes: Optional[Dict[str, Dict[int, str]]] = None) -> memoryview:
    """module(*args) as ONNX bytes, through torch.onnx.export's TorchScript
    exporter (dynamo=False: seconds where the torch.export-based one takes
    tens of seconds, and it takes Dynamo's GraphModules as they are).
    Parameters and buffers of module become initializers.  The bytes are a
    view of the exporter's buffer, not a copy of it (a model's weights are
    held once less while smelt loads them)."""
    import torch
    f = io.BytesIO()
    with warnings.catch_warnings(), _quiet_output():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(module, tuple(args), f, dynamo=False, opset_version=OPSET,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes or None, do_constant_folding=True)
    return f.getbuffer()


@contextlib.contextmanager
def _quiet_output():
    """File descriptors 1 and 2 to temporary files while the exporter runs:
    when it fails, its C++ side prints the whole TorchScript graph it was
    building on stdout (hundreds of lines for a small model) before raising;
    the caller reports the exception's first line instead.  What was
    written is put back when the export succeeds (the exporter's own
    warnings)."""
    saved = {}
    try:
        for fd in (1, 2):
            saved[fd] = os.dup(fd)
    except OSError:  # no such descriptor to protect
        for d in saved.values():
            os.close(d)
        yield
        return
    ok = False
    tmps = {fd: tempfile.TemporaryFile() for fd in saved}
    try:
        sys.stdout.flush(), sys.stderr.flush()
        for fd, t in tmps.items():
            os.dup2(t.fileno(), fd)
        yield
        ok = True
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        for fd, t in tmps.items():
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            if ok:
                t.seek(0)
                text = t.read()
                if text:
                    os.write(fd, text)
            t.close()


def expand_gqa(gm) -> bool:
    """Rewrites gm's scaled_dot_product_attention calls with enable_gqa (fewer
    key/value heads than query heads: Llama, Qwen2, Mistral) into the same
    call on keys and values repeated per query group (repeat_interleave over
    the heads, what enable_gqa means), which torch.onnx.export's TorchScript
    exporter can write.  For the graphs that go through it (symbolic dims);
    smelt.fx_lower lowers enable_gqa itself.  True when something changed."""
    import torch
    sdpa = torch.nn.functional.scaled_dot_product_attention
    changed = False
    for nd in list(gm.graph.nodes):
        if nd.op != "call_function" or nd.target is not sdpa:
            continue
        args, kw = list(nd.args), dict(nd.kwargs)
        gqa = kw.pop("enable_gqa", False) if "enable_gqa" in kw else (args.pop(7) if len(args) > 7 else False)
        if gqa is not True or len(args) < 3:
            continue
        qe, ke = (getattr(a, "meta", {}).get("example_value") for a in args[:2])
        hq = qe.shape[-3] if isinstance(qe, torch.Tensor) and qe.dim() >= 3 else None
        hk = ke.shape[-3] if isinstance(ke, torch.Tensor) and ke.dim() >= 3 else None
        if not isinstance(hq, int) or not isinstance(hk, int) or hk < 1 or hq % hk:
            continue
        if hq != hk:
            with gm.graph.inserting_before(nd):
                for i in (1, 2):
                    args[i] = gm.graph.call_function(torch.repeat_interleave, (args[i], hq // hk), {"dim": -3})
        nd.args, nd.kwargs = tuple(args), kw
        changed = True
    if changed:
        gm.recompile()
    return changed
