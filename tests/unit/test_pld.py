"""PLD accountant: against dp-accounting's PLD (pessimistic, h = 1e-4) and lower bounds, exact
single-step and Gaussian cases, pessimism of the discretisation, and bad input."""
import math

import numpy as np
import pytest
from scipy import integrate, optimize
from scipy.stats import norm

from dplib.accounting import PLDAccountant, RDPAccountant, subsampled_gaussian_pld

CASES = [(256 / 60000, 1.1, 14062, 2.3817), (0.01, 1.0, 1000, 1.8282), (0.1, 0.5, 1000, 126.17)]


def _dp_accounting_eps(q, sigma, T, pessimistic):
    from dp_accounting.pld import privacy_loss_distribution as pld
    d = pld.from_gaussian_mechanism(sigma, value_discretization_interval=1e-4, sampling_prob=q,
                                    pessimistic_estimate=pessimistic)
    return d.self_compose(T).get_epsilon_for_delta(1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,T,published", CASES)
def test_epsilon_matches_dp_accounting_and_is_above_lower_bound(q, sigma, T, published):
    """dplib's PLD ε matches dp-accounting's pessimistic PLD (and the published value), stays above
    its optimistic one and below RDP. Slow: up to 11 s of CPU, dp-accounting's two PLDs at
    T = 1000 on its default grid."""
    eps = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=T).get_epsilon(1e-5)
    upper = _dp_accounting_eps(q, sigma, T, pessimistic=True)
    lower = _dp_accounting_eps(q, sigma, T, pessimistic=False)
    assert upper == pytest.approx(published, rel=1e-3)
    assert eps == pytest.approx(upper, rel=5e-3)
    assert eps >= lower
    # PLD is tighter than RDP on these cases.
    rdp = RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=T).get_epsilon(1e-5)
    assert eps < rdp


def _exact_replace_delta(e, sigma, q):
    """Hockey-stick δ(ε) = ∫ (P − e^ε Q)_+ of the replace-one pair documented in pld.py,
    P = (1−q)N(0,σ²) + qN(1,σ²), Q = (1−q)N(0,σ²) + qN(−1,σ²), computed independently of the
    discretisation code: for q = 1 in closed form (a Gaussian pair with μ = 2/σ, Balle & Wang 2018,
    Thm 8), otherwise by numerical integration (scipy.integrate.quad), split at the point where
    P = e^ε Q (found by brentq on log P − log Q, not by pld.py's threshold formula)."""
    if q == 1.0:
        mu = 2.0 / sigma
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
    c = 1.0 / (sigma * math.sqrt(2 * math.pi))

    def dens(x, m):
        return c * ((1 - q) * math.exp(-x * x / (2 * sigma**2))
                    + q * math.exp(-(x - m) ** 2 / (2 * sigma**2)))

    def log_ratio(x):   # log P(x) − log Q(x), in log space so the tails do not underflow
        a = math.log1p(-q) - x * x / (2 * sigma**2)
        return (np.logaddexp(a, math.log(q) - (x - 1) ** 2 / (2 * sigma**2))
                - np.logaddexp(a, math.log(q) - (x + 1) ** 2 / (2 * sigma**2)))

    ee = math.exp(e)
    lo, hi = -1 - 40 * sigma, 1 + 40 * sigma
    cuts = [optimize.brentq(lambda x: log_ratio(x) - e, lo, hi, xtol=1e-14)] \
        if log_ratio(lo) < e < log_ratio(hi) else []
    edges = [-math.inf] + cuts + [math.inf]
    return sum(integrate.quad(lambda x: max(dens(x, 1.0) - ee * dens(x, -1.0), 0.0), a, b,
                              epsabs=1e-15, epsrel=1e-11, limit=200)[0]
               for a, b in zip(edges[:-1], edges[1:]))


def _exact_step_delta(eps, sigma, q, direction):
    """Hockey-stick δ(ε) of one step, in closed form (independent of the discretisation code)."""
    eps = np.asarray(eps, dtype=float)
    out = np.empty_like(eps)
    for k, e in enumerate(eps):
        if direction == "replace":
            out[k] = _exact_replace_delta(float(e), sigma, q)
        elif direction == "remove":   # P = mixture, Q = N(0,σ²); L > e ⇔ x > t
            if q < 1 and e <= math.log1p(-q):
                out[k] = 1 - math.exp(e)
                continue
            t = sigma**2 * math.log((math.expm1(e) + q) / q) + 0.5
            out[k] = ((1 - q) * norm.sf(t / sigma) + q * norm.sf((t - 1) / sigma)
                      - math.exp(e) * norm.sf(t / sigma))
        else:                       # P = N(0,σ²), Q = mixture; L > e ⇔ x < t
            if q < 1 and e >= -math.log1p(-q):
                out[k] = 0.0
                continue
            t = sigma**2 * math.log((math.expm1(-e) + q) / q) + 0.5
            out[k] = norm.cdf(t / sigma) - math.exp(e) * ((1 - q) * norm.cdf(t / sigma)
                                                         + q * norm.cdf((t - 1) / sigma))
    return out


@pytest.mark.parametrize("direction", ["remove", "add", "replace"])
@pytest.mark.parametrize("sigma,q", [(1.0, 0.01), (0.5, 0.1), (2.0, 1.0)])
def test_single_step_is_exact_on_grid_and_pessimistic_between(direction, sigma, q):
    h = 1e-2
    pld = subsampled_gaussian_pld(sigma, q, direction=direction, value_discretization_interval=h)
    assert pld.pmf.min() >= 0
    assert pld.pmf.sum() + pld.infinity_mass == pytest.approx(1.0, abs=1e-12)
    # Q-mass of the dominating pair is at most 1 (it is a sub-probability).
    assert np.sum(pld.pmf * np.exp(-pld.losses)) <= 1 + 1e-12
    grid = np.arange(-0.5, 3.0, h)
    got = np.array([pld.get_delta(e) for e in grid])
    exact = _exact_step_delta(grid, sigma, q, direction)
    inside = (grid > pld.losses[0] + h) & (grid < pld.losses[-1] - h)
    assert inside.sum() >= 50
    np.testing.assert_allclose(got[inside], exact[inside], rtol=1e-7, atol=1e-13)
    assert np.all(got >= exact - 1e-13)                  # an upper bound on the grid ...
    mid = grid + h / 2                                   # ... and between grid points
    assert np.all(np.array([pld.get_delta(e) for e in mid]) >= _exact_step_delta(mid, sigma, q, direction) - 1e-13)


def test_plain_gaussian_composition_matches_analytic_curve():
    # q = 1: T steps of N(0, σ²) are one Gaussian mechanism with σ/√T, whose δ(ε) is
    # Φ(−εs + 1/(2s)) − e^ε Φ(−εs − 1/(2s)), s = σ/√T (Balle & Wang 2018, Thm 8).
    sigma, T = 5.0, 100
    acc = PLDAccountant().step(noise_multiplier=sigma, sample_rate=1.0, num_steps=T)
    s = sigma / math.sqrt(T)
    for eps in (0.5, 1.0, 2.0):
        exact = norm.cdf(-eps * s + 1 / (2 * s)) - math.exp(eps) * norm.cdf(-eps * s - 1 / (2 * s))
        got = acc.get_delta(eps)
        assert exact <= got <= exact * 1.01
    e = acc.get_epsilon(1e-5)
    assert acc.get_delta(e) == pytest.approx(1e-5, rel=1e-6)


def test_heterogeneous_history_matches_dp_accounting():
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dp_accounting.PoissonSampledDpEvent(0.02, dp_accounting.GaussianDpEvent(1.2)), 300)
    ref.compose(dp_accounting.PoissonSampledDpEvent(0.05, dp_accounting.GaussianDpEvent(2.5)), 200)
    acc = PLDAccountant().step(noise_multiplier=1.2, sample_rate=0.02, num_steps=300)
    acc.step(noise_multiplier=2.5, sample_rate=0.05, num_steps=200)
    assert acc.get_epsilon(1e-6) == pytest.approx(ref.get_epsilon(1e-6), rel=5e-3)
    assert acc.get_delta(1.0) == pytest.approx(ref.get_delta(1.0), rel=2e-2)
    # Chaining returns the same object; order of phases does not matter.
    other = PLDAccountant()
    assert other.step(noise_multiplier=2.5, sample_rate=0.05, num_steps=200) is other
    other.step(noise_multiplier=1.2, sample_rate=0.02, num_steps=300)
    assert other.get_epsilon(1e-6) == pytest.approx(acc.get_epsilon(1e-6), rel=1e-6)


@pytest.mark.parametrize("call,name", [
    (lambda: PLDAccountant(value_discretization_interval=0), "value_discretization_interval"),
    (lambda: PLDAccountant().step(noise_multiplier=0, sample_rate=0.1), "noise_multiplier"),
    (lambda: PLDAccountant().step(noise_multiplier=1, sample_rate=1.01), "sample_rate"),
    (lambda: PLDAccountant().step(noise_multiplier=1, sample_rate=0.1, num_steps=2.5), "num_steps"),
    (lambda: PLDAccountant().step(noise_multiplier=1, sample_rate=0.1).get_epsilon(0.0), "delta"),
    (lambda: PLDAccountant().step(noise_multiplier=1, sample_rate=0.1).get_delta(float("nan")), "epsilon"),
    (lambda: PLDAccountant().get_delta(1.0), "step"),
    (lambda: subsampled_gaussian_pld(1.0, 0.1, direction="both"), "direction"),
])
def test_bad_input_names_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("neighboring,factor", [("add_remove", 1.0), ("replace_one", 2.0)])
def test_full_batch_is_the_exact_composed_gaussian_at_any_T(neighboring, factor):
    """q = 1: T_k steps with σ_k compose into one Gaussian with μ = √(Σ T_k/σ_k²) (twice that under
    replace-one, sensitivity 2); ε(δ) is Balle & Wang's closed form, rounded up. A billion steps
    once took 75–92 s; the closed form takes microseconds."""
    from dplib.mechanisms import gaussian_delta, gaussian_epsilon
    acc = PLDAccountant(neighboring=neighboring).step(noise_multiplier=0.5, sample_rate=1.0,
                                                      num_steps=10 ** 9)
    acc.step(noise_multiplier=3e4, sample_rate=1.0, num_steps=10 ** 8)
    mu = factor * math.sqrt(10 ** 9 / 0.25 + 10 ** 8 / 9e8)
    for delta in (1e-5, 1e-12):
        exact = float(gaussian_epsilon(1 / mu, delta))
        got = acc.get_epsilon(delta)
        assert acc.route == "gaussian"
        assert exact * (1 - 1e-12) <= got <= exact * (1 + 1e-9)
    eps = 2.0 * mu
    assert acc.get_delta(eps) >= float(gaussian_delta(1 / mu, eps)) * (1 - 1e-9)


def test_low_frequencies_are_computed_without_the_fft_error():
    """For T = 1e9 steps the FFT's ±u on f_k ≈ 1 becomes ±1e-7 on f_k^T; the block-Taylor
    evaluation of the surviving frequencies is checked against an FFT in extended precision
    (the plain FFT misses it by more than 1e-9 after the power)."""
    from scipy import fft as sfft
    from dplib.accounting import pld_fft as P
    if np.finfo(np.longdouble).eps >= np.finfo(float).eps:
        pytest.skip("np.longdouble is float64 here: no extended-precision reference")
    rng = np.random.default_rng(0)
    n, c = 1 << 16, 10 ** 9
    x = np.zeros(n)
    x[5:35] = rng.random(30) ** 8
    x /= x.sum()
    keep = P._surviving(sfft.rfft(x), c)
    assert keep.size >= 2
    log_f, m = P._log_spectrum_low(x, keep, n)
    total = float(np.sum(x[x > 0]))         # the mass as the function sums it
    theta = (2 * np.pi * keep / n).astype(np.longdouble)
    ref = np.log(sfft.rfft(x.astype(np.longdouble))[keep] * np.exp(1j * theta * m)
                 / np.longdouble(total)).astype(complex)
    plain = np.log(sfft.rfft(x)[keep] * np.exp(2j * np.pi * keep / n * m) / total)
    got = log_f - math.log(total)
    # Up to the common constant log(Σx) (a uniform scale of the composed masses, ~1e-16·T):
    got, ref, plain = got - got[0], ref - ref[0], plain - plain[0]
    assert c * np.max(np.abs(got - ref)) < 1e-9 < c * np.max(np.abs(plain - ref))


@pytest.mark.parametrize("sigma,q,T", [(0.01, 0.5, 1), (0.03, 0.01, 10), (0.6, 1e-7, 10 ** 7),
                                       (1.0, 1e-5, 1000), (4.0, 0.01, 2000)])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_epsilon_and_delta_are_consistent_and_below_rdp(sigma, q, T, delta):
    """Extreme grids (σ = 0.01: losses in the thousands; q = 1e-7: losses of 1e-7) answer finitely,
    never above RDP, and get_delta(get_epsilon(δ)) ≤ δ: get_delta tries the truncation get_epsilon
    used for a δ near its first answer (it may find a tighter one, never a looser one)."""
    acc = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=T)
    eps = acc.get_epsilon(delta)
    rdp = RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=T)
    assert 0 < eps <= rdp.get_epsilon(delta) * (1 + 1e-12)
    if acc.route == "pld":
        assert 0 < acc.get_delta(eps) <= delta * (1 + 1e-6)
