"""Privacy accounting of Algorithm 1 for any symmetric noise: Lemma 4, Lemma 5 and Theorem 1 of
Nasr, Shokri & Houmansadr (2020), with the statements corrected where they need it.

**Mechanism and adjacency.** One step of Algorithm 1 as analysed here: every record is in the
batch independently with probability q (Poisson subsampling), each record's gradient is encoded on
its own (micro-batches of size 1), the encoded vectors are summed and noise with i.i.d. symmetric
coordinates is added. Neighbouring data sets differ by adding or removing one record. These are the
conventions of :mod:`dplib.accounting` (Opacus, dp-accounting), so that for Gaussian noise the two
accountants must agree — which the tests check to 1e-8.

**Lemma 4 (one code vector ψ), corrected.** For integer α ≥ 2,

    ε(α; q, ψ, z) = 1/(α − 1) · log Σ_{k=0}^{α} C(α, k) q^k (1 − q)^{α−k} Π_i I_k(ψ_i),

with I_k(τ) = ∫ (z(x; τ)/z(x; 0))^k z(x; 0) dx (:func:`dplib.encoding.moments.log_moments`). The
paper prints the prefactor as 1/(1 − α) (eqs. 5, 9, 16–23), which would make every ε negative
(the sum is ≥ 1); Rényi divergence has 1/(α − 1) (its own eq. 2). The binomial coefficient is also
missing in its eqs. 20–22 (it reappears in 23). The equality is exact for the "remove" direction
D_α((1 − q)Z(0) + qZ(ψ) ‖ Z(0)); the "add" direction D_α(Z(0) ‖ (1 − q)Z(0) + qZ(ψ)) is
guaranteed to be no larger only for *symmetric* noise: Theorem 2 of the appendix (Mironov, Talwar &
Zhang 2019, whose condition "α ≤ 1" is a typo for α ≥ 1) needs the involution ν(x) = ψ − x to map
Z(0) onto Z(ψ), i.e. z₀(x) = z₀(−x); for skewed noise the add direction can be far larger (tests).

**Lemma 5 (a code book Ψ).** ε(α; q, Ψ, z) ≤ max_{ψ∈Ψ} ε(α; q, ψ, z), maximised order by order.
Two unstated conditions make this cover what Algorithm 2 actually outputs:

* the encoded vector is *not* an element of Ψ: it is the gradient clamped coordinate-wise by a
  signed permutation of ψ. The bound above is invariant under permutations and sign flips of ψ
  (i.i.d. symmetric noise), and it covers the clamped vector when h_k = log I_k is
  non-decreasing in |τ| for every k (the sum in Lemma 4 has non-negative coefficients, so it is
  non-decreasing in every I_k). This holds analytically for Gaussian and Laplace noise and is
  verified numerically for every other family before any code book is accounted
  (:func:`~dplib.encoding.moments.check_monotone` for ``method="exact"``, the check of
  :class:`~dplib.encoding.moments.MomentTable` for ``"table"``); noise for which it fails is
  refused. It is not implied by the table's condition that h_k/τ² be non-increasing;
* one record must change the sum by *one* encoded vector, i.e. micro-batches of size 1. With
  micro-batches of several records, adding a record replaces one encoded vector by another, and
  the difference of two code vectors (norm up to 2) is what the noise must hide.

**Theorem 1.** RDP adds up over steps (Mironov 2017, Prop. 1); (ε, δ) comes from
:func:`dplib.accounting.rdp_to_epsilon` (the paper converts with Mironov 2017, Prop. 3 —
``conversion="classic"`` here).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from .._constraints import Custom, constrained, unconstrained
from .._validate import shown
from ..accounting import RDPAccountant, RDPCurveEvent, SelfComposedEvent, calibrate
from ..accounting._params import CONVERSION, COUNT, DELTA, POSITIVE, RTOL, SAMPLE_RATE
from ._params import (CODE_VECTOR, CODEBOOK_ARRAY, METHOD, NOISE, ORDERS_INT,
                      ORDERS_INT_OR_DEFAULT)
from .moments import (check_monotone, gaussian_log_moments, laplace_log_moments, log_moments,
                      moment_table)
from .noise import GaussianNoise, LaplaceNoise, NoiseDistribution

__all__ = ["INTEGER_ORDERS", "code_log_moments", "lemma4_rdp", "codebook_rdp",
           "EncodedStepEvent", "EncodingAccountant", "encoding_epsilon", "calibrate_noise_scale"]

#: Integer orders 2…64: Lemma 4 is stated for integer α only.
INTEGER_ORDERS: np.ndarray = np.arange(2, 65, dtype=float)



def _bracket(name: str, value: object) -> tuple[float, float]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of reals with 0 < low < high, "
                         f"got {shown(value)}") from None
    lo, hi = POSITIVE.check(f"{name}[0]", lo), POSITIVE.check(f"{name}[1]", hi)
    if not lo < hi:
        raise ValueError(f"{name} must be a pair (low, high) with low < high, got {shown(value)}")
    return lo, hi


#: The scales searched by :func:`calibrate_noise_scale`: 0 < low < high.
_BRACKET = Custom(_bracket, "a pair (low, high) of reals with 0 < low < high",
                  [None, 1.0, (0.0, 1.0), (-1.0, 1.0), (1.0, float("nan")), (2.0, 1.0),
                   (1.0, float("inf")), "ab"])


@constrained(codebook=CODEBOOK_ARRAY, noise=NOISE, orders=ORDERS_INT, method=METHOD)
def code_log_moments(codebook: object, noise: NoiseDistribution, orders: object, *,
                     method: str = "auto") -> np.ndarray:
    """L_k(ψ) = Σ_i log I_k(ψ_i) for every code vector ψ and integer k ∈ {0, …, max(orders)}.

    Returns an array (n_codes, max_order + 1) (column k holds L_k; L_0 = L_1 = 0).

    ``method``: ``"exact"`` integrates every distinct coordinate value (tests, small code books);
    ``"table"`` uses the cached :func:`~dplib.encoding.moments.moment_table` and its rigorous
    upper bound between grid points (fast for thousands of coordinates); both verify that h_k is
    non-decreasing in |τ| (the clamp of Algorithm 2 needs it; ``ValueError`` otherwise);
    ``"closed_form"`` only
    for Gaussian and Laplace noise (Mironov 2017); ``"auto"`` = exact up to 64 distinct values,
    else table.
    """
    codes = codebook
    k_all = np.arange(0, int(orders.max()) + 1, dtype=float)
    if method == "auto":
        method = "exact" if np.unique(codes).size <= 64 else "table"
    n = codes.shape[0]
    if method == "table":
        u = codes / noise.scale
        tab = moment_table(noise, int(k_all[-1]), max(float(u.max()), 1e-3))
        out = np.zeros((n, k_all.size))
        out[:, 2:] = tab.code_log_moments(u)
        return out
    uniq, inv = np.unique(codes, return_inverse=True)
    if method == "closed_form":
        if isinstance(noise, GaussianNoise):
            h = gaussian_log_moments(uniq, k_all, noise.scale)
        elif isinstance(noise, LaplaceNoise):
            h = laplace_log_moments(uniq, k_all, noise.scale)
        else:
            raise ValueError(f"method='closed_form' needs Gaussian or Laplace noise, got "
                             f"{shown(noise)}")
    else:
        # the clamp of Algorithm 2 is covered only if h_k is non-decreasing in |τ| (Lemma 5 note)
        check_monotone(noise, int(k_all[-1]), max(float(uniq.max()) / noise.scale, 1e-3))
        h = log_moments(noise, uniq, k_all)
    inv = inv.reshape(codes.shape)
    rows = np.repeat(np.arange(n), codes.shape[1])
    out = np.empty((n, k_all.size))
    for j in range(k_all.size):       # a loop over orders (≤ 65), not over coordinates
        out[:, j] = np.bincount(rows, weights=h[inv.ravel(), j], minlength=n)
    return out


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x − 1) for x ≥ 0 (−inf at 0), stable for tiny and huge x."""
    with np.errstate(divide="ignore"):
        return np.where(x > 1.0, x + np.log1p(-np.exp(-np.maximum(x, 1.0))),
                        np.log(np.expm1(np.minimum(x, 1.0))))


def _rdp_from_moments(alpha: np.ndarray, q: float, L: np.ndarray) -> np.ndarray:
    """Lemma 4 with the corrected prefactor, for every code (rows of L) and order α.

    log A_α = log Σ_k C(α,k) q^k (1−q)^{α−k} e^{L_k}
            = log1p(Σ_{k≥2} C(α,k) q^k (1−q)^{α−k} (e^{L_k} − 1)),
    because the binomial weights sum to 1 and L_0 = L_1 = 0 (I_0 = I_1 = 1). Every term is ≥ 0,
    so the sum has no cancellation (as in dplib.accounting.rdp for the Gaussian).
    Returns (n_codes, n_orders).
    """
    if q == 1.0:
        return L[:, alpha.astype(int)] / (alpha - 1.0)
    k = np.arange(2, L.shape[1], dtype=float)
    a = alpha[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_binom = gammaln(a + 1) - gammaln(k + 1) - gammaln(a - k + 1)
        w = log_binom + k * math.log(q) + (a - k) * math.log1p(-q)     # (n_a, n_k)
    w = np.where(k[None, :] <= a, w, -np.inf)
    terms = w[None, :, :] + _log_expm1(L[:, None, 2:])                  # (n, n_a, n_k)
    log_rest = logsumexp(terms, axis=2)
    return np.logaddexp(0.0, log_rest) / (alpha[None, :] - 1.0)


@constrained(orders=ORDERS_INT, sample_rate=SAMPLE_RATE, code_vector=CODE_VECTOR, noise=NOISE,
             method=METHOD)
def lemma4_rdp(orders: object, sample_rate: float, code_vector: object,
               noise: NoiseDistribution, *, method: str = "auto") -> np.ndarray:
    """RDP of one step of Algorithm 1 when every encoded gradient is (a clamp of a signed
    permutation of) the single code vector ψ — Lemma 4 of Nasr, Shokri & Houmansadr (2020), with
    the prefactor 1/(α − 1) (the paper prints 1/(1 − α)).

    Parameters
    ----------
    orders : integers α ≥ 2.
    sample_rate : q ∈ (0, 1], Poisson sampling probability.
    code_vector : ψ, a 1-D array (only |ψ_i| matters).
    noise : a symmetric :class:`~dplib.encoding.noise.NoiseDistribution`.
    method : see :func:`code_log_moments`.

    Returns one RDP value per order.
    """
    L = code_log_moments(code_vector, noise, orders, method=method)
    return _rdp_from_moments(orders, sample_rate, L)[0]


@constrained(orders=ORDERS_INT, sample_rate=SAMPLE_RATE, codebook=CODEBOOK_ARRAY, noise=NOISE,
             method=METHOD)
def codebook_rdp(orders: object, sample_rate: float, codebook: object,
                 noise: NoiseDistribution, *, method: str = "auto",
                 return_argmax: bool = False):
    """Lemma 5: max over ψ ∈ Ψ of :func:`lemma4_rdp`, order by order (one step).

    With ``return_argmax`` also returns, per order, the index of the code vector attaining it.
    """
    alpha = orders
    L = code_log_moments(codebook, noise, alpha, method=method)
    r = _rdp_from_moments(alpha, sample_rate, L)
    best = r.argmax(0)
    out = r[best, np.arange(alpha.size)]
    return (out, best) if return_argmax else out


class EncodedStepEvent(RDPCurveEvent):
    """One step of Algorithm 1 as an accounting event: a Poisson sample at rate q, each record's
    gradient encoded by ``codes`` (micro-batches of size 1), summed, plus i.i.d. ``noise``.

    Its curve is Lemma 5 (:func:`codebook_rdp`) under add/remove adjacency, at integer orders:
    a fractional order α is bounded by ⌈α⌉ (Rényi divergence is non-decreasing in the order;
    van Erven & Harremoës 2014, Thm 3). Replace-one is not analysed by the paper: refused."""

    @constrained(codes=CODEBOOK_ARRAY, noise=NOISE, sample_rate=SAMPLE_RATE, method=METHOD)
    def __init__(self, codes: np.ndarray, noise: NoiseDistribution, sample_rate: float, *,
                 method: str = "auto", cache: dict | None = None) -> None:
        self.codes, self.noise, self.sample_rate, self.method = codes, noise, sample_rate, method
        self._cache = {} if cache is None else cache

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        if neighboring != "add_remove":
            raise ValueError(f"neighboring must be 'add_remove' for the gradient encoding "
                             f"(Nasr et al. 2020, Lemma 4), got {shown(neighboring)}")
        whole = np.ceil(np.asarray(orders, dtype=float))
        key = (self.noise.key, self.noise.scale, self.sample_rate, self.method,
               tuple(np.unique(whole).tolist()))
        if key not in self._cache:
            self._cache[key] = codebook_rdp(np.unique(whole).astype(int), self.sample_rate,
                                            self.codes, self.noise, method=self.method)
        ints = np.unique(whole)
        return self._cache[key][np.searchsorted(ints, whole)]

    def __repr__(self) -> str:
        return (f"EncodedStepEvent({len(self.codes)} codes, {self.noise!r}, "
                f"q={self.sample_rate:g})")


class EncodingAccountant(RDPAccountant):
    """Theorem 1: RDP of Algorithm 1 over T steps = Σ_t per-step RDP (Lemma 5), then (ε, δ) — an
    :class:`~dplib.accounting.RDPAccountant` over integer orders composing
    :class:`EncodedStepEvent` (it composes any other event of that accountant as well).

    >>> import numpy as np
    >>> from dplib.encoding import GaussianNoise
    >>> codebook = np.full((1, 4), 0.5)                  # one code vector of norm 1
    >>> acc = EncodingAccountant(codebook).step(noise=GaussianNoise(1.0),
    ...                                         sample_rate=0.01, num_steps=1000)
    >>> round(acc.get_epsilon(1e-5), 2)       # the Gaussian of DP-SGD, σ = 1, on orders 2…64
    2.11

    Steps with different noise (the paper's Z_t) or sampling rates compose. The conversion is
    :func:`dplib.accounting.rdp_to_epsilon` over integer orders (``INTEGER_ORDERS`` by default);
    ``conversion="classic"`` is the paper's Lemma 2 (Mironov 2017, Prop. 3).
    """

    @constrained(codebook=CODEBOOK_ARRAY, orders=ORDERS_INT_OR_DEFAULT, conversion=CONVERSION,
                 method=METHOD)
    def __init__(self, codebook: object, orders: object = None, *, conversion: str = "improved",
                 method: str = "auto") -> None:
        self.codes = codebook
        super().__init__(INTEGER_ORDERS.copy() if orders is None else orders, conversion)
        self.method = method
        self._cache: dict = {}

    @constrained(noise=NOISE, sample_rate=SAMPLE_RATE)
    def event(self, noise: NoiseDistribution, sample_rate: float) -> EncodedStepEvent:
        """One step with ``noise`` at rate q on this accountant's code book."""
        return EncodedStepEvent(self.codes, noise, sample_rate, method=self.method,
                                cache=self._cache)

    @constrained(noise=NOISE, sample_rate=SAMPLE_RATE)
    def per_step_rdp(self, noise: NoiseDistribution, sample_rate: float) -> np.ndarray:
        """RDP of one step (Lemma 5) at every order of the accountant."""
        return self.event(noise, sample_rate).rdp(self.orders, self.neighboring)

    @constrained(noise=NOISE, sample_rate=SAMPLE_RATE, num_steps=COUNT)
    def step(self, *, noise: NoiseDistribution, sample_rate: float,
             num_steps: int = 1) -> "EncodingAccountant":
        return self.compose(SelfComposedEvent(self.event(noise, sample_rate), num_steps))


@constrained(codebook=CODEBOOK_ARRAY, noise=NOISE, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             delta=DELTA, orders=ORDERS_INT_OR_DEFAULT, conversion=CONVERSION, method=METHOD)
def encoding_epsilon(codebook: object, noise: NoiseDistribution, sample_rate: float,
                     num_steps: int, delta: float, *, orders: object = None,
                     conversion: str = "improved", method: str = "auto") -> float:
    """ε after ``num_steps`` steps of Algorithm 1 (Theorem 1), at δ."""
    acc = EncodingAccountant(codebook, orders, conversion=conversion, method=method)
    return acc.step(noise=noise, sample_rate=sample_rate, num_steps=num_steps).get_epsilon(delta)


@constrained(noise=NOISE, target_epsilon=POSITIVE, delta=DELTA, sample_rate=SAMPLE_RATE,
             num_steps=COUNT, codebook=CODEBOOK_ARRAY, orders=ORDERS_INT_OR_DEFAULT,
             conversion=CONVERSION, method=METHOD, bracket=_BRACKET, rtol=RTOL)
def calibrate_noise_scale(noise: NoiseDistribution, target_epsilon: float, delta: float,
                          sample_rate: float, num_steps: int, codebook: object, *,
                          orders: object = None, conversion: str = "improved",
                          method: str = "auto", bracket: tuple[float, float] = (0.05, 50.0),
                          rtol: float = 1e-4) -> NoiseDistribution:
    """The noise of ``noise``'s family with the smallest scale (to relative precision ``rtol``)
    that makes T steps of Algorithm 1 (target_epsilon, δ)-DP: ε decreases with the scale, the
    root is found in log scale and returned on the safe side, so ε ≤ target_epsilon holds."""
    eps, codes = target_epsilon, codebook
    lo, hi = bracket

    def accountant() -> EncodingAccountant:
        return EncodingAccountant(codes, orders, conversion=conversion, method=method)

    def event_of(s: float) -> SelfComposedEvent:
        return SelfComposedEvent(EncodedStepEvent(codes, noise.with_scale(s), sample_rate,
                                                  method=method), num_steps)
    try:
        scale = calibrate(event_of, eps, delta, accountant=accountant, rtol=rtol,
                          guess=(lo, hi), floor=lo, ceiling=hi)
    except ValueError as err:
        if "needs scale >" not in str(err):
            raise
        scale = None
    if scale is None or scale <= lo:
        raise ValueError(f"target_epsilon={eps:g} is not reached for scales in {bracket}; "
                         "widen bracket")
    return noise.with_scale(scale)
