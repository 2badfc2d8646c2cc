"""Chapter 12's audits of the median releases: noise scaled to the *local* sensitivity refuted,
smooth sensitivity and propose-test-release not.

The pair (replace-one, data in [0, 10], n = 5): D = (0, 0, 0, 0, 10) and D' = (0, 0, 0, 10, 10).
Both have median 0. On D the local sensitivity of the median is 0 (its two neighbours in sorted
order equal it); on D' it is 10. So "median + Lap(LS(x)/ε)" — the tempting release that NRS07
(§1.2) warn against — outputs exactly 0 on D and a continuous value on D': the event
{output = 0} has probability 1 against 0, and no finite ε holds. The same pair is given to
:func:`~dplib.selection.smooth_sensitivity.smooth_median` (ε-DP with Cauchy noise; (ε, δ) with
Laplace) and :func:`~dplib.selection.ptr.ptr_median` ((2ε, δ)-DP; ⊥ is mapped to −10⁶), whose
claims must survive. Audits as in :mod:`dplib.experiments.mechanism_audits`
(:class:`~dplib.attacks.catalogue.MechanismAudit`): lower bounds on ε at 95% confidence from
held-out runs (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021).
"""
from __future__ import annotations

import numpy as np

from .._common_params import FRACTION_OPEN, RNG
from .._constraints import Integer, Interval, constrained
from ..attacks.catalogue import MechanismAudit
from ..selection.ptr import ptr_median
from ..selection.smooth_sensitivity import median_sensitivity_at_distance, smooth_median

__all__ = ["median_audits", "median_audit_table"]

_D = np.array([0.0, 0.0, 0.0, 0.0, 10.0])
_DP = np.array([0.0, 0.0, 0.0, 10.0, 10.0])
_LO, _HI = 0.0, 10.0


def _local_noise_median(x: np.ndarray, eps: float, n: int, g: np.random.Generator) -> np.ndarray:
    """BROKEN on purpose: median + Lap(LS(x)/ε), n releases (the audit's subject only)."""
    ls = median_sensitivity_at_distance(x, _LO, _HI)[0]
    med = np.sort(x)[(x.size + 1) // 2 - 1]
    return med + (g.laplace(0.0, ls / eps, n) if ls > 0 else np.zeros(n))


#: ε ∈ (0, 5] and δ ∈ (0, 0.1] of the audited releases.
_EPSILON = Interval(0.0, 5.0, closed="right", family="pos")
_DELTA = Interval(0.0, 0.1, closed="right")


@constrained(epsilon=_EPSILON, delta=_DELTA)
def median_audits(epsilon: float = 1.0, delta: float = 1e-3) -> list[MechanismAudit]:
    """The audits of the module note at ``epsilon`` ∈ (0, 5] and ``delta`` ∈ (0, 0.1]: the
    broken local-sensitivity release, the smooth-sensitivity median (Cauchy, ε-DP; Laplace,
    (ε, δ)) and propose-test-release with bound 1 ((2ε, δ))."""
    eps, dlt = epsilon, delta

    def broken(n, g):
        return ((_local_noise_median(_D, eps, n, g) == 0).astype(float),
                (_local_noise_median(_DP, eps, n, g) == 0).astype(float))

    def cauchy(n, g):
        return (smooth_median(_D, eps, _LO, _HI, size=n, rng=g).value,
                smooth_median(_DP, eps, _LO, _HI, size=n, rng=g).value)

    def laplace(n, g):
        return (smooth_median(_D, eps, _LO, _HI, delta=dlt, size=n, rng=g).value,
                smooth_median(_DP, eps, _LO, _HI, delta=dlt, size=n, rng=g).value)

    def ptr(n, g):
        def out(x):
            v = ptr_median(x, eps, dlt, 1.0, _LO, _HI, size=n, rng=g).value
            return np.where(np.isnan(v), -1e6, v)
        return out(_D), out(_DP)
    return [MechanismAudit("BROKEN median + Lap(local sensitivity/ε)", eps, 0.0, broken,
                           broken=True, note="NRS07 §1.2: local sensitivity leaks"),
            MechanismAudit("smooth_median[cauchy]", eps, 0.0, cauchy, note="NRS07, ε-DP"),
            MechanismAudit("smooth_median[laplace]", eps, dlt, laplace, note="NRS07, (ε, δ)"),
            MechanismAudit("ptr_median[bound=1]", 2 * eps, dlt, ptr,
                           note="Dwork & Lei 2009, (2ε, δ)")]


@constrained(epsilon=_EPSILON, delta=_DELTA, n=Integer(min=100, family="int1"), rng=RNG,
             confidence=FRACTION_OPEN)
def median_audit_table(epsilon: float = 1.0, delta: float = 1e-3, *, n: int = 20000,
                       rng: np.random.Generator | int, confidence: float = 0.95) -> list[dict]:
    """Run :func:`median_audits` with ``n`` runs per side; one row per audit: ``name``,
    ``broken``, ``claimed`` ε, ``delta``, ``epsilon_lower`` (the audit's bound), ``refuted``
    (bound > claimed). ``rng``: the auditor's generator or seed. About 1 s at the defaults."""
    conf, g = confidence, rng
    rows = []
    for audit in median_audits(epsilon, delta):
        res = audit.run(n, rng=g, confidence=conf)
        rows.append({"name": audit.name, "broken": audit.broken,
                     "claimed": float(audit.claimed_epsilon), "delta": float(audit.delta),
                     "epsilon_lower": float(res.epsilon_lower),
                     "refuted": bool(res.epsilon_lower > audit.claimed_epsilon)})
    return rows
