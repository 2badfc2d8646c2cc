"""dplib.figures.composition: input checks, and the figures draw the numbers dplib computes."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import integrate, stats  # noqa: E402

from dplib.accounting import PLDAccountant, rdp_to_epsilon, gaussian_rdp, DEFAULT_ORDERS  # noqa: E402
from dplib.figures.composition import (MAX_COMPOSITIONS, accountants_figure,  # noqa: E402
                                       privacy_loss_tail_figure)
from dplib.mechanisms import gaussian_delta, gaussian_epsilon  # noqa: E402


def _labels(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize("kwargs, name", [
    (dict(mu=0.0), "mu"), (dict(mu=-1.0), "mu"), (dict(mu=float("nan")), "mu"),
    (dict(mu=21.0), "mu"), (dict(mu="1"), "mu"),
    (dict(epsilon=-0.1), "epsilon"), (dict(epsilon=101.0), "epsilon"),
    (dict(epsilon=True), "epsilon"),
])
def test_tail_figure_refuses_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        privacy_loss_tail_figure(**kwargs)


def test_tail_figure_shows_the_exact_delta_and_the_tail():
    mu, eps = 1.0, 1.0
    fig = privacy_loss_tail_figure(mu, eps)
    labels = " ".join(_labels(fig.axes[0]))
    delta = float(gaussian_delta(1.0 / mu, eps))
    tail = stats.norm.sf(eps, mu**2 / 2, mu)
    assert f"{delta:.3g}" in labels and f"{tail:.3g}" in labels
    # the delta drawn is E[(1 - e^(eps - L))_+] for L ~ N(mu^2/2, mu^2): check by quadrature
    integrand = lambda x: -math.expm1(eps - x) * stats.norm.pdf(x, mu**2 / 2, mu)  # noqa: E731
    assert abs(integrate.quad(integrand, eps, 30)[0] - delta) < 1e-8
    assert delta < tail                       # the tail condition overstates delta
    plt.close(fig)


@pytest.mark.parametrize("kwargs, name", [
    (dict(k=0), "k"), (dict(k=1.5), "k"), (dict(k=True), "k"),
    (dict(k=MAX_COMPOSITIONS + 1), "k"),
    (dict(sigma=0.0), "sigma"), (dict(sigma=0.05), "sigma"), (dict(sigma=2000.0), "sigma"),
    (dict(delta=0.0), "delta"), (dict(delta=1.0), "delta"), (dict(delta=-1e-5), "delta"),
])
def test_accountants_figure_refuses_bad_input(kwargs, name):
    args = dict(k=10, sigma=10.0, delta=1e-5) | kwargs
    with pytest.raises(ValueError, match=name):
        accountants_figure(**args)


def test_accountants_figure_draws_the_accountants_numbers():
    k, sigma, delta = 20, 5.0, 1e-5
    fig = accountants_figure(k, sigma, delta)
    top, bottom = fig.axes
    labels = _labels(top)
    rdp = rdp_to_epsilon(DEFAULT_ORDERS, k * gaussian_rdp(DEFAULT_ORDERS, sigma), delta)[0]
    pld = PLDAccountant().step(noise_multiplier=sigma, sample_rate=1.0,
                               num_steps=k).get_epsilon(delta)
    exact = gaussian_epsilon(sigma / math.sqrt(k), delta)
    assert f"RDP: ε = {rdp:.3g}" in labels
    assert f"PLD accountant: ε = {pld:.3g}" in labels
    assert f"exact: ε = {exact:.3g}" in labels
    # the FFT-composed PLD of the bottom panel is a probability density close to N(k/2s^2, k/s^2)
    x, y = bottom.lines[0].get_data()
    assert np.all(y >= 0) and abs(np.sum(y) * (x[1] - x[0]) - 1) < 1e-3
    mean = np.sum(x * y) / np.sum(y)
    assert abs(mean - k / (2 * sigma**2)) < 0.01 * math.sqrt(k) / sigma
    # and its delta at the reported eps reproduces the target
    fft_label = [t for t in _labels(bottom) if "FFT δ" in t][0]
    assert abs(float(fft_label.split("FFT δ = ")[1]) / delta - 1) < 0.05
    plt.close(fig)


def test_accountants_figure_handles_epsilon_zero():
    # a large delta makes eps = 0 for a single noisy release: still a figure, no log-scale error
    fig = accountants_figure(1, 100.0, 1e-2)
    assert fig.axes[0].get_yscale() == "symlog"
    plt.close(fig)
