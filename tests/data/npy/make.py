#!/usr/bin/env python3
"""Re-creates the .npy fixtures (tests/data/npy) and the fuzz seed corpus
(fuzz/corpus/npy) with numpy.  Run from the repository root.  The values are
simple formulas that tests/unit/test_npy.c checks."""
import os
import numpy as np
from numpy.lib import format as npf

def save(path, a, version=None):
    with open(path, "wb") as f:
        npf.write_array(f, a, version=version, allow_pickle=False)

D = "tests/data/npy"
save(f"{D}/f32_2x3.npy", np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1)
save(f"{D}/f64_be_4.npy", np.array([1.5, -2.25, 1e300, -0.0], dtype=">f8"))
save(f"{D}/i64_scalar.npy", np.array(-1234567890123, dtype="<i8"))
save(f"{D}/u8_empty_0x3.npy", np.zeros((0, 3), dtype="u1"))
save(f"{D}/bool_5.npy", np.array([True, False, True, True, False]))
save(f"{D}/f16_3.npy", np.array([1.0, -0.5, 65504.0], dtype="<f2"))
save(f"{D}/i16_be_2x2_v2.npy", np.array([[1, -2], [300, -32768]], dtype=">i2"), version=(2, 0))
save(f"{D}/i32_v3.npy", np.array([7, -8, 9], dtype="<i4"), version=(3, 0))
save(f"{D}/u32_1x1x1x2.npy", np.array([0, 4000000000], dtype="<u4").reshape(1, 1, 1, 2))
save(f"{D}/fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))

C = "fuzz/corpus/npy"
save(f"{C}/v1_f32_2x3.npy", np.arange(6, dtype="<f4").reshape(2, 3))
save(f"{C}/v2_i64_3.npy", np.array([1, -2, 3], dtype="<i8"), version=(2, 0))
save(f"{C}/v3_u8_4.npy", np.arange(4, dtype="u1"), version=(3, 0))
save(f"{C}/v1_f64_scalar.npy", np.array(3.25))
save(f"{C}/v1_bool_empty.npy", np.zeros((2, 0), dtype=bool))
save(f"{C}/v1_be_i32_2x2.npy", np.array([[1, 2], [3, 4]], dtype=">i4"))
save(f"{C}/v1_f16_1x1x1.npy", np.ones((1, 1, 1), dtype="<f2"))
save(f"{C}/v1_c64_2.npy", np.array([1 + 2j, -3j], dtype="<c8"))
