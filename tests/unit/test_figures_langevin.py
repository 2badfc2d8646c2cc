"""dplib.figures.langevin: the coupled-runs figure of chapter 6 draws the numbers dplib.langevin
computes, its runs really share their noise and follow the exact Gaussian laws, and bad input is
refused with a ValueError that names the parameter."""
import math

import matplotlib
import numpy as np
import pytest
from matplotlib.figure import Figure

from dplib.figures.langevin import coupled_runs, coupled_runs_figure
from dplib.langevin import (composition_rdp, exact_gaussian_renyi, noisy_gd,
                            privacy_dynamics_rdp, squared_loss_gradient, squared_loss_moments)

matplotlib.use("Agg")
ARGS = dict(sensitivity=4.0, sigma=0.02, eta=0.02, n=100, K=300, alpha=2.0, paths=2, seed=0)


def test_shared_noise_leaves_only_the_drift_between_the_runs():
    """Same seed on D and D': for the linear squared-loss update the gap of every coupled pair is
    the deterministic gap of the means, (1 − (1 − λη)^k) S_g/(λn)."""
    r = coupled_runs(**ARGS)
    gap = r["paths_D_prime"] - r["paths_D"]
    k = r["k"]
    expected = (1 - (1 - ARGS["eta"]) ** k) * ARGS["sensitivity"] / ARGS["n"]
    np.testing.assert_allclose(gap, np.repeat(expected[:, None], ARGS["paths"], 1), atol=1e-12)
    np.testing.assert_allclose(r["mean_D_prime"] - r["mean_D"], expected, atol=1e-15)
    # and the runs are not the means: the noise is there
    assert np.abs(r["paths_D"] - r["mean_D"][:, None]).max() > 0.5 * r["sd"][-1]


def test_curves_are_the_library_formulas():
    r = coupled_runs(**ARGS, lam=1.0)
    k = r["k"]
    a, s, sg, e, n = (ARGS[x] for x in ("alpha", "sensitivity", "sigma", "eta", "n"))
    np.testing.assert_allclose(r["renyi"], exact_gaussian_renyi(a, s, sg, e, n, k), rtol=1e-14)
    np.testing.assert_allclose(r["bound"], privacy_dynamics_rdp(a, s, sg, e, 1.0, n, k),
                               rtol=1e-14)
    np.testing.assert_allclose(r["composition"], composition_rdp(a, s, sg, e, 1.0, n, k),
                               rtol=1e-14)
    _, var = squared_loss_moments(0.0, 0.0, sg, e, k)
    np.testing.assert_allclose(r["sd"], np.sqrt(var), rtol=1e-14)
    # the plateau: α (S_g/n)² / (2 · 2σ²/(2 − η)) for the worst pair of records
    limit = a * (s / n) ** 2 / (2 * 2 * sg**2 / (2 - e))
    assert math.isclose(r["limit"], limit, rel_tol=1e-12)
    assert np.all(np.diff(r["renyi"]) > 0) and np.all(r["renyi"] <= r["bound"] * (1 + 1e-12))


def test_runs_follow_the_exact_gaussian_law():
    """Many coupled runs at step K: mean and variance match squared_loss_moments (level 1e-4)."""
    r = coupled_runs(sensitivity=4.0, sigma=0.5, eta=0.1, n=10, K=40, alpha=2.0, paths=4000,
                     seed=3)
    x = r["paths_D"][-1]
    mean, sd = r["mean_D"][-1], r["sd"][-1]
    z = (x.mean() - mean) / (sd / math.sqrt(x.size))
    assert abs(z) < 3.9
    chi = (x.size - 1) * x.var(ddof=1) / sd**2
    from scipy import stats
    p = 2 * min(stats.chi2.cdf(chi, x.size - 1), stats.chi2.sf(chi, x.size - 1))
    assert p > 1e-4


def test_default_seed_is_fresh_entropy():
    """No public default seed: without one, two calls draw different noise (same laws)."""
    a, b = coupled_runs(**{**ARGS, "seed": None}), coupled_runs(**{**ARGS, "seed": None})
    assert not np.array_equal(a["paths_D"], b["paths_D"])
    np.testing.assert_array_equal(a["renyi"], b["renyi"])


def test_runs_are_noisy_gd_itself():
    r = coupled_runs(**ARGS)
    data = np.zeros(ARGS["n"])
    data[0] = -ARGS["sensitivity"] / 2
    path = noisy_gd(squared_loss_gradient(data), np.zeros((ARGS["paths"], 1)), n=ARGS["n"],
                    eta=ARGS["eta"], sigma=ARGS["sigma"], K=ARGS["K"], seed=ARGS["seed"],
                    device="cpu", trajectory=True)
    np.testing.assert_array_equal(r["paths_D"], path[..., 0].double().numpy())


def test_figure_draws_those_numbers():
    r = coupled_runs(**ARGS)
    fig = coupled_runs_figure(**ARGS)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    top, bottom = fig.axes
    lines = {ln.get_label(): ln for ln in bottom.get_lines()}
    np.testing.assert_allclose(lines["exact, between the laws"].get_ydata(), r["renyi"])
    np.testing.assert_allclose(lines["dynamics bound"].get_ydata(), r["bound"])
    np.testing.assert_allclose(lines["composition"].get_ydata(), r["composition"])
    top_lines = {ln.get_label(): ln for ln in top.get_lines()}
    np.testing.assert_allclose(top_lines["runs on D"].get_ydata(), r["paths_D"][:, 0])
    np.testing.assert_allclose(top_lines["law on D': mean ± 2 sd"].get_ydata(),
                               r["mean_D_prime"])
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.get_legend() is not None


@pytest.mark.parametrize("bad, name", [
    (dict(sigma=0.0), "sigma"), (dict(sigma=-1.0), "sigma"), (dict(eta=0.0), "eta"),
    (dict(sensitivity=float("nan")), "sensitivity"), (dict(n=1), "n"), (dict(n=2.5), "n"),
    (dict(K=0), "K"), (dict(alpha=1.0), "alpha"), (dict(alpha=0.5), "alpha"),
    (dict(paths=0), "paths"), (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"), (dict(lam=0.0), "lam"),
    (dict(eta=0.5, lam=3.0), "eta"),
])
def test_bad_input_is_refused(bad, name):
    for fn in (coupled_runs, coupled_runs_figure):
        with pytest.raises(ValueError, match=name):
            fn(**{**ARGS, **bad})
