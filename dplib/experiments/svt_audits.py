"""Chapter 12's audits of the sparse vector technique: every broken variant refuted, the correct
ones not (the variants themselves are :mod:`dplib.selection.sparse_vector`).

Each audit is a :class:`~dplib.attacks.catalogue.MechanismAudit`:
the variant runs n times on a fixed pair of neighbouring query-answer vectors, a scalar
statistic of each run's output goes to :func:`~dplib.attacks.audit_stats.audit_from_samples`,
which returns a lower bound on ε valid with the chosen confidence (Jagielski, Ullman & Oprea
2020; Nasr et al. 2021). A lower bound above the claimed ε refutes the claim.

The pairs (Δ = 1, T = 0; every query moves by at most Δ, in either direction — the general,
non-monotone queries SVT is stated for):

* **pattern pair** — m "below" queries (0 on D, 1 on D') followed by h "above" queries (1 on D,
  0 on D'), statistic: how many answers agree with ⊥^m ⊤^h. Moving the two groups in opposite
  directions is what the correct proof pays for with noise ν_i ∝ c (Lyu, Su & Li 2017, the
  privacy proof of their Algorithm 1, §3): Lee & Clifton's noise, which does not grow with c,
  and Chen et al.'s, with no limit on ⊤, lose to it.
* **order pair** — D = (0, 1), D' = (1, 0) with no query noise (Stoddard et al.): the output
  (⊥, ⊤) needs 0 < T + ρ ≤ 1 on D and is impossible on D'.
* **value pair** — m ⊥ queries (0 on D, 1 on D') then one query at 0 on both, c = 1, statistic:
  minus the released noisy value when the output is ⊥^m ⊤, else −10⁶. A low released value
  pins the threshold noise low, where each ⊥ is e^{Δ/b_ν} times likelier on D (Lyu et al.
  2017, Algorithm 3 and Table 1).

The correct variants are audited on the same pairs (their statistic: the pattern indicator,
since they release no values) and must not be refuted.
"""
from __future__ import annotations

import numpy as np

from .._common_params import FRACTION_OPEN, RNG
from .._constraints import Integer, Interval, constrained
from ..attacks.catalogue import MechanismAudit
from ..selection.sparse_vector import SVT_VARIANTS, sparse_vector

__all__ = ["svt_audits", "svt_audit_table"]


def _runs(variant: str, q_d: np.ndarray, q_dp: np.ndarray, c: int, eps: float, n: int,
          g: np.random.Generator):
    k = q_d.size
    r_d = sparse_vector(np.broadcast_to(q_d, (n, k)), 0.0, eps, c, variant=variant, rng=g)
    r_dp = sparse_vector(np.broadcast_to(q_dp, (n, k)), 0.0, eps, c, variant=variant, rng=g)
    return r_d, r_dp


def _pattern_audit(variant: str, m: int, h: int, eps: float) -> MechanismAudit:
    q_d = np.r_[np.zeros(m), np.ones(h)]
    q_dp = 1.0 - q_d

    def sample(n, g):
        r_d, r_dp = _runs(variant, q_d, q_dp, h, eps, n, g)
        return ((r_d.answers == q_d).sum(-1).astype(float),
                (r_dp.answers == q_d).sum(-1).astype(float))
    v = SVT_VARIANTS[variant]
    return MechanismAudit(f"svt[{variant}] pattern ⊥^{m}⊤^{h}", v.claimed(eps, h), 0.0, sample,
                          broken=not v.correct,
                          note=f"{v.source}; actual ε = {v.actual(eps, h):g}")


def _order_audit(variant: str, eps: float) -> MechanismAudit:
    q_d, q_dp = np.array([0.0, 1.0]), np.array([1.0, 0.0])

    def sample(n, g):
        r_d, r_dp = _runs(variant, q_d, q_dp, 1, eps, n, g)
        target = np.array([0, 1])
        return ((r_d.answers == target).all(-1).astype(float),
                (r_dp.answers == target).all(-1).astype(float))
    v = SVT_VARIANTS[variant]
    return MechanismAudit(f"svt[{variant}] order (0,1) vs (1,0)", v.claimed(eps, 1), 0.0, sample,
                          broken=not v.correct, note=f"{v.source}; actual ε = {v.actual(eps, 1):g}")


def _value_audit(variant: str, m: int, eps: float) -> MechanismAudit:
    q_d, q_dp = np.r_[np.zeros(m), [0.0]], np.r_[np.ones(m), [0.0]]
    v = SVT_VARIANTS[variant]

    def stat(r):
        hit = (r.answers[:, :m] == 0).all(-1) & (r.answers[:, m] == 1)
        if not v.outputs_values:
            return hit.astype(float)
        return np.where(hit, -np.nan_to_num(r.values[:, m]), -1e6)

    def sample(n, g):
        r_d, r_dp = _runs(variant, q_d, q_dp, 1, eps, n, g)
        return stat(r_d), stat(r_dp)
    return MechanismAudit(f"svt[{variant}] value ⊥^{m}⊤", v.claimed(eps, 1), 0.0, sample,
                          broken=not v.correct, note=f"{v.source}; actual ε = {v.actual(eps, 1):g}")


#: The claimed ε ∈ (0, 5] of the audited variants.
_EPSILON = Interval(0.0, 5.0, closed="right", family="pos")
#: Runs per side, ≥ 100.
_RUNS = Integer(min=100, family="int1")


@constrained(epsilon=_EPSILON)
def svt_audits(epsilon: float = 1.0) -> list[MechanismAudit]:
    """The audits of the module note at claimed level ``epsilon`` ∈ (0, 5]: one refuting audit
    per broken variant of Lyu, Su & Li (2017) — Alg. 3 (value pair, m = 8), Alg. 4 (pattern
    pair ⊥^10⊤^5), Alg. 5 (order pair), Alg. 6 (pattern pair ⊥^10⊤^10) — and the two correct
    variants on each of those pairs. Sizes that refute at ε = 1 (measured over seeds 0–2): Alg. 3
    needs about 2·10⁵ runs per side (at 10⁵ its bound fell to 1.06), the others 5·10³."""
    return [audit for _, _, audit in _audits_with_c(epsilon)]


def _audits_with_c(eps: float) -> list[tuple[str, int, MechanismAudit]]:
    """(variant, c, audit) for every audit of :func:`svt_audits`."""
    out = [("roth_notes", 1, _value_audit("roth_notes", 8, eps)),
           ("lee_clifton", 5, _pattern_audit("lee_clifton", 10, 5, eps)),
           ("stoddard", 1, _order_audit("stoddard", eps)),
           ("chen", 10, _pattern_audit("chen", 10, 10, eps))]
    for good in ("lyu_alg1", "dwork_roth"):
        out += [(good, 1, _value_audit(good, 8, eps)), (good, 5, _pattern_audit(good, 10, 5, eps)),
                (good, 1, _order_audit(good, eps)), (good, 10, _pattern_audit(good, 10, 10, eps))]
    return out


@constrained(epsilon=_EPSILON, n=_RUNS, n_values=_RUNS, rng=RNG, confidence=FRACTION_OPEN)
def svt_audit_table(epsilon: float = 1.0, *, n: int = 20000, n_values: int = 200000,
                    rng: np.random.Generator | int, confidence: float = 0.95) -> list[dict]:
    """Run :func:`svt_audits` and return one row per audit: ``name``, ``variant``, ``broken``,
    ``claimed`` ε, ``actual`` ε (Lyu et al. 2017; inf = no finite ε), ``epsilon_lower`` (the
    audit's bound at ``confidence``), ``refuted`` (bound > claimed), ``c`` and ``runs`` per side.

    ``n`` runs per side for each audit, ``n_values`` for the value-pair audits (the event that
    refutes Alg. 3 is rare). ``rng``: the auditor's generator or seed (the audit's randomness,
    not a release). About 3 s at the defaults on one CPU core."""
    eps, conf, g = epsilon, confidence, rng
    rows = []
    for variant, c, audit in _audits_with_c(eps):
        runs = n_values if " value " in audit.name else n
        res = audit.run(runs, rng=g, confidence=conf)
        rows.append({"name": audit.name, "variant": variant, "broken": audit.broken, "c": c,
                     "claimed": float(audit.claimed_epsilon),
                     "actual": float(SVT_VARIANTS[variant].actual(eps, c)),
                     "epsilon_lower": float(res.epsilon_lower),
                     "refuted": bool(res.epsilon_lower > audit.claimed_epsilon), "runs": runs})
    return rows
