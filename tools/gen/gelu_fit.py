#!/usr/bin/env python3
"""tools/gen/gelu_fit.py: the polynomials of the generated kernels' GELUs
(src/codegen/emit_prelude.c: sm_gelu, sm_gelu_tanh), printed as the C string
literal lines the prelude holds.

usage: python3 tools/gen/gelu_fit.py        (needs numpy)

GELU(x) = x h(x) with h = Phi(x) (erf form) or sigmoid(2 sqrt(2/pi) (x +
0.044715 x^3)) (tanh form).  Near 0, h - 1/2 is odd: x P(x^2) on [0, S];
beyond, h(-|x|) (h(x) = 1 - h(-x) for x > 0) is a polynomial in |x| - center
on [S, HI]; past HI it is 0 (the float result no longer changes: h(-HI)
is 2e-9 resp. 1e-11).  Each fit is least squares on Chebyshev points with
weights grown where the error is largest (iteratively reweighted, toward
minimax), keeping the best round.  Measured in float (tests/unit/
test_codegen_math.c sweeps them): erf form within 4.4e-7 absolute, tanh form
3.9e-7, both 2.1e-5 relative where |GELU| > 1e-3.
"""
import math

import numpy as np

FORMS = {
    # name: (near part h(x) - 1/2, far part h(-x), S, near terms, far terms, HI)
    "sm_gelu": (lambda x: 0.5 * math.erf(x / math.sqrt(2)), lambda x: 0.5 * math.erfc(x / math.sqrt(2)),
                2.5, 9, 12, 5.7),
    "sm_gelu_tanh": (lambda x: 1 / (1 + math.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) - 0.5,
                     lambda x: 1 / (1 + math.exp(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                     2.0, 9, 13, 6.0),
}


def fit(A, y):
    w = np.ones_like(y)
    best = None
    for _ in range(100):
        c = np.linalg.lstsq(A * w[:, None], y * w, rcond=None)[0]
        e = np.abs(A @ c - y)
        if best is None or e.max() < best[1]:
            best = (c, e.max())
        w = w * (1 + e / e.max())
        w /= w.mean()
    return best[0]


def lines(name, near, far, S, kn, kf, HI):
    x = np.cos(np.linspace(0, np.pi, 8000)) * S / 2 + S / 2
    x = x[x > 1e-6]
    c1 = fit(np.stack([x * (x * x) ** i for i in range(kn)], 1), np.vectorize(near)(x))
    cen = (S + HI) / 2
    x = np.cos(np.linspace(0, np.pi, 8000)) * (HI - S) / 2 + cen
    c2 = fit(np.stack([(x - cen) ** i for i in range(kf)], 1), np.vectorize(far)(x))
    out = ["static inline float %s(float x) {" % name,
           "  float a = fabsf(x), ac = a < %.9ef ? a : %.9ef, z = ac * ac;" % (HI, HI),
           "  float e = %.9ef;" % c1[-1]]
    term = lambda v, c: "  %s = %s * %s %s %.9ef;" % (v, v, "z" if v == "e" else "t", "-" if c < 0 else "+", abs(c))
    out += [term("e", c) for c in c1[-2::-1]]
    out += ["  e = e * ac;", "  float t = ac - %.9ef;" % cen, "  float c = %.9ef;" % c2[-1]]
    out += [term("c", c) for c in c2[-2::-1]]
    out += ["  c = a >= %.9ef ? 0.0f : c;" % HI,
            "  float h = a < %.9ef ? 0.5f + (x < 0.0f ? -e : e) : (x < 0.0f ? c : 1.0f - c);" % S,
            "  return x * h;", "}"]
    return out


def main():
    for name, args in FORMS.items():
        for l in lines(name, *args):
            print('    "%s\\n"' % l)


if __name__ == "__main__":
    main()
