r"""The compiled Newton theta step of a block of machines: the one kernel of every backend.

Machine j of the block (its n_j rows of X~ (k, n_max, dim) and y, the padded rows never read)
solves

    theta_j = argmin f_j(theta) + (rho_j/2) ||theta - m_j||^2,   f_j = (1/n) sum_i l(y_i x~_i^T th)

by damped Newton from its carried point (theta, margins y X~ theta, f_j, grad f_j), machine by
machine, each to its own tolerance: the same floats whatever the block (an MPI rank's one
machine or the simulator's J). Per iteration, with g the subproblem's gradient:

- a tall machine (n_j >= dim) steps on its kept Newton matrix H = X~^T D X~ + rho I,
  D = diag(l''/n) at the matrix's anchor, held as its Cholesky factor (a step is two
  triangular solves); it forms
  H anew at the iterate without one, after CHORD_STEPS steps on it in this solve, or when a step
  on it shrank ||g|| by less than CHORD_CONTRACTION (a chord / Shamanskii method), and a new
  rho shifts the kept data part X~^T D X~;
- a wide machine (n_j < dim) solves H s = g at its iterate by the Woodbury identity
  H^{-1} g = (1/rho) [g - X~^T S (rho I + S X~ X~^T S)^{-1} S X~ g], S = D^{1/2} (an n_j x n_j
  positive definite system, never divided by a weight);
- the step s is damped by Armijo: f(theta - t s) <= f - ARMIJO_FRACTION t g^T s, t halved until
  it holds or t < SMALLEST_STEP; once g^T s <= FLAT_SLOPE max(1, |f|) (below what f resolves)
  the full step is taken, and on a matrix of this iterate it ends the solve.

A matrix that is not numerically positive definite, or has a non-finite entry, gives NaN
steps; the stop rule then ends the run as non-finite. ``counts`` (k, len(COUNTS)) adds up
each machine's work: :data:`COUNTS`.

The margin losses' elementwise formulas are the scalar twins of :mod:`dpnet.losses.margin`
(tests/test_newton_kernel.py holds them equal); :func:`loss_code` maps a loss to its code.
Compiled by numba on first use and cached on disk (:mod:`dpnet.decentralized._compiled`).
"""

from __future__ import annotations

import math
from typing import Any

import llvmlite.binding
import numpy as np

# the BLAS and LAPACK numba calls (scipy's), loaded with this module: a threadpoolctl limit
# set afterwards (one BLAS thread per machine) covers them; one loaded later, inside it, ran
# the kernel's products on every core, its idle threads spinning beside the machines
import scipy.linalg.cython_blas  # noqa: F401
import scipy.linalg.cython_lapack  # noqa: F401
from llvmlite import ir
from numba import literal_unroll, types
from numba.extending import get_cython_function_address, intrinsic

from dpnet.decentralized._compiled import compiled, entry

# BLAS dsyrk (scipy's, the library of numba's own products) by a symbol name: numba's on-disk
# cache links a name again in a later process, where an address baked into the code would not
llvmlite.binding.add_symbol(
    "dpnet_dsyrk", get_cython_function_address("scipy.linalg.cython_blas", "dsyrk")
)
_dsyrk: Any = types.ExternalFunction("dpnet_dsyrk", types.void(*[types.voidptr] * 10))

LOGISTIC, UNBIASED_LOGISTIC, HUBERIZED_HINGE = 0, 1, 2

ARMIJO_FRACTION = 1e-4
SMALLEST_STEP = 1e-10
FLAT_SLOPE = 1e-12
CHORD_CONTRACTION = 0.1
"""A step on a kept Newton matrix must shrink the gradient norm at least this much, or the
matrix is formed anew at the current iterate."""
CHORD_STEPS = 2
"""A kept Newton matrix serves at most this many steps of one theta step; a further step
forms it anew. Both measured in docs/algorithms.md ("The Newton matrix is kept")."""

LOG2_E = 1.4426950408889634
LN2_HIGH = 6.93147180369123816490e-01
"""ln 2's leading 32 bits (fdlibm's ln2_hi): k ln2_high is exact for |k| < 2^20."""
LN2_LOW = 1.90821492927058770002e-10
ROUNDING_SHIFT = 6755399441055744.0
"""s = 1.5 2^52: (t + s) - s is t rounded to an integer (|t| < 2^51, round to nearest)."""
EXP_FLOOR = -746.0
"""exp(x) rounds to 0 below -745.14; x below this is taken as it."""
_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(13, -1, -1))
"""exp's Taylor coefficients 1/k!, k = 13 down to 0: its polynomial in Horner's order."""

PRODUCT_ROWS = 32
"""Rows whose factors 1 + e_i (each in [1, 2]) one logarithm sums: at most 2^32, no overflow."""

COUNTS = ("matrices", "shifts", "steps", "woodbury", "trials", "evaluations", "margins")
"""What ``counts`` adds up: Newton matrices formed (each X~^T D X~ by one symmetric product,
BLAS dsyrk, and a Cholesky factor), kept matrices shifted to a new rho (a factor), Newton steps
(each one product with X~ for the step's margins), Woodbury solves among them, Armijo trials
after a rejected full step, loss evaluations over a machine's rows (each with its gradient, one
product with X~), and margins y X~ theta computed afresh (a point's, or a matrix's at its
anchor: one product with X~ each)."""
MATRICES, SHIFTS, STEPS, WOODBURY, TRIALS, EVALUATIONS, MARGINS = range(len(COUNTS))

BlockData = tuple[np.ndarray, np.ndarray, np.ndarray, float, int, float]
"""What every entry point takes first: X (k, n_max, dim), y (k, n_max), each machine's row
count n_j, 1/n, and the loss's code and parameter."""


@compiled
def _positive_part(x: float) -> float:
    """max(x, 0), NaN for NaN (as np.maximum)."""
    return 0.0 if x < 0.0 else x


def _bitcast(typingctx: Any, bits: Any) -> Any:
    """The float64 whose IEEE bits are the int64 ``bits``."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


_float_of_bits: Any = intrinsic(_bitcast)


@compiled
def _power_of_two(k: int) -> float:
    """2^k for -1022 <= k <= 1023, built from its exponent bits."""
    return _float_of_bits((k + 1023) << 52)


@compiled
def _exp_nonpositive(x: float) -> float:
    r"""exp(x) for x <= 0 (NaN for NaN), within 1 ulp of the C library's, in operations a
    loop over an array vectorises (numba's exp calls libm once per element: 32 against about
    9 us for 10,000 margins).

    x = k ln 2 + r with k = round(x log2 e) (a shift by ROUNDING_SHIFT) and r = (x -
    k ln2_high) - k ln2_low (Cody & Waite: k ln2_high and the first difference are exact),
    |r| <= 0.3466; exp(r) by its Taylor polynomial of degree 13 (``_TAYLOR``) in Horner's
    form, whose remainder is at most 0.3466^14/14! e^0.3466 < 7e-18 relative (0.06 ulp); then
    times 2^k1 2^k2, k1 = floor(k/2), k2 = k - k1, both >= -538: the first product is exact, the
    second rounds once, also where exp(x) is subnormal. x < EXP_FLOOR (and -inf) gives 0."""
    t = x if x >= EXP_FLOOR else EXP_FLOOR  # NaN: EXP_FLOOR here, NaN below
    kf = (t * LOG2_E + ROUNDING_SHIFT) - ROUNDING_SHIFT
    r = (t - kf * LN2_HIGH) - kf * LN2_LOW
    p = 0.0
    for coefficient in literal_unroll(_TAYLOR):
        p = p * r + coefficient
    k = np.int64(kf)
    half = k >> 1
    value = p * _power_of_two(half) * _power_of_two(k - half)
    return value if x == x else x


@compiled
def _logistic_terms(code: int, param: float, m: float, e: float) -> tuple[float, float]:
    """(max(-m, 0), l'(m)) of the logistic losses at m, given e = exp(-|m|): l(m) = log1p(e)
    + max(-m, 0) (the corrected loss less k m, k = (1 - p)/(2p - 1))."""
    s = (e if m >= 0.0 else 1.0) / (1.0 + e)  # sigma(-m)
    if code == LOGISTIC:
        return _positive_part(-m), -s
    p = param
    return _positive_part(-m), -(p * s + (1 - p) * (1 - s)) / (2 * p - 1)


@compiled
def _correction(code: int, param: float) -> float:
    """k of the corrected loss l_p(m) = l(m) - k m (0 for the logistic loss and p = 1)."""
    if code == LOGISTIC or param == 1.0:
        return 0.0
    return (1 - param) / (2 * param - 1)


@compiled
def _loss_and_derivative(code: int, param: float, m: float) -> tuple[float, float]:
    """(l(m), l'(m)) of the loss ``code`` with parameter ``param`` (keep_prob p, width h)."""
    if code == HUBERIZED_HINGE:
        h = param
        if m > 1.0 + h:
            value = 0.0
        elif m < 1.0 - h:
            value = 1.0 - m
        else:
            value = (1.0 + h - m) ** 2 / (4.0 * h)
        r = (1.0 + h - m) / (2.0 * h)
        return value, -(0.0 if r < 0.0 else (1.0 if r > 1.0 else r))
    e = _exp_nonpositive(-abs(m))
    linear, first = _logistic_terms(code, param, m, e)
    value = np.log1p(e) + linear
    k = _correction(code, param)
    if k != 0.0:
        value = value - k * m
    return value, first


@compiled
def _curvature(code: int, param: float, m: float) -> float:
    """l''(m) >= 0 of the loss ``code``."""
    if code == HUBERIZED_HINGE:
        return 1.0 / (2.0 * param) if abs(1.0 - m) <= param else 0.0
    return _logistic_curvature(_exp_nonpositive(-abs(m)))


@compiled
def _logistic_curvature(e: float) -> float:
    """l''(m) of the logistic losses, given e = exp(-|m|)."""
    return e / ((1.0 + e) * (1.0 + e))


@compiled
def _curvature_weights(
    code: int, param: float, inv_n: float, margin: np.ndarray, weights: np.ndarray
) -> None:
    """weights = sqrt(l''(margin) / n), elementwise (the logistic losses' loop vectorised)."""
    if code == HUBERIZED_HINGE:
        for i in range(margin.shape[0]):
            weights[i] = np.sqrt(inv_n * _curvature(code, param, margin[i]))
    else:
        for i in range(margin.shape[0]):
            weights[i] = np.sqrt(inv_n * _logistic_curvature(_exp_nonpositive(-abs(margin[i]))))


@compiled
def _evaluate(
    X: np.ndarray,
    y: np.ndarray,
    inv_n: float,
    code: int,
    param: float,
    margin: np.ndarray,
    weights: np.ndarray,
    grad: np.ndarray,
) -> float:
    """f_j at ``margin`` (n_j,), its gradient X~^T (y l' / n) into ``grad``; ``weights``: work
    space (n_j,), first the e_i = exp(-|m_i|) of the logistic losses (one vectorised pass).
    Their sum of log1p(e_i) is the logarithm of the product of the
    1 + e_i in [1, 2] over each PRODUCT_ROWS rows (one logarithm, not one per row: libm's
    scalar log1p cost as much as the exp; the rounding of 1 + e_i errs by at most 1.1e-16 a
    row, as much as the sum's own)."""
    n = margin.shape[0]
    total = 0.0
    if code == HUBERIZED_HINGE:
        for i in range(n):
            value, first = _loss_and_derivative(code, param, margin[i])
            total += value
            weights[i] = inv_n * y[i] * first
    else:
        k = _correction(code, param)
        for i in range(n):
            weights[i] = _exp_nonpositive(-abs(margin[i]))
        for start in range(0, n, PRODUCT_ROWS):
            product, linear = 1.0, 0.0
            for i in range(start, min(n, start + PRODUCT_ROWS)):
                e = weights[i]
                positive, first = _logistic_terms(code, param, margin[i], e)
                product *= 1.0 + e
                linear += positive
                if k != 0.0:
                    linear -= k * margin[i]
                weights[i] = inv_n * y[i] * first
            total += np.log(product) + linear
    grad[:] = np.dot(weights, X)
    return inv_n * total


@compiled
def _gram(scaled: np.ndarray, gram: np.ndarray) -> None:
    """gram = scaled^T scaled for a C-order ``scaled`` (n, p) by BLAS dsyrk, n p (p + 1) flops,
    half a general product's: in Fortran's order ``scaled`` is A (p, n), and the lower triangle
    of A A^T that dsyrk writes is gram's upper one in C order, mirrored below."""
    n, p = scaled.shape
    uplo, trans = np.array([ord("L")], dtype=np.uint8), np.array([ord("N")], dtype=np.uint8)
    order, depth = np.array([p], dtype=np.int32), np.array([n], dtype=np.int32)
    one, zero = np.array([1.0]), np.array([0.0])
    _dsyrk(uplo.ctypes, trans.ctypes, order.ctypes, depth.ctypes, one.ctypes, scaled.ctypes,
           order.ctypes, zero.ctypes, gram.ctypes, order.ctypes)  # fmt: skip
    for a in range(p):
        for b in range(a + 1, p):
            gram[b, a] = gram[a, b]


@compiled
def _factor_shifted(gram: np.ndarray, rho: float, factor: np.ndarray) -> None:
    """factor = the lower Cholesky factor of gram + rho I when that is finite and numerically
    positive definite, else NaN (and so is every solve on it)."""
    matrix = gram.copy()
    for a in range(matrix.shape[0]):
        matrix[a, a] += rho
    if not np.isfinite(matrix).all():
        factor[...] = np.nan
        return
    try:
        factor[...] = np.linalg.cholesky(matrix)
    except Exception:  # noqa: BLE001 (not positive definite)
        factor[...] = np.nan


@compiled
def _cholesky_solve(lower: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """(L L^T)^{-1} rhs for the lower Cholesky factor L: two triangular solves, 2 n^2 flops,
    both along L's rows (contiguous). L u = rhs by dot products, each summed in four partial
    sums (four independent chains of additions, not one: the solve took twice as long);
    L^T w = u by updates of w with L's rows (axpy, which the compiler vectorises)."""
    n = rhs.shape[0]
    out = np.empty(n)
    for a in range(n):  # L u = rhs
        row = lower[a]
        t0, t1, t2, t3 = rhs[a], 0.0, 0.0, 0.0
        b = 0
        while b + 4 <= a:
            t0 -= row[b] * out[b]
            t1 -= row[b + 1] * out[b + 1]
            t2 -= row[b + 2] * out[b + 2]
            t3 -= row[b + 3] * out[b + 3]
            b += 4
        while b < a:
            t0 -= row[b] * out[b]
            b += 1
        out[a] = ((t0 + t1) + (t2 + t3)) / row[a]
    for a in range(n - 1, -1, -1):  # L^T w = u: w_a final once the rows below it are used
        row = lower[a]
        w = out[a] / row[a]
        out[a] = w
        for b in range(a):
            out[b] -= row[b] * w
    return out


@compiled
def _form(
    X: np.ndarray,
    y: np.ndarray,
    inv_n: float,
    code: int,
    param: float,
    theta: np.ndarray,
    rho: float,
    gram: np.ndarray,
    factor: np.ndarray,
) -> None:
    """gram = X~^T D X~ at ``theta``'s own margins (the same floats wherever it is formed:
    restored from its anchor, it is bitwise the kept one) and the factor of gram + rho I."""
    weight = np.empty(X.shape[0])  # not in place: the compiler vectorises distinct arrays
    _curvature_weights(code, param, inv_n, y * np.dot(X, theta), weight)
    scaled = np.empty_like(X)
    for i in range(X.shape[0]):
        w = weight[i]
        for a in range(X.shape[1]):
            scaled[i, a] = X[i, a] * w
    _gram(scaled, gram)
    _factor_shifted(gram, rho, factor)


@compiled
def woodbury(
    X: np.ndarray, outer: np.ndarray, s: np.ndarray, rho: float, grad: np.ndarray
) -> np.ndarray:
    """H^{-1} grad for H = X~^T S^2 X~ + rho I of a wide machine (``outer`` = X~ X~^T, ``s``
    = the diagonal of S, >= 0, possibly 0)."""
    n = X.shape[0]
    if n == 0:  # no rows: H = rho I
        return grad / rho
    small = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            small[a, b] = s[a] * outer[a, b] * s[b]
        small[a, a] += rho
    lower = np.empty((n, n))
    _factor_shifted(small, 0.0, lower)
    w = _cholesky_solve(lower, s * np.dot(X, grad))
    return (grad - np.dot(s * w, X)) / rho


@entry
@compiled
def points_at(
    data: BlockData,
    theta: np.ndarray,
    margin: np.ndarray,
    loss: np.ndarray,
    loss_grad: np.ndarray,
    fresh: bool,
    counts: np.ndarray,
) -> None:
    """Every machine's point at ``theta``: its margins (computed where ``fresh``, else the given
    ones, a checkpoint's), f_j and grad f_j."""
    X, y, rows, inv_n, code, param = data
    weights = np.empty(X.shape[1])
    for j in range(theta.shape[0]):
        n = rows[j]
        if fresh:
            margin[j, :n] = y[j, :n] * np.dot(X[j, :n], theta[j])
            counts[j, MARGINS] += 1
        loss[j] = _evaluate(
            X[j, :n], y[j, :n], inv_n, code, param, margin[j, :n], weights[:n], loss_grad[j]
        )
        counts[j, EVALUATIONS] += 1


@entry
@compiled
def restore(
    data: BlockData,
    anchors: np.ndarray,
    gram: np.ndarray,
    factor: np.ndarray,
    anchor: np.ndarray,
    anchor_rho: np.ndarray,
    kept: np.ndarray,
    counts: np.ndarray,
) -> None:
    """The kept matrices of ``anchors`` (k, dim + 1): (theta_a, rho_a) per machine, NaN rows
    where none is kept."""
    X, y, rows, inv_n, code, param = data
    dim = X.shape[2]
    for j in range(anchors.shape[0]):
        rho = anchors[j, dim]
        if np.isnan(rho):
            continue
        n = rows[j]
        anchor[j] = anchors[j, :dim]
        _form(X[j, :n], y[j, :n], inv_n, code, param, anchor[j], rho, gram[j], factor[j])
        anchor_rho[j], kept[j] = rho, True
        counts[j, MATRICES] += 1
        counts[j, MARGINS] += 1


@entry
@compiled
def newton(
    data: BlockData,
    center: np.ndarray,  # the subproblems
    rho: np.ndarray,
    tol: np.ndarray,
    relative: float,
    max_iter: int,
    theta: np.ndarray,  # the points, updated
    margin: np.ndarray,
    loss: np.ndarray,
    loss_grad: np.ndarray,
    gram: np.ndarray,  # the matrices, updated
    factor: np.ndarray,
    anchor: np.ndarray,
    anchor_rho: np.ndarray,
    kept: np.ndarray,
    outer: np.ndarray,
    final_norm: np.ndarray,  # out
    counts: np.ndarray,
) -> None:
    """Every machine's Newton solve (module docstring) from its point; ``final_norm[j]``: its
    subproblem gradient norm at the end."""
    X, y, rows, inv_n, code, param = data
    n_max, dim = X.shape[1], X.shape[2]
    weights = np.empty(n_max)
    grad = np.empty(dim)
    new_grad = np.empty(dim)
    new_margin = np.empty(n_max)
    moved = np.empty(n_max)
    for j in range(theta.shape[0]):
        n = rows[j]
        Xj, yj, th, mj = X[j, :n], y[j, :n], theta[j], margin[j, :n]
        tall = n >= dim
        if tall and kept[j] and anchor_rho[j] != rho[j]:  # a new rho: shifted anew
            _factor_shifted(gram[j], rho[j], factor[j])
            anchor_rho[j] = rho[j]
            counts[j, SHIFTS] += 1
        shift = th - center[j]
        f = loss[j] + 0.5 * rho[j] * np.dot(shift, shift)
        last_norm, kept_steps, tol_j = np.inf, 0, tol[j]
        measured = False
        for iteration in range(max_iter):
            grad[:] = loss_grad[j] + rho[j] * shift
            norm = np.sqrt(np.dot(grad, grad))
            if iteration == 0 and relative * norm > tol_j:  # a NaN tolerance stays NaN
                tol_j = relative * norm
            if norm <= tol_j:
                final_norm[j], measured = norm, True
                break
            formed = tall and (
                not kept[j] or norm > CHORD_CONTRACTION * last_norm or kept_steps >= CHORD_STEPS
            )
            if formed:
                _form(Xj, yj, inv_n, code, param, th, rho[j], gram[j], factor[j])
                anchor[j], anchor_rho[j], kept[j] = th, rho[j], True
                last_norm, kept_steps = np.inf, 0
                counts[j, MATRICES] += 1
                counts[j, MARGINS] += 1
            elif tall:
                last_norm = norm
                kept_steps += 1
            if tall:
                step = _cholesky_solve(factor[j], grad)
            else:
                _curvature_weights(code, param, inv_n, mj, weights[:n])
                step = woodbury(Xj, outer[j, :n, :n], weights[:n], rho[j], grad)
                counts[j, WOODBURY] += 1
            counts[j, STEPS] += 1
            slope = np.dot(grad, step)
            # y X~ step, the margins' motion; loops, not numba's array expressions (whose
            # set-up and overlap checks made a 10,000-row step 2-5 % slower)
            np.dot(Xj, step, moved[:n])
            for i in range(n):
                moved[i] *= yj[i]
            scale = abs(f)
            flat = slope <= FLAT_SLOPE * (scale if not scale < 1.0 else 1.0)  # NaN stays NaN
            t = 1.0
            while True:
                new_theta = th - t * step
                for i in range(n):
                    new_margin[i] = mj[i] - t * moved[i]
                new_loss = _evaluate(
                    Xj, yj, inv_n, code, param, new_margin[:n], weights[:n], new_grad
                )
                counts[j, EVALUATIONS] += 1
                new_shift = new_theta - center[j]
                f_new = new_loss + 0.5 * rho[j] * np.dot(new_shift, new_shift)
                if flat or f_new <= f - ARMIJO_FRACTION * t * slope or t < SMALLEST_STEP:
                    break
                t *= 0.5
                counts[j, TRIALS] += 1
            th[:] = new_theta
            for i in range(n):
                mj[i] = new_margin[i]
            loss[j], loss_grad[j] = new_loss, new_grad
            f, shift = f_new, new_shift
            if flat and (not tall or formed):  # a full step on a matrix of this iterate
                break
        if not measured:  # a final Newton step, or max_iter: measured now
            grad[:] = loss_grad[j] + rho[j] * shift
            final_norm[j] = np.sqrt(np.dot(grad, grad))
