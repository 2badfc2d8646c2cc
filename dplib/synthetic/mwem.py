"""MWEM: multiplicative weights with the exponential mechanism (Hardt, Ligett & McSherry 2012).

The algorithm keeps a synthetic distribution A over the *full* domain (every combination of column
values; a vector of ``prod(sizes)`` weights, so this implementation is for small domains) and,
for T rounds (Hardt, Ligett & McSherry 2012, Algorithm 1):

1. **select** the workload marginal q on which A is worst, privately: the exponential mechanism
   (McSherry & Talwar 2007) with score s(q) = ‖q(A) − q(D)‖₁ and parameter ε_sel;
2. **measure** it: m = q(D) + Lap(b)^{cells}, b = 1/ε_meas (Dwork & Roth 2014, Def. 3.3);
3. **update** A by multiplicative weights: A(x) ← A(x)·exp(q(x)(m − q(A))/(2n̂)) for every
   counting query of the marginal (Hardt, Ligett & McSherry 2012, Algorithm 1, the update
   step), then rescale to n̂ records. Among the paper's practical improvements, the update is
   replayed over all measurements so far (``replay`` passes) — post-processing, free of privacy.

The original queries are single counting queries; here one "query" is a whole marginal (a set of
disjoint counting queries): the update applies Algorithm 1's rule to each of them at once, the
score and the Laplace noise are those of the whole marginal. Neighbouring data sets differ by
**adding or removing one record**. Then each marginal's L1 sensitivity is 1 (one cell changes
by 1), hence so is the score (by the triangle inequality, A being fixed given the earlier
outputs), and so is the record count.

Privacy: the record count n̂ = n + Lap(1/ε₀) uses ε₀ = ``total_fraction``·ε (the paper assumes n
public; under add/remove it is not, so it is measured); each of the T rounds spends
ε_sel = ε_meas = (1 − total_fraction)·ε/(2T). Laplace with b = Δ₁/ε_meas is ε_meas-DP (Dwork &
Roth 2014, Thm 3.6), the exponential mechanism is ε_sel-DP (McSherry & Talwar 2007, Thm 6), and
by basic composition (Dwork & Roth 2014, Thm 3.16, which holds also when each step is chosen
from the earlier outputs, as here) the whole run is
ε₀ + T(ε_sel + ε_meas) = ε-DP (pure): the argument of Hardt, Ligett & McSherry (2012), whose
Algorithm 1 gives ε/(2T) to each step. Sampling records from A is post-processing.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._constraints import constrained, unconstrained
from ..accounting._params import COUNT, POSITIVE
from ..mechanisms.exponential import exponential_mechanism
from ._params import FRACTION, TABULAR
from .data import TabularData, check_workload, release_seed_and_rng

__all__ = ["MWEMResult", "mwem", "mwem_budget", "MAX_DOMAIN"]

#: Largest full domain (cells) MWEM keeps as a dense vector here.
MAX_DOMAIN = 2_000_000


@unconstrained("result record returned by mwem")
@dataclass(frozen=True)
class MWEMResult:
    """Outcome of :func:`mwem`.

    ``histogram``: the released distribution A (probabilities over the full domain, shape
    ``data.sizes``); ``synthetic``: round(n̂) records drawn i.i.d. from it (post-processing);
    ``selected``: the workload index chosen in each round; ``measurements``: the noisy marginals
    (flattened); ``noise_scale``: the Laplace scale b of each cell; ``n_hat``: the noisy count.
    ``epsilon`` = ``epsilon_total`` + rounds·(``epsilon_select`` + ``epsilon_measure``).
    """
    histogram: np.ndarray
    synthetic: TabularData
    workload: tuple[tuple[str, ...], ...]
    selected: tuple[int, ...]
    measurements: tuple[np.ndarray, ...]
    noise_scale: float
    n_hat: float
    epsilon: float
    epsilon_total: float
    epsilon_select: float
    epsilon_measure: float
    rounds: int
    seed: int | None = None
    neighbouring: str = "add/remove one record"

    @property
    def event(self):
        """The run as a dplib event: the count's Laplace (noise multiplier 1/ε₀), then ``rounds``
        times an exponential-mechanism selection (pure ε_sel-DP,
        :class:`~dplib.reporting.PureDPEvent`) and a Laplace measurement of a marginal (L1
        sensitivity 1, noise multiplier b); add/remove. Accountants and
        :func:`dplib.reporting.privacy_report` read it."""
        from ..accounting import ComposedEvent, LaplaceEvent, SelfComposedEvent
        from ..reporting import PureDPEvent
        one_round = ComposedEvent((PureDPEvent(self.epsilon_select, "exponential"),
                                   LaplaceEvent(self.noise_scale)))
        return ComposedEvent((LaplaceEvent(1.0 / self.epsilon_total),
                              SelfComposedEvent(one_round, self.rounds)))


@constrained(epsilon=POSITIVE, rounds=COUNT, total_fraction=FRACTION)
def mwem_budget(epsilon: float, rounds: int, total_fraction: float = 0.05
                ) -> tuple[float, float, float]:
    """(ε₀, ε_sel, ε_meas) of an ε-DP MWEM run: ε₀ = f·ε for the record count and
    ε_sel = ε_meas = (1 − f)ε/(2T) per round, so ε₀ + T(ε_sel + ε_meas) = ε (basic composition,
    Dwork & Roth 2014, Thm 3.16; the per-round split of Hardt, Ligett & McSherry 2012, Alg. 1)."""
    eps, t, f = epsilon, rounds, total_fraction
    per = (1.0 - f) * eps / (2 * t)
    return f * eps, per, per


def _cell_indices(data: TabularData, workload: tuple[tuple[str, ...], ...]) -> list[np.ndarray]:
    """For each marginal, the cell of that marginal every point of the full domain falls in."""
    grid = np.indices(data.sizes).reshape(len(data.sizes), -1)
    out = []
    for clique in workload:
        idx = [data.index(c) for c in clique]
        out.append(np.ravel_multi_index(tuple(grid[i] for i in idx),
                                        tuple(data.sizes[i] for i in idx)))
    return out


@constrained(data=TABULAR, epsilon=POSITIVE, rounds=COUNT, total_fraction=FRACTION,
             replay=COUNT)
def mwem(data: TabularData, workload: object, epsilon: float, *, rounds: int = 10,
         total_fraction: float = 0.05, replay: int = 10,
         rng: np.random.Generator | int | None = None) -> MWEMResult:
    """ε-DP synthetic data by MWEM (Hardt, Ligett & McSherry 2012, Algorithm 1; module note).

    ``workload``: marginals (tuples of column names) to select from; ``rounds`` T;
    ``total_fraction``: the share of ε spent on the record count; ``replay``: multiplicative-
    weights passes (≥ 1) over all measurements so far, after each round (post-processing);
    ``rng``: a numpy Generator or seed (``None``: a fresh seed of 63 bits of OS entropy, recorded
    in the result as ``seed`` — a fixed seed is for experiments only).

    Vectorised over the full domain: A is one array of ``prod(sizes)`` weights; a marginal of A
    is one ``bincount`` over precomputed cell indices.

    Floating-point caveat: the Laplace noise is drawn by numpy's float sampler and the
    exponential mechanism inverts a float CDF: the noisy values can leak low-order bits as shown
    by Mironov (2012), so the ε-DP claim holds for the ideal real-valued mechanism; this is a
    teaching implementation, not a hardened release.
    """
    wl = check_workload(data, workload)
    eps, t = epsilon, rounds
    eps0, eps_sel, eps_meas = mwem_budget(eps, t, total_fraction)
    if data.domain_size > MAX_DOMAIN:
        raise ValueError(f"data has a domain of {data.domain_size} cells > {MAX_DOMAIN}: MWEM "
                         "keeps the full domain; use mst (a graphical model) instead")
    seed, gen = release_seed_and_rng(rng)
    cells = _cell_indices(data, wl)
    flat_data = np.ravel_multi_index(tuple(data.records.T), data.sizes)
    true_hist = np.bincount(flat_data, minlength=data.domain_size).astype(float)
    sizes = [int(np.prod([data.sizes[data.index(c)] for c in cl])) for cl in wl]
    true_marg = [np.bincount(c, weights=true_hist, minlength=m) for c, m in zip(cells, sizes)]

    # the record count: Laplace, L1 sensitivity 1 under add/remove (Dwork & Roth 2014, Thm 3.6)
    n_hat = max(float(data.n + gen.laplace(0.0, 1.0 / eps0)), 1.0)
    a = np.full(data.domain_size, n_hat / data.domain_size)
    b = 1.0 / eps_meas
    selected, measured = [], []
    for _ in range(t):
        err = np.array([np.abs(np.bincount(c, weights=a, minlength=m) - tm).sum()
                        for c, m, tm in zip(cells, sizes, true_marg)])
        k = int(exponential_mechanism(err, eps_sel, 1.0, rng=gen))
        selected.append(k)
        measured.append(true_marg[k] + gen.laplace(0.0, b, size=sizes[k]))
        for _ in range(replay):
            for j, m in zip(selected, measured):
                gap = m - np.bincount(cells[j], weights=a, minlength=sizes[j])
                a = a * np.exp(gap[cells[j]] / (2.0 * n_hat))
                a *= n_hat / a.sum()
    p = a / a.sum()
    rows = gen.choice(data.domain_size, size=int(round(n_hat)), p=p)
    synth = data.with_records(np.stack(np.unravel_index(rows, data.sizes), axis=1))
    return MWEMResult(histogram=p.reshape(data.sizes), synthetic=synth, workload=wl,
                      selected=tuple(selected), measurements=tuple(measured), noise_scale=b,
                      n_hat=n_hat, epsilon=eps, epsilon_total=eps0, epsilon_select=eps_sel,
                      epsilon_measure=eps_meas, rounds=t, seed=seed)
