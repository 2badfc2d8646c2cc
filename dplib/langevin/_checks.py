"""Small helpers shared by the modules of :mod:`dplib.langevin`: scalar-or-array results, the
feature-matrix check, and the starting point of the σ calibrations."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["as_output", "check_features", "zcdp_sigma_guess"]


def as_output(x: np.ndarray) -> np.ndarray | float:
    """A 0-d result as a Python float, anything else unchanged (the formulas broadcast)."""
    return float(x) if np.ndim(x) == 0 else x


def check_features(X: object) -> np.ndarray:
    """``X`` (a numpy array or torch tensor) as a finite float64 (n, p) array with n ≥ 1."""
    import torch

    x = X.detach().cpu().numpy() if torch.is_tensor(X) else np.asarray(X)
    if x.ndim != 2 or x.shape[0] == 0 or not np.issubdtype(x.dtype, np.number) \
            or not np.isfinite(x).all():
        raise ValueError(f"X must be a finite (n, p) array with n >= 1, got shape "
                         f"{getattr(x, 'shape', None)}")
    return x.astype(np.float64)


def zcdp_sigma_guess(rho_at_one: float, target_epsilon: float, delta: float) -> float:
    """A starting σ for a calibration whose RDP curve is about ρα with ρ = ``rho_at_one``/σ².

    Solves ε = ρ + 2√(ρ log(1/δ)) (ρ-zCDP to (ε, δ)-DP, Bun & Steinke 2016, Prop. 1.3) for ρ and
    returns √(rho_at_one/ρ), clipped to [1e-12, 1e12]; 1.0 when ``rho_at_one`` is not a positive
    number. Only a guess: the calibration brackets and solves from it.
    """
    lg = math.log(1.0 / delta)
    rho = (math.sqrt(lg + target_epsilon) - math.sqrt(lg)) ** 2
    if not (rho_at_one > 0 and math.isfinite(rho_at_one) and rho > 0):
        return 1.0
    return min(max(math.sqrt(rho_at_one / rho), 1e-12), 1e12)
