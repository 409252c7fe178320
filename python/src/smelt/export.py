"""Exporting torch modules and FX graphs to ONNX in memory (for the
torch.compile back end and smelt.compile)."""
from __future__ import annotations

import io
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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(module, tuple(args), f, dynamo=False, opset_version=OPSET,
                              input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes or None, do_constant_folding=True)
    return f.getbuffer()
