"""The Laplace mechanism, sensitivity of bounded means, and the floating-point pitfall.

Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006, Prop. 1; Dwork & Roth 2014, Def. 3.3 and
Thm 3.6): for a query f with ℓ1 sensitivity Δ₁ = max ‖f(D) − f(D')‖₁ over neighbouring D, D',
releasing f(D) + Z with Z_i iid Lap(0, b), b = Δ₁/ε, is ε-DP. The density of Lap(0, b) is
e^{−|z|/b}/(2b); E|Z| = b and P(|Z| ≥ t b) = e^{−t} (Dwork & Roth 2014, Fact 3.7).

The guarantee holds for whichever neighbouring relation Δ₁ was computed under (add/remove one
record, or replace one record): state it next to every Δ.

The textbook float sampler (inverse CDF of a uniform double) is *not* ε-DP on real hardware:
the set of doubles it can output depends on the input (Mironov 2012, §3). ``textbook_float_laplace``
reproduces it and ``float_laplace_reachable`` decides exactly whether an output could have come
from a given input; the chapter uses the two to show the leak. Use the discrete samplers of
``dplib.mechanisms.discrete`` on integer-valued queries instead.
"""
from __future__ import annotations


import numpy as np

from .._constraints import Integer, Interval, constrained
from ._checks import check_noise_scale, check_resolution
from ._params import EPSILON, EPSILONS, RNG, SCALE, SENSITIVITY, VALUE

__all__ = ["laplace_scale", "laplace_mechanism", "laplace_privacy_loss", "mean_sensitivity",
           "textbook_float_laplace", "float_laplace_reachable"]


@constrained(epsilon=EPSILONS, sensitivity=SENSITIVITY)
def laplace_scale(epsilon: float | np.ndarray, sensitivity: float = 1.0) -> np.ndarray | float:
    """Noise scale b = Δ₁/ε of the ε-DP Laplace mechanism (Dwork et al. 2006, Prop. 1).

    Vectorised over ``epsilon``. ``sensitivity`` is the ℓ1 sensitivity under the adjacency
    you use; it must be > 0 (a query with Δ = 0 needs no noise).
    """
    with np.errstate(over="ignore"):          # an overflow gives inf, refused by the mechanism
        b = sensitivity / epsilon
    return float(b) if b.ndim == 0 else b


@constrained(value=VALUE, epsilon=EPSILON, sensitivity=SENSITIVITY, rng=RNG)
def laplace_mechanism(value: float | np.ndarray, epsilon: float, sensitivity: float = 1.0, *,
                      rng: np.random.Generator | int) -> np.ndarray | float:
    """Release ``value`` + Lap(0, Δ₁/ε) noise, iid per coordinate: ε-DP (Dwork & Roth 2014, Thm 3.6).

    ``value`` is f(D), a scalar or an array (a vector query; then ``sensitivity`` is the ℓ1
    sensitivity of the whole vector). Returns a float for a scalar, else an array of its shape.
    The noise comes from numpy's float sampler: fine for teaching and simulation, but see the
    module note (Mironov 2012) before deploying.

    Refused: a scale Δ/ε that overflows or underflows (:func:`check_noise_scale`), and a value
    so large that doubles near it are more than Δ/1024 apart (:func:`check_resolution`).
    """
    x = value
    b = check_noise_scale("sensitivity/epsilon", laplace_scale(epsilon, sensitivity))
    check_resolution("value", x, sensitivity)
    out = x + rng.laplace(0.0, b, size=x.shape)
    return float(out) if out.ndim == 0 else out


@constrained(output=VALUE, scale=SCALE, sensitivity=SENSITIVITY)
def laplace_privacy_loss(output: float | np.ndarray, scale: float,
                         sensitivity: float = 1.0) -> np.ndarray | float:
    """Privacy loss ln p_D(o)/p_D'(o) of the Laplace mechanism with f(D)=0, f(D')=Δ (1-d).

    Equals (|o − Δ| − |o|)/b, so it lies in [−Δ/b, Δ/b] = [−ε, ε] for b = Δ/ε (Dwork & Roth
    2014, proof of Thm 3.6). Vectorised over ``output``.
    """
    o, b, d = output, scale, sensitivity
    loss = (np.abs(o - d) - np.abs(o)) / b
    return float(loss) if loss.ndim == 0 else loss


@constrained(n=Integer(min=1), bound=Interval(0.0, np.inf))
def mean_sensitivity(n: int, bound: float) -> float:
    """Sensitivity 2c/n of the mean of n records with ‖x_i‖ ≤ c, under **replace-one** adjacency.

    Replacing x_i by x_i' moves the mean by (x_i' − x_i)/n, of norm at most 2c/n in the norm the
    bound is stated in (ℓ1 for Laplace, ℓ2 for Gaussian). The "Mean estimation" example of
    ``RazaviyaynLecture11``; Dwork & Roth 2014, §3.3. Under add/remove adjacency n itself changes and is private: release the
    sum (sensitivity c) and the count (sensitivity 1) instead, then divide (post-processing).
    """
    return 2.0 * bound / n


# --- Mironov (2012): the textbook float sampler and exact reachability of its outputs ---------

_TWO52 = 2.0 ** 52


@constrained(value=Interval(-np.inf, np.inf), scale=SCALE, size=Integer(min=1), rng=RNG)
def textbook_float_laplace(value: float, scale: float, size: int, *,
                           rng: np.random.Generator | int) -> np.ndarray:
    """``size`` outputs of value + Lap(scale) computed the *textbook* way, in IEEE doubles.

    U = rng.random() − 1/2 (numpy's uniform doubles are k·2⁻⁵³), then
    X = value − scale·sgn(U)·ln(1 − 2|U|) (inverse CDF). This is the sampler Mironov (2012, §2.2)
    attacks; it exists here only to demonstrate the attack. Draws with 1 − 2|U| = 0 (probability
    2⁻⁵³) are redrawn so that no output is infinite.
    """
    mu, b, gen = value, scale, rng
    u = gen.random(size) - 0.5
    while np.any(u == -0.5):
        bad = u == -0.5
        u[bad] = gen.random(int(bad.sum())) - 0.5
    return mu - b * np.sign(u) * np.log(1.0 - 2.0 * np.abs(u))


@constrained(output=VALUE, value=Interval(-np.inf, np.inf), scale=SCALE,
             window=Integer(min=1))
def float_laplace_reachable(output: float | np.ndarray, value: float, scale: float, *,
                            window: int = 64) -> np.ndarray | bool:
    """Whether each double in ``output`` can be produced by :func:`textbook_float_laplace`
    from ``value`` — decided exactly, by re-running the float computation (Mironov 2012, §3).

    Every uniform double U = k·2⁻⁵³ − 1/2 gives 1 − 2|U| = m·2⁻⁵² for an integer m in [1, 2⁵²], so
    the reachable outputs are fl(value − fl(±scale·ln(m·2⁻⁵²))). For each output we invert the
    CDF to the nearest m and test every m within ``window`` of it, with both signs.
    """
    y, mu, b = output, value, scale
    flat = y.reshape(-1)
    z = np.abs(flat - mu)
    m0 = np.rint(_TWO52 * np.exp(-z / b))
    offsets = np.arange(-window, window + 1, dtype=float)
    m = m0[:, None] + offsets[None, :]
    m = np.where((m >= 1) & (m <= _TWO52), m, np.nan)
    noise = -b * np.log(m / _TWO52)            # scale·(−ln(1 − 2|U|)) ≥ 0, exactly as sampled
    hit = np.zeros(flat.shape, dtype=bool)
    for s in (1.0, -1.0):
        # sampler: value − scale·sgn(U)·ln(1−2|U|) = value + sgn(U)·noise
        cand = mu + s * noise
        hit |= np.any(cand == flat[:, None], axis=1)
    hit = hit.reshape(y.shape)
    return bool(hit) if hit.ndim == 0 else hit
