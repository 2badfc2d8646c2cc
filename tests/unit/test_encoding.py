"""Gradient encoding and denoising (dplib.encoding; Nasr, Shokri & Houmansadr 2020).

Oracles: the closed-form subsampled-Gaussian RDP of dplib.accounting (Mironov, Talwar & Zhang
2019), the Laplace closed form (Mironov 2017, Table II), Monte Carlo, mpmath quadrature, direct
1-D/2-D quadrature of the mixture divergence, scipy's KS statistic, and a literal (slow) Python
implementation of Algorithm 2. Conventions of the RDP comparison: Poisson subsampling with rate
q, add/remove-one adjacency, sensitivity 1 (code vectors of norm 1), integer orders — the same
for both sides.
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dplib.accounting import RDPAccountant, subsampled_gaussian_rdp
from dplib.encoding import (INTEGER_ORDERS, Codebook, EncodingAccountant, GaussianNoise,
                            LaplaceNoise, NoiseDistribution, ScipyNoise, StudentTNoise,
                            build_codebook,
                            calibrate_noise_scale, code_log_moments, codebook_rdp, encode,
                            encoded_noisy_gradient, encoding_epsilon, flat_grads,
                            gaussian_log_moments, ks_denoise, ks_distance, laplace_log_moments,
                            lemma4_rdp, log_moments, make_noise, mixture_renyi_1d, moment_table,
                            privatization_error, small_shift_constant, train_encoded)

RNG = np.random.default_rng(20200101)
ORDERS = np.arange(2, 33, dtype=float)


def unit_vector(d, seed):
    v = np.random.default_rng(seed).normal(size=d)
    return v / np.linalg.norm(v)


# --- the built-in check: Gaussian noise reproduces the subsampled Gaussian ---------------------

@pytest.mark.parametrize("q", [1e-3, 0.01, 0.06, 0.3, 1.0])
@pytest.mark.parametrize("sigma", [0.6, 1.0, 2.5])
def test_gaussian_numerical_rdp_equals_closed_form(q, sigma):
    """Lemma 4 by quadrature, code vector of norm 1, equals MTZ 2019's integer-order formula."""
    psi = unit_vector(16, seed=int(100 * sigma + 1000 * q))
    ours = lemma4_rdp(ORDERS, q, psi, GaussianNoise(sigma), method="exact")
    ref = subsampled_gaussian_rdp(ORDERS, sigma, q)
    np.testing.assert_allclose(ours, ref, rtol=1e-8, atol=0)


@pytest.mark.parametrize("sigma,q", [(0.7, 0.01), (1.5, 0.2), (1.0, 0.06)])
def test_gaussian_lemma4_against_quadrature_and_exact_alpha2(sigma, q):
    """Independent of dplib.accounting: (i) α = 2 by hand, A₂ = 1 + q²(e^{1/σ²} − 1); (ii) for a
    norm-1 ψ in d = 7 dimensions the pair is, by rotation invariance, the 1-D pair N(0, σ²) vs
    (1 − q)N(0, σ²) + qN(1, σ²), whose "remove" divergence D_α(mix ‖ N(0, σ²)) is integrated
    directly; Lemma 4 must equal it, and the "add" direction must be no larger (MTZ 2019)."""
    psi = unit_vector(7, seed=3)
    orders = [2, 3, 8, 20]
    ours = lemma4_rdp(orders, q, psi, GaussianNoise(sigma), method="exact")
    assert ours[0] == pytest.approx(math.log1p(q * q * math.expm1(1 / sigma**2)), rel=1e-10)
    for a, r in zip(orders, ours):
        rem = mixture_renyi_1d(GaussianNoise(sigma), 1.0, q, a, direction="remove")
        add = mixture_renyi_1d(GaussianNoise(sigma), 1.0, q, a, direction="add")
        assert r == pytest.approx(rem, rel=1e-8)
        assert add <= r * (1 + 1e-9)


def test_laplace_lemma4_low_orders_by_hand():
    """α = 2, 3 with the binomial coefficients written out (eq. 23; eqs. 20–22 drop C(α, k)) and
    the Laplace moments I₂, I₃ of Mironov 2017, Table II, for a 3-coordinate ψ with signs."""
    b, q, psi = 0.6, 0.1, np.array([0.3, -0.5, 0.8])

    def I(k):
        return np.prod([k / (2 * k - 1) * math.exp((k - 1) * abs(t) / b)
                        + (k - 1) / (2 * k - 1) * math.exp(-k * abs(t) / b) for t in psi])
    a2 = math.log((1 - q) ** 2 + 2 * q * (1 - q) + q * q * I(2))
    a3 = math.log((1 - q) ** 3 + 3 * q * (1 - q) ** 2 + 3 * q * q * (1 - q) * I(2)
                  + q**3 * I(3)) / 2
    for method in ("exact", "closed_form"):
        np.testing.assert_allclose(lemma4_rdp([2, 3], q, psi, LaplaceNoise(b), method=method),
                                   [a2, a3], rtol=1e-10)


def test_gaussian_codebook_table_is_a_tight_upper_bound():
    cb = build_codebook(20, 300, rng=3, dtype=torch.float64)
    ours = codebook_rdp(ORDERS, 0.05, cb, GaussianNoise(1.1), method="table")
    ref = subsampled_gaussian_rdp(ORDERS, 1.1, 0.05)
    assert np.all(ours >= ref * (1 - 1e-10))
    np.testing.assert_allclose(ours, ref, rtol=1e-7)


def test_gaussian_accountant_matches_rdp_accountant():
    cb = build_codebook(5, 64, rng=4, dtype=torch.float64)
    acc = EncodingAccountant(cb, method="closed_form")
    acc.step(noise=GaussianNoise(1.2), sample_rate=0.02, num_steps=300)
    acc.step(noise=GaussianNoise(0.9), sample_rate=0.05, num_steps=100)
    ref = (RDPAccountant(orders=INTEGER_ORDERS)
           .step(noise_multiplier=1.2, sample_rate=0.02, num_steps=300)
           .step(noise_multiplier=0.9, sample_rate=0.05, num_steps=100))
    np.testing.assert_allclose(acc.rdp, ref.rdp, rtol=1e-10)
    assert acc.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5), rel=1e-10)
    assert acc.get_delta(3.0) == pytest.approx(ref.get_delta(3.0), rel=1e-8)


# --- per-coordinate moments --------------------------------------------------------------------

TAUS = np.array([0.0, 1e-6, 1e-3, 0.05, 0.7, 3.0, 30.0])
KS_ALL = np.arange(0, 65)


def test_log_moments_gaussian_and_laplace_closed_forms():
    g = log_moments(GaussianNoise(1.3), TAUS, KS_ALL)
    np.testing.assert_allclose(g, gaussian_log_moments(TAUS, KS_ALL, 1.3), rtol=1e-9, atol=0)
    lap = log_moments(LaplaceNoise(0.7), TAUS, KS_ALL)
    np.testing.assert_allclose(lap, laplace_log_moments(TAUS, KS_ALL, 0.7), rtol=1e-9, atol=0)
    assert np.all(g[:, :2] == 0) and np.all(g[0] == 0)


@pytest.mark.parametrize("noise", [LaplaceNoise(1.0), StudentTNoise(9, 1.0), StudentTNoise(3, 0.5)],
                         ids=repr)
def test_moments_match_monte_carlo(noise):
    """E_{X∼Z(0)}[(z(X−τ)/z(X))^k] by 10⁶ draws; the likelihood ratio is bounded for these
    families, so the Monte-Carlo standard error is reliable. 5 standard errors."""
    gen = torch.Generator().manual_seed(7)
    x = noise.sample(1_000_000, generator=gen, dtype=torch.float64).numpy()
    for tau in (0.3 * noise.scale, 1.0 * noise.scale):
        lr = noise.logpdf(x - tau) - noise.logpdf(x)
        for k in (2, 3, 5):
            w = np.exp(k * lr)
            mc, se = w.mean(), w.std() / math.sqrt(w.size)
            num = math.exp(log_moments(noise, [tau], [k])[0, 0])
            assert abs(num - mc) < 5 * se, (tau, k, num, mc, se)


def test_student_t_moments_match_mpmath():
    import mpmath as mp
    mp.mp.dps = 30
    nu, s = 9.0, 1.3
    noise = StudentTNoise(nu, s)
    dist = stats.t(nu, scale=s)

    def pdf(x):
        c = mp.gamma((nu + 1) / 2) / (mp.sqrt(nu * mp.pi) * mp.gamma(nu / 2) * s)
        return c * (1 + (x / s) ** 2 / nu) ** (-(nu + 1) / 2)
    for tau, k in ((0.01, 2), (0.5, 4), (4.0, 10)):
        ref = mp.log(mp.quad(lambda x: pdf(x - tau) ** k * pdf(x) ** (1 - k),
                             [-mp.inf, 0, tau, k * tau + 10, mp.inf]))
        ours = log_moments(noise, [tau], [k])[0, 0]
        assert ours == pytest.approx(float(ref), rel=1e-9)
    assert dist.std() == pytest.approx(noise.std, rel=1e-12)


def test_mean_abs_and_fisher_information():
    for noise, dist in ((GaussianNoise(1.7), stats.norm(scale=1.7)),
                        (LaplaceNoise(0.4), stats.laplace(scale=0.4)),
                        (StudentTNoise(9, 1.2), stats.t(9, scale=1.2))):
        assert noise.mean_abs == pytest.approx(dist.expect(abs), rel=1e-7)
        assert noise.std == pytest.approx(dist.std(), rel=1e-12)
        fisher = ScipyNoise(dist).fisher_information
        assert noise.fisher_information == pytest.approx(fisher, rel=1e-4)
    t9 = StudentTNoise(9, 1.0)
    assert t9.fisher_information * t9.std**2 == pytest.approx(15 / 14, rel=1e-12)


@pytest.mark.parametrize("noise", [GaussianNoise(1.0), LaplaceNoise(1.0), StudentTNoise(9, 1.0)],
                         ids=repr)
def test_small_shift_limit_is_fisher(noise):
    ks = np.arange(2, 9)
    h = log_moments(noise, [1e-4], ks)[0]
    np.testing.assert_allclose(h / 1e-8, small_shift_constant(noise, ks), rtol=2e-4)


# --- Lemma 4 against the divergence it claims to compute ---------------------------------------

@pytest.mark.parametrize("noise", [LaplaceNoise(0.8), StudentTNoise(9, 1.0)], ids=repr)
@pytest.mark.parametrize("q", [0.05, 0.5, 1.0])
def test_lemma4_equals_direct_mixture_divergence_1d(noise, q):
    for tau in (0.4, 2.0):
        ours = lemma4_rdp([2, 3, 6], q, [tau], noise, method="exact")
        direct = [mixture_renyi_1d(noise, tau, q, a, direction="remove") for a in (2, 3, 6)]
        np.testing.assert_allclose(ours, direct, rtol=1e-7)


def test_lemma4_product_formula_in_two_dimensions():
    """The product over coordinates (eq. 23) against a 2-D integral of the mixture ratio."""
    noise, q, alpha, psi = StudentTNoise(9, 1.0), 0.3, 3, np.array([0.6, 1.1])
    # Student's t density with ν = 9 written out (an oracle independent of the noise class, and
    # ~10× faster per call than array logpdf: dblquad calls it ~10⁵ times)
    log_c = math.lgamma(5.0) - math.lgamma(4.5) - 0.5 * math.log(9 * math.pi)

    def logpdf(x):
        return log_c - 5.0 * math.log1p(x * x / 9.0)

    assert logpdf(0.7) == pytest.approx(float(noise.logpdf(0.7)), rel=1e-12)

    def f(x2, x1):
        r = math.exp(logpdf(x1 - psi[0]) + logpdf(x2 - psi[1]) - logpdf(x1) - logpdf(x2))
        return math.exp(logpdf(x1) + logpdf(x2)) * (1 - q + q * r) ** alpha
    val = integrate.dblquad(f, -np.inf, np.inf, -np.inf, np.inf, epsabs=0, epsrel=1e-8)[0]
    direct = math.log(val) / (alpha - 1)
    assert lemma4_rdp([alpha], q, psi, noise, method="exact")[0] == pytest.approx(direct,
                                                                                  rel=1e-8)


@pytest.mark.parametrize("noise", [GaussianNoise(1.0), LaplaceNoise(1.0), StudentTNoise(9, 1.0)],
                         ids=repr)
def test_add_direction_is_dominated_for_symmetric_noise(noise):
    """Eq. (14) / Theorem 2: D_α(Z(0) ‖ mix) ≤ D_α(mix ‖ Z(0)) when the noise is symmetric."""
    for q in (0.05, 0.5):
        for a in (2.0, 5.5, 12.0):
            add = mixture_renyi_1d(noise, 1.0, q, a, direction="add")
            rem = mixture_renyi_1d(noise, 1.0, q, a, direction="remove")
            assert add <= rem * (1 + 1e-9)


def test_skewed_noise_breaks_lemma4_and_is_refused():
    """Skew-normal noise (shape 5): the sign of a coordinate matters (Lemma 4 on |ψ| under-
    reports by two orders of magnitude), and without subsampling the addition direction is 25×
    the removal direction Lemma 4 computes. Reference values by mpmath (40 digits)."""
    lp = stats.skewnorm(5.0).logpdf
    pos = mixture_renyi_1d(lp, 1.0, 0.05, 8.0, direction="remove")
    neg = mixture_renyi_1d(lp, -1.0, 0.05, 8.0, direction="remove")
    assert neg > 100 * pos
    rem = mixture_renyi_1d(lp, 1.0, 1.0, 8.0, direction="remove")
    add = mixture_renyi_1d(lp, 1.0, 1.0, 8.0, direction="add")
    assert rem == pytest.approx(4.099021025792323, rel=1e-7)
    assert add == pytest.approx(103.36068473870225, rel=1e-7)
    with pytest.raises(ValueError, match="symmetric"):
        ScipyNoise(stats.skewnorm(5.0))


def test_paper_prefactor_would_give_negative_epsilon():
    """Eq. (5) as printed, 1/(1−α)·log Σ…, is ≤ 0; the corrected one equals −1 times it."""
    noise, q, psi = StudentTNoise(9, 1.0), 0.1, np.array([0.5, 0.5, 0.7])
    L = code_log_moments(psi, noise, [4], method="exact")[0]
    s = sum(math.comb(4, k) * q**k * (1 - q) ** (4 - k) * math.exp(L[k]) for k in range(5))
    printed = math.log(s) / (1 - 4)
    assert printed < 0
    assert lemma4_rdp([4], q, psi, noise)[0] == pytest.approx(-printed, rel=1e-12)


# --- the table and its bound ---------------------------------------------------------------------

@pytest.mark.parametrize("noise", [LaplaceNoise(1.0), StudentTNoise(9, 1.0)], ids=repr)
def test_table_bound_is_upper_and_tight(noise):
    tab = moment_table(noise, 32, 5.0)
    u = np.concatenate([[3e-5], np.exp(RNG.uniform(np.log(1e-4), np.log(5.0), 40))])
    exact = log_moments(noise.with_scale(1.0), u, np.arange(2, 9))
    bound = tab.bound(u)[:, :7]
    assert np.all(bound >= exact * (1 - 1e-9))
    assert np.all(bound <= exact * 1.08)
    # the clamp argument: h_k is non-decreasing in |u|
    assert np.all(np.diff(tab.values, axis=0) >= 0)


class QuarticNoise(NoiseDistribution):
    """Generalised normal with exponent 4, z₀(y) ∝ exp(−y⁴): lighter tails than the Gaussian.
    Also shows how a user adds a family: log-density, an accurate log-ratio, Fisher information."""
    family = "quartic"
    std_fisher = 16 * math.gamma(7 / 4) / math.gamma(1 / 4)      # 16·E[y⁶]

    def std_logpdf(self, y):
        return -np.asarray(y, dtype=float) ** 4 - math.log(2 * math.gamma(1.25))

    def std_log_ratio(self, y, u):
        return u * (4 * y**3 - 6 * y * y * u + 4 * y * u * u - u**3)

    def with_scale(self, scale):
        return QuarticNoise(scale)


def test_table_refuses_lighter_than_gaussian_tails():
    """h_k grows like u⁴, so h_k/u² increases: condition R fails and the table says so."""
    noise = QuarticNoise(1.0)
    h = log_moments(noise, [1e-3, 0.5, 1.0], [2, 3])
    assert h[2, 0] / h[1, 0] > 4.0            # faster than u²
    with pytest.raises(ValueError, match="non-increasing"):
        moment_table(noise, 3, 1.0)


_WS, _WA = 5.0, 0.9
_WZ = integrate.quad(lambda y: math.exp(-y * y / (2 * _WS**2)) * (1 + _WA * math.cos(2 * math.pi * y)),
                     -60, 60, limit=2000)[0]


class WiggleNoise(NoiseDistribution):
    """Symmetric, positive, Gaussian-tailed density ∝ e^{−y²/50}(1 + 0.9 cos 2πy). A shift by 1
    realigns the modulation, a shift by ½ puts peaks on troughs: h_k(½) ≫ h_k(1), so log I_k is
    *not* non-decreasing, and clamping a coordinate from 1 to ½ (what Algorithm 2 does) costs more
    than the code vector itself."""
    family = "wiggle"

    def std_logpdf(self, y):
        y = np.asarray(y, dtype=float)
        return -y * y / (2 * _WS**2) + np.log1p(_WA * np.cos(2 * np.pi * y)) - math.log(_WZ)

    def with_scale(self, scale):
        return WiggleNoise(scale)


@pytest.mark.slow
def test_non_monotone_moments_are_refused():
    """The clamp argument needs h_k = log I_k non-decreasing in |τ| (condition M), which the
    table's condition h_k/τ² non-increasing does not imply. Without the check, method='exact' on
    ψ = (1) reports 0.04 at α = 2, q = 1, while the clamped output e = (½) costs 1.83.
    Slow: about 25 s of CPU, since the first refusal needs h_k on a fine grid by quadrature for a
    density with no closed form; the other entry points reuse the violation found."""
    noise = WiggleNoise(1.0)
    h = log_moments(noise, [0.5, 1.0], [2])[:, 0]
    assert h[0] > 40 * h[1]
    with pytest.raises(ValueError, match="non-decreasing"):
        lemma4_rdp([2], 1.0, [1.0], noise, method="exact")
    # a family found to violate condition M is refused again without a new quadrature
    from dplib.encoding import moments as M

    def no_quadrature(*_a, **_k):
        raise AssertionError("integrated again")

    saved = M.log_moments
    M.log_moments = no_quadrature
    try:
        with pytest.raises(ValueError, match="non-decreasing"):
            codebook_rdp([2, 3], 0.1, np.array([[0.2, 1.0]]), noise)
        with pytest.raises(ValueError, match="non-decreasing"):
            moment_table(noise, 3, 1.0)
    finally:
        M.log_moments = saved


def test_codebook_on_coarser_dtype_never_exceeds_accounted_psi():
    """A float64 code book used on float32 gradients: thresholds are rounded towards zero, so the
    clamp never exceeds the ψ the accountant sees (float32(0.1) > 0.1)."""
    psi = torch.tensor([[0.1, 0.7]], dtype=torch.float64)
    assert float(psi[0, 0].float()) > 0.1
    out = encode(torch.tensor([-5.0, 5.0], dtype=torch.float32), Codebook(psi))
    assert torch.all(out.double().abs() <= psi[0])


def test_codebook_table_agrees_with_exact_for_student_t():
    cb = build_codebook(3, 40, rng=9)
    noise = StudentTNoise(9, 0.3)
    exact = codebook_rdp(ORDERS, 0.1, cb, noise, method="exact")
    table = codebook_rdp(ORDERS, 0.1, cb, noise, method="table")
    assert np.all(table >= exact * (1 - 1e-9)) and np.all(table <= exact * 1.075)


def test_dense_code_vectors_behave_like_gaussian_with_fisher_variance():
    """For noise satisfying condition R, h_k(u) ≤ k(k−1)F u²/2, so a norm-1 code vector costs at
    most the subsampled Gaussian with σ = 1/√F; for dense vectors (many tiny coordinates) the gap
    closes as d grows — like 1/√d for Laplace (cubic term, kink), 1/d for Student-t (smooth)."""
    gaps = {}
    for d in (2000, 20_000):
        psi = unit_vector(d, seed=5)
        for noise in (LaplaceNoise(1.0), StudentTNoise(9, 1.0)):
            ours = lemma4_rdp(ORDERS, 0.05, psi, noise, method="table")
            gauss = subsampled_gaussian_rdp(ORDERS, 1 / math.sqrt(noise.fisher_information), 0.05)
            assert np.all(ours <= gauss * (1 + 1e-12))
            L8 = code_log_moments(psi, noise, [8], method="table")[0, 8]
            gaps[d, noise.family] = 1 - L8 / small_shift_constant(noise, [8])[0]
    assert gaps[20_000, "laplace"] < 6e-3 and gaps[20_000, "student_t"] < 7e-4
    assert 3 < gaps[2000, "laplace"] / gaps[20_000, "laplace"] < 7
    assert 8 < gaps[2000, "student_t"] / gaps[20_000, "student_t"] < 12


@pytest.mark.parametrize("noise,steps", [(StudentTNoise(9, 1.0), 300), (LaplaceNoise(1.0), 10),
                                         (GaussianNoise(1.0), 10)])
def test_calibrate_noise_scale_is_tight_and_on_the_safe_side(noise, steps):
    """ε(scale) ≤ target (a root found to the solver's tolerance on the wrong side would promise
    more privacy than it gives; these cases did before the safe-side step), and scale is the
    smallest such within rtol: ε at a scale 2·rtol smaller exceeds the target."""
    cb = build_codebook(20, 50, rng=1)
    out = calibrate_noise_scale(noise, 2.0, 1e-5, 0.05, steps, cb, rtol=1e-4)
    assert encoding_epsilon(cb, out, 0.05, steps, 1e-5) <= 2.0
    assert encoding_epsilon(cb, out.with_scale(out.scale * (1 - 2e-4)), 0.05, steps, 1e-5) > 2.0


def test_gaussian_sigma_for_epsilon_is_on_the_safe_side():
    from dplib.experiments.encoding import gaussian_sigma_for_epsilon
    for eps, q, T in [(2.0, 0.0594, 168), (8.0, 0.0594, 168), (0.5, 0.01, 1000)]:
        s = gaussian_sigma_for_epsilon(eps, 1e-5, q, T)
        acc = RDPAccountant(orders=INTEGER_ORDERS)
        assert acc.step(noise_multiplier=s, sample_rate=q, num_steps=T).get_epsilon(1e-5) <= eps
        acc = RDPAccountant(orders=INTEGER_ORDERS)
        assert acc.step(noise_multiplier=s * (1 - 1e-7), sample_rate=q,
                        num_steps=T).get_epsilon(1e-5) > eps


# --- Algorithm 2 ----------------------------------------------------------------------------------

def encode_reference(g: np.ndarray, codes: np.ndarray):
    """Algorithm 2, line by line, with the corrections (argmax; |∇| against sorted |ψ|)."""
    order = np.argsort(np.abs(g), kind="stable")
    a = np.abs(g)[order]
    best, best_sim = None, -math.inf
    for j, psi in enumerate(codes):
        den = np.linalg.norm(a) * np.linalg.norm(psi)
        sim = float(a @ psi) / den if den > 0 else 0.0
        if sim > best_sim:
            best, best_sim = j, sim
    psi = codes[best]
    out = np.zeros_like(g)
    for t, i in enumerate(order):
        out[i] = min(psi[t], max(g[i], -psi[t]))
    return out, best


@pytest.mark.parametrize("seed", range(6))
def test_encode_matches_slow_reference(seed):
    gen = np.random.default_rng(seed)
    d, n, b = int(gen.integers(2, 60)), int(gen.integers(1, 30)), int(gen.integers(1, 8))
    cb = build_codebook(n, d, rng=seed, keep_fraction=float(gen.uniform(0.2, 1.0)))
    scale = 10 ** gen.uniform(-2, 1)
    g = torch.as_tensor(gen.standard_t(3, size=(b, d)) * scale / math.sqrt(d))
    out, idx = encode(g, cb, return_index=True)
    codes = cb.vectors.double().numpy()
    for r in range(b):
        ref, j = encode_reference(g[r].numpy(), codes)
        assert int(idx[r]) == j
        np.testing.assert_allclose(out[r].numpy(), ref, rtol=0, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(d=st.integers(1, 40), n=st.integers(1, 12), b=st.integers(1, 5),
       log_scale=st.floats(-3, 2), seed=st.integers(0, 10_000))
def test_encode_is_a_clamp_by_a_code_vector(d, n, b, log_scale, seed):
    gen = np.random.default_rng(seed)
    cb = build_codebook(n, d, rng=seed)
    g = torch.as_tensor(gen.normal(size=(b, d)) * 10**log_scale)
    out, idx = encode(g, cb, return_index=True)
    psi = cb.vectors.double()[idx]                       # sorted magnitudes of the match
    rank = torch.argsort(torch.argsort(g.abs(), dim=1), dim=1)
    thr = torch.gather(psi, 1, rank)                     # ψ[rank(i)] at coordinate i
    assert torch.equal(out, torch.clamp(g, -thr, thr))
    assert torch.all(out.norm(dim=1) <= psi.norm(dim=1) * (1 + 1e-12))
    assert torch.all(out.norm(dim=1) <= 1 + 1e-6)
    assert torch.all((out == 0) | (torch.sign(out) == torch.sign(g)))


def test_encode_single_vector_zero_vector_and_dtype():
    cb = build_codebook(3, 5, rng=0)
    g = torch.tensor([0.3, -2.0, 0.01, 0.0, 1.0], dtype=torch.float64)
    out = encode(g, cb)
    assert out.shape == (5,) and out.dtype == torch.float64
    assert torch.equal(encode(torch.zeros(5), cb), torch.zeros(5))


def test_build_codebook_properties():
    cb = build_codebook(50, 400, rng=1, keep_fraction=0.1)
    v = cb.vectors.double()
    np.testing.assert_allclose(v.norm(dim=1).numpy(), 1.0, rtol=1e-6)
    assert torch.all(v[:, 1:] >= v[:, :-1])
    assert int((v[0] > 0).sum()) == 40
    emp = build_codebook(10, 30, rng=1, values=RNG.standard_t(2, 5000), threshold=0.5)
    assert torch.all((emp.vectors == 0) | (emp.vectors > 0))


# --- denoising ------------------------------------------------------------------------------------

@pytest.mark.parametrize("noise", [GaussianNoise(1.3), LaplaceNoise(0.5), StudentTNoise(9, 2.0)],
                         ids=repr)
def test_ks_distance_matches_scipy(noise):
    x = torch.as_tensor(RNG.normal(size=(3, 500)) * 1.5 + 0.2)
    ours = ks_distance(x, noise)
    ref = [stats.kstest(row, noise.cdf).statistic for row in x.numpy()]
    np.testing.assert_allclose(ours.numpy(), ref, rtol=1e-10)


def test_ks_denoise_shrinks_noise_more_than_signal():
    noise = GaussianNoise(1.0)
    gen = torch.Generator().manual_seed(3)
    z = noise.sample(5000, generator=gen, dtype=torch.float64)
    pure, f0 = ks_denoise(z, noise)
    signal, f1 = ks_denoise(z + 1.5, noise)
    assert 0 < f0 < 0.03 < 0.4 < f1 <= 1
    assert torch.allclose(pure, z * f0)


@pytest.mark.parametrize("noise", [GaussianNoise(0.7), LaplaceNoise(1.3), StudentTNoise(9, 1.0),
                                   StudentTNoise(2.5, 1.0)], ids=repr)
def test_samplers_follow_their_distribution(noise):
    gen = torch.Generator().manual_seed(11)
    x = noise.sample((200, 100), generator=gen, dtype=torch.float64).numpy().ravel()
    assert stats.kstest(x, noise.cdf).pvalue > 1e-4
    # power: a wrong twin is rejected
    other = GaussianNoise(noise.std if math.isfinite(noise.std) else 1.0)
    if not isinstance(noise, GaussianNoise):
        assert stats.kstest(x, other.cdf).pvalue < 1e-4


# --- Algorithm 1 ---------------------------------------------------------------------------------

def _tiny_problem(seed=0):
    from dplib.training import make_mlp
    gen = np.random.default_rng(seed)
    x = torch.as_tensor(gen.normal(size=(40, 6)), dtype=torch.float32)
    y = torch.as_tensor(gen.integers(0, 3, 40))
    model = make_mlp(6, 3, hidden=(5,), seed=seed)
    d = sum(p.numel() for p in model.parameters())
    return model, x, y, build_codebook(16, d, rng=seed)


def test_encoded_noisy_gradient_is_sum_of_encodings_plus_noise():
    import torch.nn.functional as F
    from dplib.training import per_example_grads
    model, x, y, cb = _tiny_problem()
    noise = StudentTNoise(9, 0.7)
    grads, info = encoded_noisy_gradient(model, F.cross_entropy, x, y, codebook=cb, noise=noise,
                                         expected_batch_size=20.0, denoise=True,
                                         generator=torch.Generator().manual_seed(5),
                                         chunk_size=7)
    flat = flat_grads(per_example_grads(model, F.cross_entropy, x, y))
    z = noise.sample((cb.dim,), generator=torch.Generator().manual_seed(5))
    noisy = encode(flat, cb).sum(0) + z
    expected = noisy * ks_distance(noisy, noise) / 20.0
    got = torch.cat([g.reshape(-1) for g in grads.values()])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert info["ks"] == pytest.approx(float(ks_distance(noisy, noise)), rel=1e-5)


def test_train_encoded_is_reproducible_and_accounts():
    model, x, y, cb = _tiny_problem()
    runs = []
    for _ in range(2):
        m, *_ = _tiny_problem()
        res = train_encoded(m, (x, y), codebook=cb, noise=GaussianNoise(1.0), sample_rate=0.25,
                            lr=0.5, steps=6, denoise=False, eval_data=(x, y), eval_every=3,
                            device="cpu", seed=3)
        runs.append(torch.cat([p.detach().reshape(-1) for p in m.parameters()]))
    assert torch.equal(runs[0], runs[1])
    ref = RDPAccountant(orders=INTEGER_ORDERS).step(noise_multiplier=1.0, sample_rate=0.25,
                                                    num_steps=6).get_epsilon(1e-5)
    assert res.epsilon == pytest.approx(ref, rel=1e-6)
    assert [h["step"] for h in res.history] == [3, 6] and res.ks_factors.tolist() == [1.0] * 6


def test_privatization_error_noise_part():
    cb = build_codebook(4, 300, rng=0)
    noise = LaplaceNoise(0.5)
    out = privatization_error(torch.zeros(3, 300, dtype=torch.float64), cb, noise,
                              num_draws=400, generator=torch.Generator().manual_seed(1))
    assert out["encoding_l1"] == 0 and out["noise_l1"] == pytest.approx(150.0)
    assert abs(out["l1"] - out["noise_l1"]) < 5 * out["l1_std"] / math.sqrt(400)


# --- bad input ---------------------------------------------------------------------------------

def test_bad_inputs_raise_value_error():
    cb = build_codebook(2, 4, rng=0)
    with pytest.raises(ValueError, match="orders"):
        lemma4_rdp([2.5], 0.1, [1.0], GaussianNoise(1.0))
    with pytest.raises(ValueError, match="orders"):
        lemma4_rdp([1], 0.1, [1.0], GaussianNoise(1.0))
    with pytest.raises(ValueError, match="sample_rate"):
        lemma4_rdp([2], 0.0, [1.0], GaussianNoise(1.0))
    with pytest.raises(ValueError, match="noise"):
        lemma4_rdp([2], 0.1, [1.0], "gaussian")
    with pytest.raises(ValueError, match="code_vector"):
        lemma4_rdp([2], 0.1, np.ones((2, 3)), GaussianNoise(1.0))
    with pytest.raises(ValueError, match="codebook"):
        codebook_rdp([2], 0.1, [[np.nan]], GaussianNoise(1.0))
    with pytest.raises(ValueError, match="method"):
        codebook_rdp([2], 0.1, cb, GaussianNoise(1.0), method="fast")
    with pytest.raises(ValueError, match="closed_form"):
        codebook_rdp([2], 0.1, cb, StudentTNoise(9, 1.0), method="closed_form")
    with pytest.raises(ValueError, match="tau"):
        log_moments(GaussianNoise(1.0), [np.nan], [2])
    with pytest.raises(ValueError, match="scale"):
        GaussianNoise(0.0)
    with pytest.raises(ValueError, match="df"):
        StudentTNoise(-1.0, 1.0)
    with pytest.raises(ValueError, match="family"):
        make_noise("cauchy", 1.0)
    with pytest.raises(ValueError, match="loc"):
        ScipyNoise(stats.norm(loc=1.0))
    with pytest.raises(ValueError, match="n_codes"):
        build_codebook(0, 4, rng=0)
    with pytest.raises(ValueError, match="keep_fraction"):
        build_codebook(2, 4, rng=0, keep_fraction=1.5)
    with pytest.raises(ValueError, match="grads"):
        encode(torch.ones(5), cb)
    with pytest.raises(ValueError, match="finite"):
        encode(torch.tensor([1.0, np.inf, 0.0, 0.0]), cb)
    with pytest.raises(ValueError, match="grads"):
        encode(np.ones(4), cb)
    with pytest.raises(ValueError, match="sorted"):
        Codebook(torch.tensor([[2.0, 1.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        Codebook(torch.tensor([[-1.0, 1.0]]))
    with pytest.raises(ValueError, match="values"):
        ks_distance(torch.tensor([]), GaussianNoise(1.0))
    with pytest.raises(ValueError, match="no steps"):
        EncodingAccountant(cb).get_epsilon(1e-5)
    with pytest.raises(ValueError, match="delta"):
        encoding_epsilon(cb, GaussianNoise(1.0), 0.1, 10, 1.5)
    with pytest.raises(ValueError, match="direction"):
        mixture_renyi_1d(GaussianNoise(1.0), 1.0, 0.5, 2.0, direction="both")
    model, x, y, cb2 = _tiny_problem()
    with pytest.raises(ValueError, match="epochs"):
        train_encoded(model, (x, y), codebook=cb2, noise=GaussianNoise(1.0), sample_rate=0.1,
                      lr=0.1, seed=0)
    with pytest.raises(ValueError, match="codebook.dim"):
        train_encoded(model, (x, y), codebook=cb, noise=GaussianNoise(1.0), sample_rate=0.1,
                      lr=0.1, steps=1, seed=0)
