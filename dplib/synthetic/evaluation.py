"""How good, and how private, is a synthetic data set: marginal error, downstream accuracy, and a
membership audit of the release.

* :func:`marginal_error`: for each marginal of a workload, the L1 distance between the real and
  the synthetic marginal, each normalised to a distribution (so it lies in [0, 2]; twice the
  total-variation distance; McKenna, Miklau & Sheldon 2021 report the total-variation form).
* :func:`downstream_accuracy`: train a classifier on (real or synthetic) training records and
  test it on real held-out records ("train on synthetic, test on real", e.g. Jordon et al. 2022,
  "Synthetic Data — what, why and how?").
* :func:`synthetic_membership_audit`: run the generator many times on neighbouring data sets D
  (without a target record) and D' = D + target (add/remove, the relation the generators are
  private for), score each release by how much it favours the target, and turn the two samples
  of scores into a lower bound on ε with :func:`dplib.attacks.audit_stats.audit_from_samples`
  (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021). A lower bound above the stated ε would
  refute the claim; one below it is consistent with it (it proves nothing more).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._constraints import Integer, Interval, Options, constrained, unconstrained
from .._validate import shown
from ..accounting._params import COUNT, DELTA, POSITIVE
from ._params import TABULAR
from .data import TabularData, check_workload, release_seed_and_rng

__all__ = ["MarginalError", "marginal_error", "downstream_accuracy", "SyntheticAudit",
           "synthetic_membership_audit"]


def _same_schema(a: TabularData, b: TabularData, name: str) -> None:
    if a.columns != b.columns or a.sizes != b.sizes:
        raise ValueError(f"{name} must have the same columns and sizes as the real data "
                         f"({list(a.columns)}, {list(a.sizes)}), got {list(b.columns)}, "
                         f"{list(b.sizes)}")


@unconstrained("result record returned by marginal_error")
@dataclass(frozen=True)
class MarginalError:
    """``per_marginal[i]``: L1 distance between the normalised real and synthetic marginals of
    ``workload[i]`` (in [0, 2]); ``mean`` and ``max`` over the workload."""
    mean: float
    max: float
    per_marginal: tuple[float, ...]
    workload: tuple[tuple[str, ...], ...]


@constrained(real=TABULAR, synthetic=TABULAR)
def marginal_error(real: TabularData, synthetic: TabularData, workload: object) -> MarginalError:
    """Average and largest L1 error of ``synthetic``'s marginals against ``real``'s on
    ``workload``: ‖M(real)/n − M(synth)/m‖₁ per marginal (twice the total-variation distance
    that McKenna, Miklau & Sheldon 2021 report)."""
    _same_schema(real, synthetic, "synthetic")
    wl = check_workload(real, workload)
    errs = tuple(float(np.abs(real.marginal(c) / real.n - synthetic.marginal(c) / synthetic.n)
                       .sum()) for c in wl)
    return MarginalError(mean=float(np.mean(errs)), max=float(np.max(errs)), per_marginal=errs,
                         workload=wl)


def _one_hot(data: TabularData, skip: int) -> np.ndarray:
    blocks = [np.eye(k)[data.records[:, j]] for j, k in enumerate(data.sizes) if j != skip]
    return np.concatenate(blocks, axis=1)


@constrained(train=TABULAR, test=TABULAR, c=POSITIVE)
def downstream_accuracy(train: TabularData, test: TabularData, target: str | None = None, *,
                        c: float = 1.0) -> float:
    """Test accuracy on ``test`` of an L2-regularised logistic regression (scikit-learn,
    inverse strength ``c``) trained on ``train`` to predict ``target`` (default: the data's
    target column) from the one-hot codes of the other columns.

    Pass real training records for the baseline and synthetic ones for "train on synthetic, test
    on real". If ``train`` has a single value of the target, the classifier is that constant.
    Deterministic (lbfgs, no randomness).
    """
    _same_schema(train, test, "test")
    target = train.target if target is None else target
    if target is None or target not in train.columns:
        raise ValueError(f"target must be one of {list(train.columns)}, got {shown(target)}")
    j = train.index(target)
    y_train, y_test = train.records[:, j], test.records[:, j]
    if np.unique(y_train).size < 2:
        return float(np.mean(y_test == y_train[0]))
    from sklearn.linear_model import LogisticRegression
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit(_one_hot(train, j), y_train)
    return float(np.mean(clf.predict(_one_hot(test, j)) == y_test))


@unconstrained("result record returned by synthetic_membership_audit")
@dataclass(frozen=True)
class SyntheticAudit:
    """Outcome of :func:`synthetic_membership_audit`: the stated ``epsilon`` (and ``delta``),
    the audit's ``epsilon_lower`` (valid with probability ``audit.confidence``), ``refutes``
    (epsilon_lower > epsilon), the scores of the releases ``without``/``with`` the target,
    and the :class:`~dplib.attacks.audit_stats.AuditResult`."""
    method: str
    epsilon: float
    delta: float
    epsilon_lower: float
    refutes: bool
    without: np.ndarray
    with_target: np.ndarray
    audit: object
    runs: int


def _release_score(method: str, d: TabularData, cell: np.ndarray, epsilon: float, delta: float,
                   rounds: int, workload, seed: int) -> float:
    """Run the generator once and score its release by the weight it gives the target's cell:
    MWEM's released histogram at the cell (times n̂), or the number of MST's synthetic records
    equal to the target."""
    if method == "mwem":
        from .mwem import mwem
        r = mwem(d, workload, epsilon, rounds=rounds, rng=seed)
        return float(r.histogram[tuple(cell)] * r.n_hat)
    from .mst import mst
    r = mst(d, epsilon, delta, iters=200, rng=seed)
    return float(np.all(r.synthetic.records == cell, axis=1).sum())


@constrained(data=TABULAR, target=Integer(min=0), method=Options("mwem", "mst"),
             epsilon=POSITIVE, delta=DELTA, runs=Integer(min=4), rounds=COUNT,
             confidence=Interval(0.0, 1.0, closed="neither", family="frac_open"))
def synthetic_membership_audit(data: TabularData, target: int, *, method: str = "mwem",
                               epsilon: float, delta: float = 1e-5, runs: int = 200,
                               rounds: int = 3, workload: object = None,
                               confidence: float = 0.95,
                               rng: np.random.Generator | int) -> SyntheticAudit:
    """Neighbouring-data-set audit of a synthetic-data release (module note).

    D = ``data`` without record ``target`` (an index), D' = ``data``. The generator (``method``
    "mwem" with ``rounds`` and ``workload`` — default all 2-way marginals — or "mst" with
    ``delta``) runs ``runs`` times on each with seeds drawn from ``rng``; each release is scored
    (the weight it gives the target's cell, :func:`_release_score`) and
    :func:`~dplib.attacks.audit_stats.audit_from_samples` (half the runs choose a threshold, the
    other half count it) returns the lower bound at ``confidence``, with δ = 0 for MWEM (pure DP)
    and ``delta`` for MST. Pick a rare target (an outlier) to give the audit a chance.
    Cost: 2·``runs`` generator runs (MST compiles Private-PGM once per tree shape: use few
    columns).
    """
    from ..attacks.audit_stats import audit_from_samples
    t = target
    if t >= data.n:
        raise ValueError(f"target must be a record index in [0, {data.n - 1}], got {t}")
    if data.n < 2:
        raise ValueError(f"data must hold at least 2 records (D without the target must not be "
                         f"empty), got {data.n}")
    eps, dl = epsilon, delta
    if method == "mwem":
        from .data import all_marginals
        wl = all_marginals(data, min(2, len(data.columns))) if workload is None \
            else check_workload(data, workload)
    else:
        wl = None
    gen = release_seed_and_rng(rng)[1]
    seeds = gen.integers(0, 2**62, size=(2, runs))
    cell = data.records[t]
    d_without = data.with_records(np.delete(data.records, t, axis=0))
    s0 = np.array([_release_score(method, d_without, cell, eps, dl, rounds, wl, int(s))
                   for s in seeds[0]])
    s1 = np.array([_release_score(method, data, cell, eps, dl, rounds, wl, int(s))
                   for s in seeds[1]])
    audit_delta = 0.0 if method == "mwem" else dl
    res = audit_from_samples(s0, s1, delta=audit_delta, confidence=confidence)
    return SyntheticAudit(method=method, epsilon=eps, delta=audit_delta,
                          epsilon_lower=res.epsilon_lower, refutes=bool(res.refutes(eps)),
                          without=s0, with_target=s1, audit=res, runs=runs)
