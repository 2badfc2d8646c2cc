"""The floating-point attack of Mironov (2012) on DP-SGD's Gaussian noise, and the hardened source.

DP-SGD releases y = g + s·z per coordinate, g the clipped gradient sum, s = σ·C, z float32 noise
(``torch.randn``), computed as ``torch.add(g, z, alpha=s)`` (what ``GaussianPrivatizer.add_noise``
does). The attacker knows g (the target's clipped gradient; the rest of the batch is known or
absent) and must tell "record present" (the mechanism's input is g) from "absent" (input 0).

The attack re-runs the float computation, as chapter 2 does for Laplace noise
(:func:`dplib.mechanisms.float_laplace_reachable`): a coordinate y is *reachable from g* if some
float32 z gives ``torch.add(g, z, alpha=s) == y``. With the record every coordinate is reachable
(the true z is one). Without it, a coordinate where the noise is small next to g is a float on a
finer grid than any g + s·z near it, and is usually unreachable. What was found: the attack needs
nothing about randn's output set — float32 rounding of the addition suffices — and it works at
ordinary parameters (σ = 2 with C = 1, and σ = 1.1 with C = 0.7, whose std 0.77 is not a power
of two; ‖g‖₂ = C spread over 4096 coordinates): with the record no coordinate is ever
unreachable, without it dozens to hundreds are, in every trial. The Gaussian mechanism that the
accountant assumes allows an advantage of at most 2Φ(‖g‖/(2s)) − 1 (0.20 for σ = 2).

A sum of several Gaussian draws (Holohan & Braghin 2021; the construction of Opacus'
``secure_mode``: four ``torch.normal`` draws summed and halved) was proposed against an exact
reachability search, which would then have to invert four unknowns; it does not stop a simpler
*grain* test. Such noise is a sum of
numbers of size ~std, so even where it is small it is a multiple of a coarse power of two (about
std·2⁻²⁴), while a small gradient coordinate g has finer low-order bits. On coordinates with
|y| < |g|/4 the addition is exact, so with the record y carries g's fine bits and y − g is coarse;
without it y is coarse and y − g carries g's bits. Voting by which of y and y − g has the coarser
grain tells the two apart in every trial here (σ = 2 and 1.1, 4096 coordinates).

Against :func:`dplib.mechanisms.secure_add_noise` both attacks, and the best threshold on their
statistics, stay within the advantage its guarantee allows (μ̂/2, below) plus sampling error, and
every output lies on the same lattice under both inputs. Replacing the hardened source by float
noise makes these tests fail.
"""
import functools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dplib.mechanisms import (gaussian_delta, secure_add_noise, secure_gaussian, secure_grid,
                              secure_noise_multiplier, secure_sensitivity)

N_COORD = 4096          # coordinates released per trial (a small layer)
TRIALS = 100            # trials per hypothesis
WINDOW = 8              # float32 neighbours of the inverted z tried on each side


def plain_float_release(g: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    """y = g + std·z in float32 with z = torch.randn: the computation of dplib's
    ``GaussianPrivatizer.add_noise`` (checked in ``test_plain_release_is_the_engines``)."""
    z = torch.randn(tuple(g.shape), generator=gen, dtype=g.dtype)
    return torch.add(g, z, alpha=std)


def secure_release(g: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    return secure_add_noise(g, std=std, generator=gen)


def summed_gaussians_release(g: torch.Tensor, std: float, gen: torch.Generator) -> torch.Tensor:
    """g + (z₁ + z₂ + z₃ + z₄)/2, z_i ~ N(0, std²) from ``torch.normal`` in float32: the noise
    construction of Opacus' ``secure_mode`` (``_generate_noise``; Holohan & Braghin 2021), whose
    CSPRNG plays no part in the attack."""
    total = torch.zeros(tuple(g.shape))
    for _ in range(4):
        total += torch.normal(mean=0.0, std=std, size=tuple(g.shape), generator=gen)
    return g + total / 2


def reachable_from(y: torch.Tensor, g: torch.Tensor, std: float) -> torch.Tensor:
    """Per coordinate: is there a float32 z with ``torch.add(g, z, alpha=std) == y``? Decided by
    re-running torch's own addition on the float32 z nearest (y − g)/std and its ``WINDOW``
    neighbours on each side (the true z is within a few ulps of that inverse)."""
    y, g = y.reshape(-1), g.reshape(-1).expand_as(y.reshape(-1)).contiguous()
    z0 = ((y.double() - g.double()) / std).float()
    hit = torch.add(g, z0, alpha=std) == y
    up, down = z0.clone(), z0.clone()
    inf = torch.tensor(math.inf)
    for _ in range(WINDOW):
        up, down = torch.nextafter(up, inf), torch.nextafter(down, -inf)
        hit |= (torch.add(g, up, alpha=std) == y) | (torch.add(g, down, alpha=std) == y)
    return hit


def target_gradient(c: float, n: int = N_COORD) -> torch.Tensor:
    """A fixed, irregular clipped gradient of ℓ2 norm c (float32)."""
    v = torch.randn(n, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    return (v * (c / v.norm())).float()


@functools.lru_cache(maxsize=None)
def releases(release, sigma: float, c: float, seed: int) -> tuple[torch.Tensor, dict]:
    """``TRIALS`` releases (one per row) of g (record present) and of 0 (absent), and g; cached,
    so the two attacks read the same outputs."""
    std = sigma * c
    g = target_gradient(c).expand(TRIALS, N_COORD).contiguous()    # one row per trial
    gen = torch.Generator().manual_seed(seed)
    return g, {h: release(g if h == "present" else torch.zeros_like(g), std, gen)
               for h in ("present", "absent")}


def attack_counts(release, sigma: float, c: float, seed: int) -> dict[str, np.ndarray]:
    """The attack's statistic — the number of coordinates NOT reachable from g — per trial."""
    g, ys = releases(release, sigma, c, seed)
    return {h: (~reachable_from(y, g, sigma * c)).reshape(TRIALS, N_COORD).sum(1).numpy()
            for h, y in ys.items()}


def best_threshold_advantage(t_present: np.ndarray, t_absent: np.ndarray) -> float:
    """max over thresholds τ of |P(T ≤ τ | present) − P(T ≤ τ | absent)| (empirical): the
    advantage of the best test "present iff T ≤ τ" (or its complement) on these samples."""
    taus = np.union1d(t_present, t_absent)
    return float(max(abs(np.mean(t_present <= t) - np.mean(t_absent <= t)) for t in taus))


def gaussian_advantage_bound(mu: float) -> float:
    """Total variation between N(0, 1) and N(μ, 1): the largest advantage of any test against the
    Gaussian mechanism with sensitivity/noise ratio μ (Dong, Roth & Su 2022, Gaussian DP)."""
    return float(2 * stats.norm.cdf(mu / 2) - 1)


def secure_advantage_bound(sigma: float, c: float) -> float:
    """The largest advantage any test can have against one :func:`secure_add_noise` release of
    g vs 0 with ‖g‖₂ = c and std σc: μ̂/2 with μ̂ = Δ̂/s. The integer vectors are discrete
    Gaussians whose Rényi divergence is at most αμ̂²/2 (module notes of
    :mod:`dplib.mechanisms.secure_noise`), so KL ≤ μ̂²/2 (α → 1) and, by Pinsker's inequality,
    total variation ≤ √(KL/2) = μ̂/2; the release is post-processing of those vectors."""
    return secure_sensitivity(c, N_COORD, sigma * c) / (sigma * c) / 2


# Two-sample KS critical value at level 1e-3 for TRIALS vs TRIALS (sampling slack of the bound).
KS_SLACK = 1.95 * math.sqrt(2 / TRIALS)


@pytest.mark.parametrize("sigma, c", [(2.0, 1.0), (1.1, 0.7)])
def test_float_attack_breaks_plain_float_noise(sigma, c):
    counts = attack_counts(plain_float_release, sigma, c, seed=11)
    # With the record, every coordinate is reachable — in every trial, by construction.
    assert np.all(counts["present"] == 0)
    # Without it, each trial holds unreachable coordinates: each one rules the record out.
    assert np.all(counts["absent"] >= 5), counts["absent"].min()
    advantage = np.mean(counts["present"] == 0) - np.mean(counts["absent"] == 0)
    bound = gaussian_advantage_bound(1 / sigma)      # ‖g‖₂ = C, std = σC
    assert advantage == 1.0 and bound < 0.5
    # As an (ε, δ) statement: the event A = "all reachable" has P(A|present) = 1 and
    # P(A|absent) = 0 here, so P(A|present) − e^ε P(A|absent) = 1 > δ(ε) for every ε.
    assert gaussian_delta(sigma, 1.0) < 0.2


@pytest.mark.parametrize("sigma, c", [(2.0, 1.0), (1.1, 0.7)])
def test_float_attack_fails_on_secure_noise(sigma, c):
    counts = attack_counts(secure_release, sigma, c, seed=11)
    # The hardened release's Δ̂/s (sensitivity after rounding to the lattice) is within 1% of 1/σ.
    assert secure_sensitivity(c, N_COORD, sigma * c) / (sigma * c) < 1.01 / sigma
    bound = secure_advantage_bound(sigma, c)
    rule = abs(np.mean(counts["present"] == 0) - np.mean(counts["absent"] == 0))
    assert rule <= bound + KS_SLACK
    assert best_threshold_advantage(counts["present"], counts["absent"]) <= bound + KS_SLACK
    # The statistic means the same thing under both inputs (a chance-level test).
    assert abs(counts["present"].mean() - counts["absent"].mean()) \
        <= 4 * math.sqrt((counts["present"].var() + counts["absent"].var()) / TRIALS) + 1


def grain(x: torch.Tensor) -> torch.Tensor:
    """log₂ of the largest power of two dividing each float64 entry (inf for 0)."""
    x = x.abs()
    mant, exp = torch.frexp(x)
    m = (mant * 2.0 ** 53).to(torch.int64)                   # exact: 53-bit integer mantissa
    low = (m & -m).clamp(min=1)                              # its lowest set bit
    return torch.where(x == 0, math.inf, torch.log2(low.double()) + exp.double() - 53)


def grain_votes(y: torch.Tensor, g: torch.Tensor) -> np.ndarray:
    """Per row: the grain test's votes. On coordinates with |y| < |g|/4, a vote for "present"
    where y − g has the coarser grain than y, for "absent" where y has; returns (for − against)."""
    y64, g64 = y.double(), g.double()
    small = y64.abs() < 0.25 * g64.abs()
    gy, gyg = grain(y64), grain(y64 - g64)
    return ((small & (gyg > gy)).sum(-1) - (small & (gy > gyg)).sum(-1)).numpy()


def grain_counts(release, sigma: float, c: float, seed: int) -> dict[str, np.ndarray]:
    """The grain test's votes (for − against "present") per trial."""
    g, ys = releases(release, sigma, c, seed)
    return {h: grain_votes(y, g) for h, y in ys.items()}


@pytest.mark.parametrize("sigma, c", [(2.0, 1.0), (1.1, 0.7)])
def test_grain_attack_breaks_summed_gaussians(sigma, c):
    votes = grain_counts(summed_gaussians_release, sigma, c, seed=11)
    # "present iff more votes for present": right in every trial, under both inputs
    assert votes["present"].min() > 0 >= votes["absent"].max()
    assert gaussian_advantage_bound(1 / sigma) < 0.5


@pytest.mark.parametrize("sigma, c", [(2.0, 1.0), (1.1, 0.7)])
def test_grain_attack_fails_on_secure_noise(sigma, c):
    votes = grain_counts(secure_release, sigma, c, seed=11)
    bound = secure_advantage_bound(sigma, c)
    assert abs(np.mean(votes["present"] > 0) - np.mean(votes["absent"] > 0)) <= bound + KS_SLACK
    assert best_threshold_advantage(votes["present"], votes["absent"]) <= bound + KS_SLACK


def on_lattice(y: torch.Tensor, std: float, dtype=torch.float32) -> torch.Tensor:
    """Is each output fl(Λ·n) in ``dtype`` for an integer n (Λ = std·2⁻¹⁵)?"""
    lam = secure_grid(std)
    n = torch.round(y.double() / lam)
    return (n * lam).to(dtype) == y


@pytest.mark.parametrize("release, same_support", [(secure_release, True),
                                                   (plain_float_release, False)])
def test_output_set_does_not_depend_on_the_record(release, same_support):
    """Secure: every output, with or without the record, lies on the same lattice. Float noise
    fails this (its outputs are not lattice points), so the check can tell the two apart."""
    sigma, c = 2.0, 1.0
    g = target_gradient(c)
    gen = torch.Generator().manual_seed(5)
    for inp in (g, torch.zeros_like(g)):
        ok = on_lattice(release(inp, sigma * c, gen), sigma * c)
        assert bool(ok.all()) is same_support


def test_plain_release_is_the_engines():
    """The attacked float release is what dplib's DP-SGD privatizer computes today."""
    from dplib.training.engine import GaussianPrivatizer
    g = target_gradient(1.0)
    noisy, _ = GaussianPrivatizer(1.1, 1.0).add_noise({"w": g.clone()},
                                                      torch.Generator().manual_seed(3))
    assert torch.equal(noisy["w"], plain_float_release(g, 1.1, torch.Generator().manual_seed(3)))


# --- the hardened source's distribution ------------------------------------------------------

def test_secure_gaussian_is_normal_with_the_requested_std():
    std, n = 1.7, 20_000
    x = secure_gaussian((n,), std=std, generator=torch.Generator().manual_seed(0),
                        dtype=torch.float64).numpy()
    assert stats.kstest(x, stats.norm(scale=std).cdf).pvalue > 1e-3
    assert abs(x.mean()) < 4 * std / math.sqrt(n)
    # sd of the sample variance of a normal: σ²·√(2/(n−1))
    assert abs(x.var() - std ** 2) < 4 * std ** 2 * math.sqrt(2 / (n - 1))
    assert abs(stats.kurtosis(x)) < 4 * math.sqrt(24 / n)
    # every value is a lattice point Λ·k with k an integer
    assert on_lattice(torch.from_numpy(x), std, torch.float64).all()
    # a float sampler's output is not: the lattice check can fail
    z = std * torch.randn(100, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert not on_lattice(z, std, torch.float64).all()


def test_secure_add_noise_adds_that_noise():
    std, n = 0.37, 20_000
    total = target_gradient(3.0, n)
    y = secure_add_noise(total, std=std, generator=torch.Generator().manual_seed(1))
    assert y.dtype == total.dtype and y.shape == total.shape
    noise = (y.double() - total.double()).numpy()
    # rounding the sum to the lattice moves it by at most Λ/2 (plus float32 rounding of y)
    assert stats.kstest(noise, stats.norm(scale=std).cdf).pvalue > 1e-3
    assert abs(noise.var() - std ** 2) < 4 * std ** 2 * math.sqrt(2 / (n - 1))


def test_reproducible_with_a_seed_fresh_without():
    shape, std = (3, 50), 1.0
    a = secure_gaussian(shape, std=std, generator=torch.Generator().manual_seed(9))
    b = secure_gaussian(shape, std=std, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)
    state = torch.get_rng_state()
    c, d = secure_gaussian(shape, std=std), secure_gaussian(shape, std=std)
    assert not torch.equal(c, d) and not torch.equal(c, a)
    assert torch.equal(state, torch.get_rng_state())        # torch's global generator untouched


def test_stack_of_models_one_generator_each():
    """Model m's noise comes from generator m only (as for the float noise of a model stack)."""
    gens = [torch.Generator().manual_seed(s) for s in (21, 22)]
    stack = secure_add_noise(torch.zeros(2, 10), std=1.0, generator=gens)
    alone = secure_add_noise(torch.zeros(1, 10), std=1.0,
                             generator=[torch.Generator().manual_seed(22)])
    assert torch.equal(stack[1], alone[0]) and not torch.equal(stack[0], stack[1])


def test_a_dict_of_sums_is_noised_in_one_draw():
    """A dict (the privatizer's clipped sums, name → tensor) is noised like one flat tensor."""
    total = {"w": torch.zeros(3, 4), "b": torch.zeros(4, dtype=torch.float64)}
    out = secure_add_noise(total, std=1.0, generator=torch.Generator().manual_seed(4))
    flat = secure_add_noise(torch.zeros(16, dtype=torch.float64), std=1.0,
                            generator=torch.Generator().manual_seed(4))
    assert out.keys() == total.keys() and out["w"].shape == (3, 4)
    assert out["w"].dtype == torch.float32 and out["b"].dtype == torch.float64
    assert torch.equal(out["w"].reshape(-1), flat[:12].float()) and torch.equal(out["b"], flat[12:])
    # a stack: model m's noise, over all tensors, comes from generator m only
    gens = [torch.Generator().manual_seed(s) for s in (31, 32)]
    stack = secure_add_noise({"w": torch.zeros(2, 3, 2), "b": torch.zeros(2, 5)}, std=1.0,
                             generator=gens)
    alone = secure_add_noise({"w": torch.zeros(1, 3, 2), "b": torch.zeros(1, 5)}, std=1.0,
                             generator=[torch.Generator().manual_seed(32)])
    assert all(torch.equal(stack[k][1], alone[k][0]) for k in ("w", "b"))
    assert secure_add_noise({}, std=1.0) == {}


def test_extreme_sums_are_clamped_not_leaked():
    total = torch.tensor([1e30, -math.inf, math.inf, math.nan, 0.0])
    y = secure_add_noise(total, std=1.0, generator=torch.Generator().manual_seed(2))
    assert torch.isfinite(y[:3]).all() and torch.isnan(y[3]) and torch.isfinite(y[4])
    lam = secure_grid(1.0)
    assert abs(float(y[0]) - 2.0 ** 40 * lam) < 10 and abs(float(y[1]) + 2.0 ** 40 * lam) < 10


def test_rounding_to_the_lattice_stays_within_the_stated_sensitivity():
    """With the same seed both releases get the same K, so round(y/Λ) − round(y'/Λ) = n_g − n_g'.
    Sums straddling the half-lattice points move by ~0 but round one lattice step apart in every
    coordinate: the √d term of Δ̂ is needed, and it suffices."""
    std, d = 1.0, 4096
    lam = secure_grid(std)

    def lattice_steps_apart(g, g2):
        y = secure_add_noise(g, std=std, generator=torch.Generator().manual_seed(6))
        y2 = secure_add_noise(g2, std=std, generator=torch.Generator().manual_seed(6))
        return (torch.round(y / lam) - torch.round(y2 / lam)).norm().item()

    half = (torch.arange(d, dtype=torch.float64) * 7 + 0.5) * lam      # half-lattice points
    straddle = (half - 1e-6 * lam, half + 1e-6 * lam)
    target = (target_gradient(1.0, d).double(), torch.zeros(d, dtype=torch.float64))
    for g, g2 in (straddle, target):
        bound = secure_sensitivity((g - g2).norm().item(), d, std) / lam
        assert 0 < lattice_steps_apart(g, g2) <= bound
    assert lattice_steps_apart(*straddle) == pytest.approx(math.sqrt(d))   # one step each


def test_sensitivity_and_noise_multiplier():
    lam = secure_grid(2.0)
    assert lam == 2.0 * 2.0 ** -15
    d = secure_sensitivity(1.0, 10_000, 2.0)
    assert 1.0 + 100 * lam < d < 1.0 + 100 * lam * (1 + 2.0 ** -10)
    s = secure_noise_multiplier(2.0, 1.0, 10_000)
    assert s < 2.0 and s == pytest.approx(2.0 / d, rel=1e-12)
    # the three DP-SGD benchmark models (~20k to ~540k parameters) at σ = 1: at most 2.3% lost
    assert secure_noise_multiplier(1.0, 1.0, 535_818) > 0.977


@pytest.mark.parametrize("call, match", [
    (lambda: secure_gaussian((3,), std=0.0), "std must be in"),
    (lambda: secure_gaussian((3,), std=-1.0), "std must be in"),
    (lambda: secure_gaussian((3,), std=math.nan), "std must be in"),
    (lambda: secure_gaussian((3,), std=math.inf), "std must be in"),
    (lambda: secure_gaussian((3,), std=1e300), r"std must be in \[2\*\*-900"),
    (lambda: secure_gaussian((3,), std=True), "std must be a real number"),
    (lambda: secure_gaussian((3, -1), std=1.0), "shape must be a tuple of integers >= 0"),
    (lambda: secure_gaussian((3.5,), std=1.0), "shape must be a tuple of integers >= 0"),
    (lambda: secure_gaussian((3,), std=1.0, dtype=torch.int64), "dtype must be a floating"),
    (lambda: secure_gaussian((3,), std=1.0, generator=torch.Generator()), "generator"),
    (lambda: secure_gaussian((3,), std=1.0, generator=7), "generator must be None"),
    (lambda: secure_add_noise(torch.zeros(2, 3), std=1.0,
                              generator=[torch.Generator().manual_seed(1)]),
     r"one generator per model \(2\), got 1"),
    (lambda: secure_add_noise(np.zeros(3), std=1.0), "total must be a floating-point"),
    (lambda: secure_add_noise(torch.zeros(3, dtype=torch.int32), std=1.0),
     "total must be a floating-point torch.Tensor, got Tensor of dtype torch.int32"),
    (lambda: secure_add_noise({"w": torch.zeros(3), "b": [0.0]}, std=1.0),
     r"total\['b'\] must be a floating-point torch.Tensor, got list"),
    (lambda: secure_add_noise({"w": torch.zeros(3, 2)}, std=1.0,
                              generator=[torch.Generator().manual_seed(1)] * 2),
     r"one generator per model: total\['w'\] has shape \(3, 2\), got 2 generators"),
    (lambda: secure_sensitivity(1.0, 0, 1.0), "numel must be an integer >= 1"),
    (lambda: secure_sensitivity(0.0, 10, 1.0), "sensitivity must be in"),
    (lambda: secure_noise_multiplier(0.0, 1.0, 10), "noise_multiplier must be in"),
    (lambda: secure_noise_multiplier(1.0, math.inf, 10), "max_grad_norm must be in"),
])
def test_bad_inputs_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()
