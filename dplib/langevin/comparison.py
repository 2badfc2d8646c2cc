"""What chapter 7's comparison of DP-SGLD with DP-SGD computes besides the samplers (Ryffel,
Bach & Pointcheval 2022, §5 and Table 4).

* :func:`calibrate_noise_replace_one` — the DP-SGD baseline's noise multiplier under the
  replace-one adjacency of Theorem 3.1;
* :func:`table4_diagnostics` — the quantities of the paper's Table 4, which decide how
  Theorem 4.2's step count grows with n.

The runs of the comparison (data, models, seeds, the printed table) are experiment drivers:
:mod:`dplib.experiments.langevin`.
"""
from __future__ import annotations

from .._constraints import constrained
from ..accounting._params import COUNT, DELTA, POSITIVE, SAMPLE_RATE
from ._params import ORDER

__all__ = ["table4_diagnostics", "calibrate_noise_replace_one"]


@constrained(beta=POSITIVE, lam=POSITIVE, epsilon_rdp=POSITIVE, alpha=ORDER, n=COUNT, d=COUNT)
def table4_diagnostics(beta: float, lam: float, epsilon_rdp: float, alpha: float, n: int,
                       d: int) -> dict:
    """The quantities of Table 4 of Ryffel et al. (2022): β, β/λ and (εn²/(αd)) / (β/λ)².

    The last one decides whether Theorem 4.2's step count K = max((β/λ)·εn²/(αd),
    (λ/β)(εn²/(αd))²) grows like n² (ratio < 1, the first term wins) or n⁴ (ratio > 1).
    ``epsilon_rdp`` and ``alpha`` are the RDP pair (ε at order α) of the run.
    """
    ratio = epsilon_rdp * n**2 / (alpha * d)
    b_l = beta / lam
    return {"beta": beta, "beta_over_lam": b_l, "ratio": ratio / b_l ** 2,
            "K_theorem_4_2": max(b_l * ratio, ratio**2 / b_l)}


@constrained(target_epsilon=POSITIVE, delta=DELTA, sample_rate=SAMPLE_RATE, num_steps=COUNT)
def calibrate_noise_replace_one(target_epsilon: float, delta: float, sample_rate: float,
                                num_steps: int) -> float:
    """Noise multiplier σ making ``num_steps`` Poisson-subsampled Gaussian steps (DP-SGD)
    (ε, δ)-DP under *replace-one* adjacency, the relation of Theorem 3.1.

    :func:`dplib.training.train` accounts under add/remove, the convention of Opacus — which is
    also what the paper's DP-SGD baseline used. Replacing a record is a removal and an addition,
    so the same ε is a weaker promise under add/remove. Here σ is
    :func:`dplib.accounting.calibrate_noise` with the PLD accountant and
    ``neighboring="replace_one"`` (σ = noise std / C in both relations); ε(σ) ≤ target holds.
    """
    from ..accounting import calibrate_noise
    return calibrate_noise(target_epsilon, delta, sample_rate, num_steps, "pld",
                           neighboring="replace_one", rtol=2.5e-6)
