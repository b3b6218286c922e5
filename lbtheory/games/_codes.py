"""Codes of the compiled arc-cost formulas (numba-free, so :mod:`.arccosts` imports without
numba; :mod:`._gpkernels` uses the same names)."""

#: what an arc-cost formula evaluates at flow x: ℓ(x), ℓ'(x), ∫_0^x ℓ, x·ℓ(x), the marginal
#: cost x·ℓ'(x) + ℓ(x) and its derivative
COST, PRIME, POTENTIAL, TOTAL, MARGINAL, MARGINAL_PRIME = 0, 1, 2, 3, 4, 5
#: family codes of :func:`._gpkernels.formula_array` (and of ``kind`` in the solver kernels)
POLYNOMIAL, QUEUE = 0, 1
