"""Matrix-factorisation (MF) mechanisms: correlated noise for prefix sums and private training.

A *workload* A (n×n, lower-triangular: step t may use only the first t inputs) is to be applied to
the stream x_1, …, x_n of clipped gradient sums; the prefix sums (A = all-ones lower-triangular)
are the iterates of SGD. The matrix mechanism (Li, Miklau, Hay, McGregor & Rastogi 2015) factors
A = B C, releases C x + z with z ~ N(0, σ²·I), and post-processes: B(Cx + z) = A(x + C⁻¹z). In
training, step t adds the noise (C⁻¹z)_t to the gradient sum instead of an independent draw
(DP-FTRL: Kairouz, McMahan, Song, Thakkar, Thakurta & Xu 2021; MF-DP-SGD: Denisov, McMahan, Rush,
Smith & Thakurta 2022). Privacy: Cx changes by at most the *sensitivity* of C between neighbours
(:func:`sensitivity`), so one release of the whole sequence is a Gaussian mechanism with noise
multiplier σ/sensitivity (:class:`dplib.accounting.MatrixMechanismEvent`). Error of the released
workload: Cov(Bz) = σ²·B Bᵀ, so the expected squared error of query t is σ²·sens²·‖B[t]‖²
(:func:`workload_error`).

Factorisations (each a :class:`Factorization` B, C):

* :func:`tree_factorization` — the binary-tree mechanism (Dwork, Naor, Pitassi & Rothblum 2010;
  Chan, Shi & Song 2011), with the standard or Honaker's (2015) least-squares estimator;
* :func:`sqrt_factorization` — B = C = A^{1/2}, Toeplitz with coefficients binom(2k,k)/4^k
  (Fichtenberger, Henzinger & Upadhyay 2023; Henzinger, Upadhyay & Upadhyay 2023);
* :func:`optimal_factorization` — the optimum of Denisov et al. 2022 (Thm 3.2) for one
  participation;
* :func:`banded_factorization` — a b-banded Toeplitz C optimised for a Toeplitz workload
  (Choquette-Choo et al. 2023 "(Amplified) Banded Matrix Factorization"; McKenna 2024);
* :func:`identity_factorization` — C = I: independent noise (DP-SGD's).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize

from .._constraints import Custom, InstanceOf, Integer, Interval, Options, constrained
from .._validate import check_int, shown
from ._params import LOWER_SQUARE, MATRIX, RNG, TEXT, check_matrix

__all__ = ["Factorization", "prefix_workload", "momentum_workload", "sqrt_coefficients",
           "tree_factorization", "sqrt_factorization", "optimal_factorization",
           "banded_factorization", "identity_factorization", "sensitivity",
           "pattern_sensitivity", "workload_error", "decoder", "noise_for_steps",
           "max_participation_sum"]


@dataclass(frozen=True)
@constrained(B=MATRIX, C=MATRIX, name=TEXT)
class Factorization:
    """A factorisation A = B C of a workload: ``B`` (n×m), ``C`` (m×n, the *encoder*: the
    mechanism releases Cx + z), ``name`` for tables and legends."""

    B: np.ndarray
    C: np.ndarray
    name: str = "factorization"

    def __post_init__(self) -> None:       # after the declared checks (B, C as float64)
        B, C = self.B, self.C
        if B.shape[1] != C.shape[0] or B.shape[0] != C.shape[1]:
            raise ValueError(f"B (n×m) and C (m×n) must have matching shapes, got B {B.shape} "
                             f"and C {C.shape}")

    @property
    def n(self) -> int:
        """The number of steps (columns of C)."""
        return self.C.shape[1]

    @property
    def workload(self) -> np.ndarray:
        """A = B C."""
        return self.B @ self.C


#: A :class:`Factorization` (as the factorisation functions return it).
FACTORIZATION = InstanceOf(Factorization, "a Factorization (e.g. tree_factorization(8))",
                           bad=(None, 1.0, "x", np.eye(2)))


def _check_values(name: str, value: object) -> np.ndarray:
    try:
        x = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        x = np.full(1, np.nan)
    if x.ndim not in (1, 2) or x.shape[-1] == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be a non-empty 1-D or 2-D array of finite reals, got "
                         f"{shown(value)}"[:300])
    return x


_VALUES = Custom(_check_values, "a non-empty 1-D or 2-D array of finite reals",
                 [[], [np.nan], [1.0, np.inf], "abc", None, np.ones((2, 2, 2))])
_COUNT_OR_NONE = Custom(lambda name, value: None if value is None else check_int(name, value),
                        "None or an integer >= 1", [0, -3, 2.5, np.nan, "3", True])


@constrained(n=Integer(min=1))
def prefix_workload(n: int) -> np.ndarray:
    """The prefix-sum workload: the all-ones lower-triangular n×n matrix (row t sums x_1..x_t;
    SGD's iterate θ_t = θ_0 − η·(row t of A x))."""
    return np.tri(n)


@constrained(n=Integer(min=1), momentum=Interval(0.0, 1.0, closed="left", family="frac0"))
def momentum_workload(n: int, momentum: float, lr: object = None) -> np.ndarray:
    """The workload of SGD with heavy-ball momentum β and step sizes η_t (Denisov et al. 2022,
    Sec. 5; torch's SGD: m_t = β m_{t−1} + g_t, θ_t = θ_{t−1} − η_t m_t): θ_t − θ_0 = −(A g)_t with
    A[t, s] = Σ_{r=s}^{t} η_r β^{r−s} (s ≤ t). ``lr`` None: η_t = 1 (then A is Toeplitz)."""
    beta = momentum
    if lr is None:
        eta = np.ones(n)
    else:
        try:
            eta = np.asarray(lr, dtype=np.float64)
        except (TypeError, ValueError):
            eta = np.full(1, np.nan)
        if eta.shape != (n,) or not np.all(np.isfinite(eta)) or np.any(eta <= 0):
            raise ValueError(f"lr must be None or n={n} positive finite step sizes, got "
                             f"{shown(lr)}"[:300])
    k = np.arange(n)
    lag = k[:, None] - k[None, :]
    M = np.where(lag >= 0, beta ** np.maximum(lag, 0), 0.0)     # m = M g
    return np.tri(n) @ (eta[:, None] * M)


@constrained(n=Integer(min=1))
def sqrt_coefficients(n: int) -> np.ndarray:
    """c_k = binom(2k, k)/4^k, k < n: the Taylor coefficients of (1 − x)^{−1/2}, so the
    lower-triangular Toeplitz matrix with them squares to the prefix-sum matrix
    (Fichtenberger, Henzinger & Upadhyay 2023, Sec. 3). c_k = c_{k−1}(2k − 1)/(2k)."""
    k = np.arange(1, n)
    return np.concatenate([[1.0], np.cumprod((2 * k - 1) / (2 * k))])


def _toeplitz_lower(c: np.ndarray, n: int) -> np.ndarray:
    col = np.zeros(n)
    col[:min(n, c.size)] = c[:n]
    return linalg.toeplitz(col, np.zeros(n))


@constrained(workload=LOWER_SQUARE)
def identity_factorization(workload: object) -> Factorization:
    """B = A, C = I: independent noise at every step (DP-SGD's)."""
    return Factorization(workload, np.eye(workload.shape[0]), "independent")


@constrained(n=Integer(min=1), estimator=Options("standard", "honaker"))
def tree_factorization(n: int, estimator: str = "standard") -> Factorization:
    """The binary-tree mechanism for prefix sums (Dwork, Naor, Pitassi & Rothblum 2010; Chan, Shi
    & Song 2011, the "binary mechanism"). C has one 0/1 row per dyadic interval [j·2^ℓ, (j+1)·2^ℓ)
    ∩ [0, n), levels ℓ = 0..⌈log₂ n⌉, so every column has norm √(⌈log₂ n⌉ + 1) (the sensitivity
    under one participation). ``estimator="standard"``: prefix t is the sum of the ≤ ⌈log₂ n⌉ + 1
    nodes of the dyadic decomposition of [0, t + 1) (row t of B has popcount(t + 1) ones: an
    online mechanism); ``"honaker"``: B = A C⁺, the least-squares estimate (Honaker 2015), which
    uses nodes that close after step t (not online; never used by the trainer)."""
    h = int(np.ceil(np.log2(n))) if n > 1 else 0
    cols = np.arange(n)
    blocks, offsets = [], []
    for level in range(h + 1):              # h + 1 levels, not a loop over data
        size = 1 << level
        offsets.append(sum(b.shape[0] for b in blocks))
        count = -(-n // size)
        blocks.append((cols[None, :] // size == np.arange(count)[:, None]).astype(np.float64))
    C = np.concatenate(blocks)
    if estimator == "honaker":
        return Factorization(np.tri(n) @ np.linalg.pinv(C), C, "tree (Honaker)")
    B = np.zeros((n, C.shape[0]))
    length = cols + 1
    for level in range(h + 1):
        use = ((length >> level) & 1).astype(bool)
        j = 2 * (length >> (level + 1))
        B[cols[use], offsets[level] + j[use]] = 1.0
    return Factorization(B, C, "tree")


@constrained(n=Integer(min=1))
def sqrt_factorization(n: int) -> Factorization:
    """B = C = A^{1/2} for the prefix-sum matrix A: lower-triangular Toeplitz with coefficients
    :func:`sqrt_coefficients` (Fichtenberger, Henzinger & Upadhyay 2023, Thm 1.1; Henzinger,
    Upadhyay & Upadhyay 2023 show it optimal up to 1 + o(1)). Its squared column norm (column 0,
    the largest) is Σ_{k<n} (binom(2k,k)/4^k)², which grows like (ln n)/π."""
    c = sqrt_coefficients(n)
    C = _toeplitz_lower(c, len(c))
    return Factorization(C.copy(), C, "square root")


def _reverse_cholesky(X: np.ndarray) -> np.ndarray:
    """Lower-triangular C with CᵀC = X (Cholesky of X with rows and columns reversed)."""
    return np.linalg.cholesky(X[::-1, ::-1]).T[::-1, ::-1]


class _Spectrum:
    """Eigen-solver for M(v) = V^{1/2} G V^{1/2}, G = AᵀA. When A⁻¹ is lower-bidiagonal (prefix
    sums; SGD with any learning-rate schedule and no momentum), M⁻¹ = V^{−1/2} A⁻¹A⁻ᵀ V^{−1/2} is
    tridiagonal and its eigenpairs cost O(n²) (LAPACK's MRRR, ``stemr``) instead of O(n³)."""

    def __init__(self, A: np.ndarray) -> None:
        n = A.shape[0]
        inv = linalg.solve_triangular(A, np.eye(n), lower=True)
        self.tridiagonal = n > 2 and np.allclose(np.tril(inv, -2), 0.0, rtol=0, atol=1e-12 *
                                                 np.max(np.abs(inv)))
        if self.tridiagonal:
            P = inv @ inv.T                                   # tridiagonal: G⁻¹
            self.diag, self.off = np.diag(P).copy(), np.diag(P, 1).copy()
        else:
            self.G = A.T @ A

    def __call__(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(Q, √λ): eigenvectors and square-rooted eigenvalues of M(v)."""
        s = np.sqrt(v)
        if self.tridiagonal:
            mu, Q = linalg.eigh_tridiagonal(self.diag / v, self.off / (s[:-1] * s[1:]),
                                            lapack_driver="stemr")
            return Q, 1.0 / np.sqrt(np.maximum(mu, np.finfo(float).tiny))
        lam, Q = np.linalg.eigh(s[:, None] * self.G * s[None, :])
        return Q, np.sqrt(np.maximum(lam, 0.0))


def _dual(u: np.ndarray, spectrum: _Spectrum) -> tuple[float, np.ndarray, tuple]:
    """−g(v) and its gradient in u = log v, where g(v) = 2 tr((V^{1/2} G V^{1/2})^{1/2}) − Σ v is
    the Lagrange dual of min tr(G X⁻¹) s.t. diag X = 1 (Denisov et al. 2022, proof of Thm 3.2),
    ∂g/∂v_i = X(v)_ii − 1 with X(v) = V^{−1/2}(V^{1/2} G V^{1/2})^{1/2} V^{−1/2}."""
    v = np.exp(u)
    Q, r = spectrum(v)
    diag_x = (Q * Q) @ r / v
    return -(2.0 * r.sum() - v.sum()), -(diag_x - 1.0) * v, (np.sqrt(v), Q, r)


@constrained(workload=LOWER_SQUARE, tol=Interval(0.0, 1.0, closed="neither", family="frac_open"),
             max_iter=Integer(min=1))
def optimal_factorization(workload: object, *, tol: float = 1e-8,
                          max_iter: int = 2000) -> Factorization:
    """The factorisation minimising the total squared error ‖B‖_F² at sensitivity 1 for one
    participation (Denisov, McMahan, Rush, Smith & Thakurta 2022, Sec. 3): minimise tr(AᵀA X⁻¹)
    over X = CᵀC ≻ 0 with diag X = 1 (Eq. 4). By their Thm 3.2 the optimum is
    X = V^{−1/2}(V^{1/2} AᵀA V^{1/2})^{1/2} V^{−1/2} for the diagonal V at which diag X = 1; we find
    v by maximising the concave Lagrange dual g(v) = 2 tr((V^{1/2}AᵀAV^{1/2})^{1/2}) − Σ v with
    L-BFGS, then polish with their fixed-point iteration v ← diag((V^{1/2}AᵀAV^{1/2})^{1/2}). One
    eigendecomposition per evaluation: O(n²) for prefix sums and learning-rate schedules (a
    tridiagonal one, :class:`_Spectrum`), O(n³) otherwise. C is the lower-triangular factor of X,
    its columns then scaled to norm exactly 1, and B = A C⁻¹. ``tol``: the largest
    |diag X − 1| accepted before that scaling."""
    A = workload
    spectrum = _Spectrum(A)
    Q, r = spectrum(np.ones(A.shape[0]))
    u = 2.0 * np.log((Q * Q) @ r)                  # V = diag(G^{1/2})²: X(v) has diagonal ≈ 1
    for _ in range(5):                             # Denisov et al.'s fixed point, a warm start
        Q, r = spectrum(np.exp(u))
        u = np.log((Q * Q) @ r)
    res = optimize.minimize(_dual, u, args=(spectrum,), jac=True, method="L-BFGS-B",
                            options={"maxiter": max_iter, "gtol": tol * 1e-3, "ftol": 1e-16,
                                     "maxcor": 30})
    u = res.x            # L-BFGS stalls once g(v) changes below float precision; the fixed
    for _ in range(max_iter):    # point then converges linearly from there (Denisov et al.)
        Q, r = spectrum(np.exp(u))
        diag_m = (Q * Q) @ r                       # diag((V^{1/2} G V^{1/2})^{1/2})
        gap = float(np.max(np.abs(diag_m / np.exp(u) - 1.0)))
        if gap <= tol:
            break
        u = np.log(diag_m)
    else:
        raise ValueError(f"optimal_factorization did not converge (max |diag X − 1| = {gap:.2e} "
                         f"> tol={tol:g}); raise max_iter={max_iter} or tol")
    s = np.sqrt(np.exp(u))
    X = (Q * r) @ Q.T / np.outer(s, s)
    C = _reverse_cholesky((X + X.T) / 2)
    C /= np.linalg.norm(C, axis=0)[None, :]
    B = linalg.solve_triangular(C, A.T, trans="T", lower=True).T      # B C = A
    return Factorization(B, C, "optimal")


def _toeplitz_column(A: np.ndarray) -> np.ndarray:
    """The first column of A when A is lower-triangular Toeplitz, else ValueError."""
    a = A[:, 0]
    if not np.allclose(A, _toeplitz_lower(a, A.shape[0]), rtol=1e-12, atol=1e-12):
        raise ValueError("workload must be lower-triangular Toeplitz (prefix sums, or momentum "
                         "with a constant learning rate) for banded_factorization")
    return a


def _banded_loss(c: np.ndarray, a: np.ndarray) -> tuple[float, np.ndarray]:
    """‖c‖²·‖A C⁻¹‖_F² for Toeplitz A (column a) and b-banded Toeplitz C (column c), and its
    gradient. C⁻¹ is Toeplitz with the power series r = 1/c(x); B = A C⁻¹ has column s = a·r;
    ‖B‖_F² = Σ_k (n − k) s_k². ∂r/∂c_j = −x^j r², so ∂‖B‖²/∂c_j = −Σ_m (a·r²)_m w_{m+j} with
    w_k = 2(n − k) s_k (products of power series truncated at xⁿ)."""
    from scipy import signal       # loads scipy.stats (~1 s): only the banded search needs it

    n = a.size
    e = np.zeros(n)
    e[0] = 1.0
    r = signal.lfilter([1.0], c, e)
    s = signal.fftconvolve(a, r)[:n]
    weight = n - np.arange(n)
    raw = float(weight @ (s * s))
    p = signal.fftconvolve(a, signal.fftconvolve(r, r)[:n])[:n]
    w = 2.0 * weight * s
    g_raw = -signal.fftconvolve(w, p[::-1])[n - 1:n - 1 + c.size]
    norm2 = float(c @ c)
    return norm2 * raw, 2.0 * c * raw + norm2 * g_raw


@constrained(workload=LOWER_SQUARE, bands=Integer(min=1), max_iter=Integer(min=1))
def banded_factorization(workload: object, bands: int, *, max_iter: int = 500) -> Factorization:
    """A b-banded lower-triangular Toeplitz C (``bands`` b nonzero diagonals) minimising the
    total squared error ‖A C⁻¹‖_F² at sensitivity 1 (largest column norm ‖c‖ = 1) for a Toeplitz
    workload A — the banded mechanism of Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta
    & Xu 2023 (Sec. 3), in the Toeplitz form that scales (McKenna 2024, "BandToep"). A banded C
    makes a record's participations b or more steps apart touch orthogonal columns (the
    sensitivity under k participations is √k·‖c‖, :func:`sensitivity`) and allows amplification
    by cyclic Poisson sampling (:class:`dplib.accounting.BandedMatrixMechanismEvent`); the noise
    C⁻¹z is generated by a b-term recursion (O(b·d) memory). L-BFGS on the b coefficients, started
    from the truncated square root; the gradient is analytic (:func:`_banded_loss`)."""
    A = workload
    n = A.shape[0]
    if bands > n:
        raise ValueError(f"bands must be in [1, n={n}] (the workload has n steps), got {bands}")
    a = _toeplitz_column(A)
    c0 = sqrt_coefficients(bands)
    if bands > 1:
        res = optimize.minimize(_banded_loss, c0, args=(a,), jac=True, method="L-BFGS-B",
                                options={"maxiter": max_iter, "gtol": 1e-12, "ftol": 1e-15})
        c = res.x if res.fun <= _banded_loss(c0, a)[0] else c0
    else:
        c = c0
    c = c / np.linalg.norm(c)
    C = _toeplitz_lower(c, n)
    B = linalg.solve_triangular(C, A.T, trans="T", lower=True).T
    return Factorization(B, C, f"banded (b={bands})")


@constrained(values=_VALUES, min_separation=Integer(min=1), participations=_COUNT_OR_NONE)
def max_participation_sum(values: object, min_separation: int = 1,
                          participations: int | None = None) -> np.ndarray:
    """max Σ_{i∈π} values[…, i] over index sets π with at most ``participations`` k elements, any
    two at least ``min_separation`` b apart (k = ⌈n/b⌉ when None) — the dynamic program VecSens
    of Choquette-Choo et al. 2023 (Alg. 3): F(i, k) = max(x_i + F(i + b, k − 1), F(i + 1, k)),
    vectorised over i and over the leading axes of ``values`` (rows)."""
    x = values
    n = x.shape[-1]
    b = min_separation
    if b > n:
        raise ValueError(f"min_separation must be in [1, n={n}], got {b}")
    k_max = -(-n // b)
    k = k_max if participations is None else min(participations, k_max)
    f = np.zeros(x.shape[:-1] + (n + b,))
    for _ in range(k):        # k rounds of the DP, each vectorised over all i
        f[..., :n] = x + f[..., b:b + n]
        f = np.maximum.accumulate(f[..., ::-1], axis=-1)[..., ::-1]
    return f[..., 0]


@constrained(C=MATRIX, participations=Integer(min=1), min_separation=Integer(min=1))
def sensitivity(C: object, *, participations: int = 1, min_separation: int = 1) -> float:
    """ℓ2 sensitivity of x ↦ Cx when one record adds a vector of norm ≤ 1 to each of at most
    ``participations`` k steps, any two at least ``min_separation`` b apart (the record zeroed out):
    max_π ‖Σ_{i∈π} C[:, i] u_i‖ (Choquette-Choo, McMahan, Rush & Thakurta 2023, Sec. 2).

    * k = 1: the largest column norm (Denisov et al. 2022, Sec. 2; exact).
    * columns at least b apart orthogonal ((CᵀC)_ij = 0 for |i − j| ≥ b; e.g. a b'-banded
      lower-triangular C with b' ≤ b): ‖Σ_{i∈π} C_i u_i‖² = Σ_{i∈π} ‖C_i‖²‖u_i‖² (Pythagoras),
      so the answer is max_π Σ_{i∈π} ‖C[:, i]‖², by the dynamic program
      :func:`max_participation_sum` (exact; Choquette-Choo et al. 2023, "(Amplified) Banded
      Matrix Factorization", arXiv:2306.08153).
    * otherwise an upper bound: ‖Σ_{i∈π} C_i u_i‖² ≤ Σ_{i,j∈π} |X_ij|, bounded by the row-wise
      maxima of |X| (X = CᵀC) and a second maximisation over patterns (Choquette-Choo et al.
      2023, arXiv:2306.08153) — each row and the outer sum may pick different patterns, so it
      can only overestimate."""
    k, n, b = participations, C.shape[1], min_separation
    if b > n:
        raise ValueError(f"min_separation must be in [1, n={n}] (C has n columns), got {b}")
    if k == 1:
        return float(np.max(np.linalg.norm(C, axis=0)))
    X = C.T @ C
    far = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]) >= b
    if np.all(np.abs(X[far]) <= 1e-12 * np.max(np.abs(X))):
        return float(np.sqrt(max_participation_sum(np.diag(X), b, k)))
    rows = max_participation_sum(np.abs(X), b, k)
    return float(np.sqrt(max_participation_sum(rows, b, k)))


@constrained(C=MATRIX, min_separation=Integer(min=1))
def pattern_sensitivity(C: object, steps: object, *, min_separation: int = 1) -> float:
    """‖Σ_{i∈steps} C[:, i]‖: how far Cx moves when one record adds the same unit vector at the
    given (0-based, increasing) ``steps`` — one participation pattern; ``steps`` closer than
    ``min_separation`` apart are refused (they violate the pattern the run promised)."""
    n, b = C.shape[1], min_separation
    idx = np.asarray(steps)
    if (idx.ndim != 1 or idx.size == 0 or not np.issubdtype(idx.dtype, np.integer)
            or np.any(idx < 0) or np.any(idx >= n)):
        raise ValueError(f"steps must be a non-empty 1-D array of step indices in [0, {n}), got "
                         f"{shown(steps)}"[:300])
    gaps = np.diff(idx)
    if np.any(gaps < b):
        i = int(np.flatnonzero(gaps < b)[0])
        raise ValueError(f"steps must be increasing and at least min_separation={b} apart, got "
                         f"steps {int(idx[i])} and {int(idx[i + 1])}")
    return float(np.linalg.norm(C[:, idx].sum(axis=1)))


@constrained(factorization=FACTORIZATION)
def decoder(factorization: Factorization) -> np.ndarray:
    """D (n×m) with D C = I: the noise step t adds is (D z)_t. Square C: D = C⁻¹; otherwise
    (the tree) D = A⁻¹B, the differences of consecutive noisy queries of A = BC."""
    C = factorization.C
    if C.shape[0] == C.shape[1] and np.all(np.triu(C, 1) == 0):
        return linalg.solve_triangular(C, np.eye(C.shape[0]), lower=True)
    A = check_matrix("workload", factorization.workload, square=True, lower=True)
    return linalg.solve_triangular(A, factorization.B, lower=True)


@constrained(factorization=FACTORIZATION,
             noise_multiplier=Interval(0.0, np.inf, closed="left"),
             participations=Integer(min=1), min_separation=Integer(min=1))
def workload_error(factorization: Factorization, *, noise_multiplier: float = 1.0,
                   participations: int = 1, min_separation: int = 1,
                   workload: object = None) -> dict:
    """Expected error of the released queries when z ~ N(0, σ²·sens²·I) makes the run
    (σ-noise-multiplier)-private: query t of W(x + Dz) errs by a Gaussian of standard deviation
    σ·sens·‖(W D)[t]‖ (Cov(Bz) = σ² sens² B Bᵀ; Denisov et al. 2022, Eq. 3), W the factorised
    workload A = BC unless ``workload`` is given (a factorisation used for another workload).
    Returns {"per_step": std of each query, "rmse": √(mean per_step²), "max": max per_step,
    "sensitivity": sens} with sens = :func:`sensitivity` (C; k, b)."""
    sigma = noise_multiplier
    sens = sensitivity(factorization.C, participations=participations,
                       min_separation=min_separation)
    if workload is None:
        B = factorization.B
    else:
        W = check_matrix("workload", workload, square=True, lower=True)
        if W.shape[0] != factorization.n:
            raise ValueError(f"workload must be n×n with n={factorization.n}, got {W.shape}")
        B = W @ decoder(factorization)
    per_step = sigma * sens * np.linalg.norm(B, axis=1)
    return {"per_step": per_step, "rmse": float(np.sqrt(np.mean(per_step ** 2))),
            "max": float(np.max(per_step)), "sensitivity": sens}


@constrained(factorization=FACTORIZATION, d=Integer(min=1), rng=RNG)
def noise_for_steps(factorization: Factorization, d: int, rng: object) -> np.ndarray:
    """The correlated noise D z (n×d) the n steps add per unit of noise std: z ~ N(0, I) (m×d)
    from ``rng`` (a numpy Generator or an integer seed), D = :func:`decoder`; Cov of column j is
    D Dᵀ. For figures and tests (the trainer streams it, :mod:`dplib.training.correlated`).
    Floating-point noise (numpy's Gaussian), not hardened against the attack of Mironov 2012."""
    gen = rng
    D = decoder(factorization)
    return D @ gen.standard_normal((D.shape[1], d))
