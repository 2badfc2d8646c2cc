"""MST: the maximum-spanning-tree method of McKenna, Miklau & Sheldon (2021), a generalisation of
their winning entry in the 2018 NIST Differential Privacy Synthetic Data Challenge.

On d categorical columns and a budget of ρ-zCDP (Bun & Steinke 2016, Def. 1.1) split in three
equal parts (McKenna, Miklau & Sheldon 2021, the MST mechanism; the authors' reference code is
``mechanisms/mst.py`` of their private-pgm repository):

1. **measure every 1-way marginal** with Gaussian noise N(0, σ₁²) per cell. Under add/remove one
   record a marginal has L2 sensitivity 1, so one measurement is 1/(2σ₁²)-zCDP (Bun & Steinke
   2016, Prop. 1.6); d of them compose additively (their Lemma 1.7): σ₁ = √(d/(2ρ₁)).
2. **select a spanning tree** of pairs of columns: Kruskal's algorithm in which each of the d − 1
   edges is picked by the exponential mechanism among the pairs that join two components, with
   score w_ij = ‖M_ij(D) − M_ij(Â)‖₁ (how badly the model Â fitted to step 1 — a product of the
   1-way estimates — gets the pair's marginal; sensitivity 1). The exponential mechanism with
   parameter ε (probabilities ∝ exp(ε w/2)) is ε-bounded-range (Durfee & Rogers 2019) and hence
   ε²/8-zCDP (Cesar & Rogers 2021), so ε_sel = √(8ρ₂/(d − 1)) per edge.
3. **measure the d − 1 selected 2-way marginals**: σ₂ = √((d − 1)/(2ρ₃)).
4. **generate**: Private-PGM (McKenna, Sheldon & Miklau 2019) fits a graphical model to all the
   noisy measurements (the authors' library ``mbi``, mirror descent on the L2 loss weighted by
   1/σ); records are then drawn from it — post-processing.

ρ = ρ₁ + ρ₂ + ρ₃ in total, reported as (ε, δ)-DP by the tight conversion of Canonne, Kamath &
Steinke (2020, Cor. 13), :func:`dplib.accounting.zcdp_epsilon`; for a target (ε, δ) the budget
takes the largest ρ that converts to at most ε (:func:`dplib.accounting.rho_for_epsilon`).

Differences from the authors' code, stated: the domain is not compressed (their step merges
rare values; the domains here are small), the 1-way model of step 2 is computed in closed form
(with 1-way measurements only, the Private-PGM loss separates over columns and its minimiser
is each noisy marginal projected onto the simplex scaled to the estimated total: the exact
minimiser that Private-PGM's iterations approach), and records are drawn i.i.d. from the fitted tree model by ancestral sampling with
``rng`` (the library's own sampler uses numpy's global generator).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .._constraints import Integer, constrained, unconstrained
from ..accounting._params import COUNT, DELTA, POSITIVE
from ..mechanisms.exponential import exponential_mechanism
from ._params import TABULAR
from .data import TabularData, release_seed_and_rng

__all__ = ["MSTBudget", "MSTResult", "mst", "mst_budget"]


@unconstrained("record built by mst_budget from its checked arguments")
@dataclass(frozen=True)
class MSTBudget:
    """The budget of an MST run on ``n_columns`` columns (module note): total ``rho`` split in
    three; ``sigma_one_way`` σ₁, ``epsilon_select`` (per edge), ``sigma_two_way`` σ₂."""
    epsilon: float
    delta: float
    rho: float
    rho_one_way: float
    rho_select: float
    rho_two_way: float
    sigma_one_way: float
    epsilon_select: float
    sigma_two_way: float
    n_columns: int

    @property
    def event(self):
        """An MST run with this budget as a dplib event: d Gaussian measurements (noise
        multiplier σ₁, L2 sensitivity 1), d − 1 exponential-mechanism selections (ρ = ε_sel²/8
        each, :class:`~dplib.accounting.ZCDPEvent`; Cesar & Rogers 2021), d − 1 Gaussian
        measurements (σ₂); add/remove. It depends on the budget only, not on the data or the
        selected tree (McKenna, Miklau & Sheldon 2021, Algorithm 1)."""
        from ..accounting import ComposedEvent, GaussianEvent, SelfComposedEvent, ZCDPEvent
        d = self.n_columns
        return ComposedEvent((SelfComposedEvent(GaussianEvent(self.sigma_one_way), d),
                              SelfComposedEvent(ZCDPEvent(self.epsilon_select ** 2 / 8), d - 1),
                              SelfComposedEvent(GaussianEvent(self.sigma_two_way), d - 1)))


@constrained(epsilon=POSITIVE, delta=DELTA, n_columns=Integer(min=2))
def mst_budget(epsilon: float, delta: float, n_columns: int) -> MSTBudget:
    """ρ for (ε, δ) (:func:`dplib.accounting.rho_for_epsilon`) split ρ/3 each: σ₁ = √(d/(2ρ₁)) (d Gaussian
    measurements, Bun & Steinke 2016, Prop. 1.6 and Lemma 1.7), ε_sel = √(8ρ₂/(d − 1))
    (Cesar & Rogers 2021), σ₂ = √((d − 1)/(2ρ₃)); McKenna, Miklau & Sheldon 2021."""
    eps, d, k = epsilon, delta, n_columns
    from ..accounting.zcdp import rho_for_epsilon
    rho = rho_for_epsilon(eps, d)
    part = rho / 3.0
    return MSTBudget(epsilon=eps, delta=d, rho=rho, rho_one_way=part, rho_select=part,
                     rho_two_way=part, sigma_one_way=float(np.sqrt(k / (2 * part))),
                     epsilon_select=float(np.sqrt(8 * part / (k - 1))),
                     sigma_two_way=float(np.sqrt((k - 1) / (2 * part))), n_columns=k)


@unconstrained("result record returned by mst")
@dataclass(frozen=True)
class MSTResult:
    """Outcome of :func:`mst`: ``synthetic`` records (as many as the model's estimated total),
    the selected ``tree`` (pairs of column names), the noisy ``one_way``/``two_way``
    measurements (dicts keyed by clique), the ``budget`` and its ρ, ε, δ."""
    synthetic: TabularData
    tree: tuple[tuple[str, str], ...]
    one_way: dict
    two_way: dict
    budget: MSTBudget
    total: float
    seed: int | None = None
    neighbouring: str = "add/remove one record"

    @property
    def event(self):
        """The run as a dplib event: d Gaussian measurements (noise multiplier σ₁, L2
        sensitivity 1), d − 1 exponential-mechanism selections (ρ = ε_sel²/8 each,
        :class:`~dplib.accounting.ZCDPEvent`), d − 1 Gaussian measurements (σ₂); add/remove.
        Accountants and :func:`dplib.reporting.privacy_report` read it; it is
        ``budget.event`` (:attr:`MSTBudget.event`)."""
        return self.budget.event

    @property
    def rho(self) -> float:
        return self.budget.rho

    @property
    def epsilon(self) -> float:
        return self.budget.epsilon

    @property
    def delta(self) -> float:
        return self.budget.delta


def _simplex_projection(y: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``y`` onto {x ≥ 0, Σx = total} (Duchi et al. 2008, Fig. 1)."""
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, y.size + 1)
    r = int(np.nonzero(u - css / k > 0)[0][-1])
    return np.maximum(y - css[r] / (r + 1), 0.0)


def _select_tree(data: TabularData, one_way: dict, eps_sel: float,
                 gen: np.random.Generator) -> list[tuple[str, str]]:
    """Kruskal's algorithm with each edge chosen by the exponential mechanism (module note)."""
    sums = np.array([m.sum() for m in one_way.values()])
    var = np.array([m.size for m in one_way.values()], dtype=float)   # ∝ Var of each sum
    total = max(float((sums / var).sum() / (1.0 / var).sum()), 1.0)   # min-variance total
    probs = {c: _simplex_projection(m, total) / total for c, m in one_way.items()}
    pairs = list(combinations(data.columns, 2))
    score = np.array([np.abs(data.marginal(p) - total * np.outer(probs[(p[0],)],
                                                                 probs[(p[1],)])).sum()
                      for p in pairs])
    comp = {c: i for i, c in enumerate(data.columns)}
    tree = []
    for _ in range(len(data.columns) - 1):
        cand = [i for i, (a, b) in enumerate(pairs) if comp[a] != comp[b]]
        pick = cand[int(exponential_mechanism(score[cand], eps_sel, 1.0, rng=gen))]
        a, b = pairs[pick]
        old, new = comp[b], comp[a]
        comp = {c: (new if v == old else v) for c, v in comp.items()}
        tree.append((a, b))
    return tree


def _sample_tree(data: TabularData, model, tree: list[tuple[str, str]], rows: int,
                 gen: np.random.Generator) -> np.ndarray:
    """Ancestral sampling of a tree-structured model: the root from its 1-way marginal, then each
    child given its parent from the model's pair marginal (exact for a tree)."""
    out = np.zeros((rows, len(data.columns)), dtype=np.int64)
    adj: dict[str, list[str]] = {c: [] for c in data.columns}
    for a, b in tree:
        adj[a].append(b)
        adj[b].append(a)
    root = data.columns[0]
    p = np.maximum(np.asarray(model.project((root,)).datavector(flatten=False), float), 0)
    out[:, 0] = gen.choice(p.size, size=rows, p=p / p.sum())
    seen, queue = {root}, [root]
    while queue:
        parent = queue.pop(0)
        for child in adj[parent]:
            if child in seen:
                continue
            joint = np.asarray(model.project((parent, child)).datavector(flatten=False), float)
            cond = np.maximum(joint, 0) + 1e-300
            cdf = np.cumsum(cond / cond.sum(axis=1, keepdims=True), axis=1)
            pv = out[:, data.index(parent)]
            u = gen.random((rows, 1))
            out[:, data.index(child)] = np.minimum((cdf[pv] <= u).sum(axis=1), cdf.shape[1] - 1)
            seen.add(child)
            queue.append(child)
    return out


@constrained(data=TABULAR, epsilon=POSITIVE, delta=DELTA, iters=COUNT)
def mst(data: TabularData, epsilon: float, delta: float, *, iters: int = 1000,
        rng: np.random.Generator | int | None = None) -> MSTResult:
    """(ε, δ)-DP synthetic data by MST (McKenna, Miklau & Sheldon 2021; see the module note).

    ``iters``: mirror-descent iterations of Private-PGM (post-processing); ``rng``: a numpy
    Generator or seed (``None``: a fresh seed of 63 bits of OS entropy, recorded in the result
    as ``seed`` — a fixed seed is for experiments only).
    Needs the ``mbi`` package (imported here, on first use).

    Floating-point caveat: the Gaussian noise is drawn by numpy's float sampler, whose outputs
    can leak low-order bits (Mironov 2012); the stated ρ and (ε, δ) are those of the ideal
    real-valued mechanism: a teaching implementation, not a hardened release.
    """
    if len(data.columns) < 2:
        raise ValueError(f"data must have at least 2 columns (MST selects pairs), got "
                         f"{len(data.columns)}")
    budget = mst_budget(epsilon, delta, len(data.columns))
    seed, gen = release_seed_and_rng(rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # mbi warns about jax's float32 mode at import
        from mbi import Domain, LinearMeasurement
        from mbi.estimation import MirrorDescent
    s1, s2 = budget.sigma_one_way, budget.sigma_two_way
    one_way = {(c,): data.marginal((c,)) + gen.normal(0.0, s1, size=k)
               for c, k in zip(data.columns, data.sizes)}
    # canonical order (columns and edges by position): the same tree gives the same Private-PGM
    # problem, which jax compiles once per process
    tree = sorted(tuple(sorted(e, key=data.index)) for e in
                  _select_tree(data, one_way, budget.epsilon_select, gen))
    tree = sorted(tree, key=lambda e: (data.index(e[0]), data.index(e[1])))
    two_way = {p: data.marginal(p) + gen.normal(0.0, s2, size=data.marginal(p).shape)
               for p in tree}
    domain = Domain(list(data.columns), list(data.sizes))
    measurements = ([LinearMeasurement(y.ravel(), cl, stddev=s1) for cl, y in one_way.items()]
                    + [LinearMeasurement(y.ravel(), cl, stddev=s2) for cl, y in two_way.items()])
    model = MirrorDescent().estimate(domain, measurements, iters=iters)
    total = max(float(model.total), 1.0)
    records = _sample_tree(data, model, tree, int(round(total)), gen)
    return MSTResult(synthetic=data.with_records(records), tree=tuple(tree), one_way=one_way,
                     two_way=two_way, budget=budget, total=total, seed=seed)
