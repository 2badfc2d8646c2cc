"""Apple's private count-mean sketch (CMS): local-DP frequency estimation over a dictionary.

Protocol (Apple Differential Privacy Team 2017, "Learning with Privacy at Scale", algorithms
A_client-CMS and A_server-CMS). Public parameters: the privacy parameter ε, a sketch of k rows
and m columns, and k hash functions h_1, …, h_k from the dictionary to {0, …, m−1}.

* **Client** (:func:`cms_client`), one value d per report: pick a row j uniformly at random; build
  v ∈ {−1, +1}^m with v[h_j(d)] = +1 and −1 elsewhere; flip every coordinate independently with
  probability 1/(1 + e^{ε/2}); send (j, ṽ). Two values d, d' give vectors that differ in at most
  two coordinates, each flip ratio is at most e^{ε/2}, and j does not depend on d, so one report
  is ε-LDP (replace-one: the report of one value against the report of any other).
* **Server** (:func:`cms_sketch`, :func:`cms_frequencies`): with c_ε = (e^{ε/2}+1)/(e^{ε/2}−1),
  each report adds x = k·(c_ε/2·ṽ + 1/2) to row j of a k × m matrix M (n reports in all);
  the estimate of the count of d is

      f̃(d) = m/(m−1) · ( (1/k)·Σ_l M[l, h_l(d)] − n/m ).

**What is unbiased.** E[c_ε/2·ṽ_c + 1/2] = 1{c = h_j(d)}, so E[M[l, c]] counts the reports that
hash to column c in row l. For *fixed* hash functions, E[f̃(d)] = m/(m−1)·(Σ_i p_i(d) − n/m)
with p_i(d) = (1/k)·#{l : h_l(d_i) = h_l(d)} (:func:`cms_expected`): the collisions of other
values with d bias the estimate. Averaged over hash functions drawn uniformly (collision
probability 1/m, as the analysis assumes), p_i(d) has mean 1/m for d_i ≠ d and E[f̃(d)] = f(d),
the true count. Given the hashes the reports are independent, and (derived here from the
protocol; ṽ_c ∈ {±1}, E[ṽ_{h_j(d)}] = (2p_i − 1)/c_ε)

      Var[f̃(d) | h] = (m/(m−1))² · Σ_i (c_ε² − (2p_i(d) − 1)²)/4          (:func:`cms_variance`).

Hashes here: a public table drawn once from a seed (:class:`CountMeanSketch`), fully random over
a dictionary of ``domain_size`` items indexed 0, …, D−1 — Apple hashes strings with SHA-256; a
random table is the idealised hash family of the analysis.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._constraints import Custom, InstanceOf, Integer, constrained
from .._validate import check_int, shown
from ..device import release_seed
from ._params import EPSILON, RNG

__all__ = ["CountMeanSketch", "cms_client", "cms_sketch", "cms_frequencies", "cms_expected",
           "cms_variance", "cms_flip_probability"]


@constrained(epsilon=EPSILON)
def cms_flip_probability(epsilon: float) -> float:
    """1/(1 + e^{ε/2}): the probability that the client flips one coordinate (Apple 2017,
    A_client-CMS), written as 1/(1+e^{ε/2}) = expit(−ε/2) without overflow."""
    return float(0.5 * (1.0 - math.tanh(epsilon / 4.0)))


@dataclass(frozen=True)
@constrained(epsilon=EPSILON, rows=Integer(min=1), columns=Integer(min=2),
             domain_size=Integer(min=1),
             hash_seed=Custom(lambda name, value: (None if value is None
                                                   else check_int(name, value, low=0)),
                              "None or an integer seed >= 0", [-1, 2.5, math.nan, "3", True],
                              family="seed"))
class CountMeanSketch:
    """The public parameters of a count-mean sketch: ε per report, ``rows`` k, ``columns`` m,
    a dictionary of ``domain_size`` items (indexed 0, …, D−1) and the random seed of the public
    hash table (None: fresh OS entropy, recorded in the object). ``hashes``: k × D, entry
    [l, d] = h_l(d), uniform on {0, …, m−1}, drawn from ``hash_seed``. Apple's emoji deployment used k = 65,536, m = 1024, ε = 4
    (:func:`dplib.deployments.apple_cms`)."""

    epsilon: float
    rows: int
    columns: int
    domain_size: int
    hash_seed: int | None = None
    hashes: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:       # after the declared checks of the fields
        if self.hash_seed is None:          # fresh public hash functions, recorded here
            object.__setattr__(self, "hash_seed", release_seed())
        if self.rows * self.domain_size > 1 << 28:
            raise ValueError(f"rows × domain_size must be at most 2**28 (the hash table is "
                             f"stored), got {self.rows} × {self.domain_size}")
        table = np.random.default_rng(self.hash_seed).integers(
            0, self.columns, size=(self.rows, self.domain_size))
        table.setflags(write=False)
        object.__setattr__(self, "hashes", table)

    @property
    def c_epsilon(self) -> float:
        """c_ε = (e^{ε/2}+1)/(e^{ε/2}−1) = 1/tanh(ε/4) (Apple 2017, A_server-CMS)."""
        return 1.0 / math.tanh(self.epsilon / 4.0)


#: The public parameters of the sketch the reports were made with.
_SKETCH = InstanceOf(CountMeanSketch, "a CountMeanSketch (e.g. CountMeanSketch(4.0, 16, 64, 100))")


def _check_values(values: object, sketch: CountMeanSketch) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype == bool or not np.issubdtype(arr.dtype,
                                                                                 np.integer):
        raise ValueError(f"values must be a non-empty 1-D array of dictionary indices (integers "
                         f"in [0, {sketch.domain_size})), got {shown(values)}")
    bad = (arr < 0) | (arr >= sketch.domain_size)
    if bad.any():
        raise ValueError(f"values must be dictionary indices in [0, {sketch.domain_size}), "
                         f"got {shown(int(arr[bad][0]))}")
    return arr.astype(np.int64)


@constrained(sketch=_SKETCH, rng=RNG)
def cms_client(values: object, sketch: CountMeanSketch, *,
               rng: np.random.Generator | int) -> tuple[np.ndarray, np.ndarray]:
    """Privatise one value per report on the device (Apple 2017, A_client-CMS), vectorised over
    the reports: row j uniform in {0, …, k−1}, v = −1 except v[h_j(d)] = +1, every coordinate
    flipped with probability 1/(1 + e^{ε/2}). ε-LDP per report (module docstring).

    Floating point (Mironov 2012): the randomness is coin flips compared with a float
    probability, no float noise is added to a value; the flip probability is rounded to a double,
    which moves the likelihood ratio by a relative ~1e-16, not the support of the output.

    Returns (rows: int64 array (n,), vectors: int8 array (n, m) of ±1).
    """
    sk = sketch
    d = _check_values(values, sk)
    gen = rng
    n, m = d.size, sk.columns
    rows = gen.integers(0, sk.rows, size=n)
    v = -np.ones((n, m), dtype=np.int8)
    v[np.arange(n), sk.hashes[rows, d]] = 1
    flip = gen.random((n, m)) < cms_flip_probability(sk.epsilon)
    return rows.astype(np.int64), np.where(flip, -v, v).astype(np.int8)


@constrained(sketch=_SKETCH)
def cms_sketch(rows: object, vectors: object, sketch: CountMeanSketch) -> np.ndarray:
    """The server's k × m matrix M (Apple 2017, A_server-CMS): each report adds
    k·(c_ε/2·ṽ + 1/2) to row j. Reports are (``rows``, ``vectors``) as :func:`cms_client`
    returns them."""
    sk = sketch
    j = np.asarray(rows)
    v = np.asarray(vectors)
    if (j.ndim != 1 or j.size == 0 or j.dtype == bool or not np.issubdtype(j.dtype, np.integer)
            or (j < 0).any() or (j >= sk.rows).any()):
        raise ValueError(f"rows must be a non-empty 1-D array of integers in [0, {sk.rows}), "
                         f"got {shown(rows)}")
    if v.shape != (j.size, sk.columns) or not ((v == 1) | (v == -1)).all():
        raise ValueError(f"vectors must be a ({j.size}, {sk.columns}) array of ±1, got shape "
                         f"{v.shape}")
    # Row l of M: x = k·(c_ε/2·ṽ + 1/2) of its reports added in their order, as
    # np.add.at(M, j, x) adds them (the same bits), several times faster: the reports stably
    # sorted by row, then one sum over each row's run (a sum along axis 0 adds the rows one after
    # the other). A loop over the sketch rows in use (at most min(n, k)), not over reports.
    order = np.argsort(j, kind="stable")
    js = j[order]
    x = sk.rows * (0.5 * sk.c_epsilon * v[order].astype(float) + 0.5)
    out = np.zeros((sk.rows, sk.columns))
    starts = np.flatnonzero(np.r_[True, js[1:] != js[:-1]])
    for row, a, b in zip(js[starts].tolist(), starts.tolist(), [*starts[1:].tolist(), js.size]):
        out[row] = x[a:b].sum(axis=0)
    return out


@constrained(sketch=_SKETCH)
def cms_frequencies(rows: object, vectors: object, sketch: CountMeanSketch) -> np.ndarray:
    """Debiased count estimates of every dictionary item from the reports (Apple 2017,
    A_server-CMS): f̃(d) = m/(m−1)·((1/k)·Σ_l M[l, h_l(d)] − n/m). Unbiased on average over
    the hash functions; for the fixed table, :func:`cms_expected` gives the mean. Returns an
    array of ``domain_size`` estimates (they can be negative: not clipped, clipping biases)."""
    sk = sketch
    mat = cms_sketch(rows, vectors, sk)
    n = np.asarray(rows).size
    k, m = sk.rows, sk.columns
    per_item = mat[np.arange(k)[:, None], sk.hashes].sum(axis=0) / k
    return m / (m - 1.0) * (per_item - n / m)


def _collision_fractions(counts: np.ndarray, sk: CountMeanSketch) -> np.ndarray:
    """P[d, e] = (1/k)·#{l : h_l(e) = h_l(d)} for every pair of dictionary items (D × D)."""
    h = sk.hashes
    return (h[:, :, None] == h[:, None, :]).mean(axis=0)


def _check_counts(true_counts: object, sk: CountMeanSketch) -> np.ndarray:
    arr = np.asarray(true_counts)
    if (arr.shape != (sk.domain_size,) or arr.dtype == bool
            or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any() or arr.sum() < 1):
        raise ValueError(f"true_counts must be {sk.domain_size} non-negative integers (one per "
                         f"dictionary item, at least one report), got {shown(true_counts)}")
    if sk.domain_size > 4096:
        raise ValueError(f"true_counts: the exact moments build a D × D table; domain_size "
                         f"must be at most 4096, got {sk.domain_size}")
    return arr.astype(float)


@constrained(sketch=_SKETCH)
def cms_expected(true_counts: object, sketch: CountMeanSketch) -> np.ndarray:
    """E[f̃(d) | hashes] = m/(m−1)·(Σ_e f(e)·P[d, e] − n/m) for every item d, where f are the true
    counts and P[d, e] the fraction of rows in which e collides with d (module docstring).
    Equals f(d) on average over uniformly drawn hashes, not for every table."""
    sk = sketch
    f = _check_counts(true_counts, sk)
    m = sk.columns
    return m / (m - 1.0) * (_collision_fractions(f, sk) @ f - f.sum() / m)


@constrained(sketch=_SKETCH)
def cms_variance(true_counts: object, sketch: CountMeanSketch) -> np.ndarray:
    """Var[f̃(d) | hashes] = (m/(m−1))²·Σ_e f(e)·(c_ε² − (2P[d, e] − 1)²)/4 for every item d:
    the reports are independent given the hashes and each contributes
    (c_ε/2)²·Var(ṽ) with ṽ ∈ {±1}, E[ṽ] = (2P − 1)/c_ε (derived from A_client-CMS in the
    module docstring)."""
    sk = sketch
    f = _check_counts(true_counts, sk)
    m, c = sk.columns, sk.c_epsilon
    per = (c * c - (2.0 * _collision_fractions(f, sk) - 1.0) ** 2) / 4.0
    return (m / (m - 1.0)) ** 2 * (per @ f)
