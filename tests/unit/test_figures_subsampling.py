"""The figures of amplification by subsampling draw what dplib computes and refuse bad input."""
import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy.stats import norm

from dplib.accounting import amplified_epsilon, amplified_epsilon_bound
from dplib.figures.subsampling import (amplification_figure, draw_amplification_curves,
                                       draw_subsampled_pair)

matplotlib.use("Agg")


def _ax():
    return Figure().subplots()


def test_pair_is_the_mixture_of_the_sampled_gaussian():
    ax = _ax()
    d = draw_subsampled_pair(ax, noise_multiplier=1.5, sample_rate=0.3)
    x = d["x"]
    assert np.allclose(d["Q"], norm.pdf(x, 0, 1.5))
    assert np.allclose(d["P"], 0.7 * norm.pdf(x, 0, 1.5) + 0.3 * norm.pdf(x, 1, 1.5))
    # both are densities: they integrate to about 1 over the grid (±3.5σ)
    for key in ("Q", "P", "full"):
        assert abs(np.trapezoid(d[key], x) - 1) < 1e-3
    assert len(ax.lines) == 3 and ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert ax.get_legend() is not None


def test_curves_are_dplibs_amplified_epsilon():
    ax = _ax()
    out = draw_amplification_curves(ax, sample_rates=(1.0, 0.05), epsilon_max=5.0)
    eps = out["epsilon"]
    assert eps[0] == pytest.approx(0.01) and eps[-1] == pytest.approx(5.0)
    assert np.allclose(out[1.0], eps)                        # q = 1: no amplification
    assert np.allclose(out[0.05], amplified_epsilon(eps, 0.05))
    assert np.allclose(out[0.05], np.log1p(0.05 * np.expm1(eps)))
    drawn = {tuple(np.round(line.get_ydata()[:3], 12)) for line in ax.lines}
    assert tuple(np.round(out[0.05][:3], 12)) in drawn
    # the dotted 2qε bound is drawn only on ε ≤ 1, and lies above the exact curve there
    bound = [ln for ln in ax.lines if ln.get_linestyle() == ":" and len(ln.get_xdata())]
    assert len(bound) == 1 and max(bound[0].get_xdata()) == pytest.approx(1.0)
    xb, yb = bound[0].get_xdata(), bound[0].get_ydata()
    assert np.allclose(yb, amplified_epsilon_bound(xb, 0.05))
    assert np.all(yb >= amplified_epsilon(xb, 0.05))
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_figure_has_two_labelled_panels():
    fig = amplification_figure()
    try:
        assert isinstance(fig, Figure) and len(fig.axes) == 2
        for ax in fig.axes:
            assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kwargs, name", [
    ({"noise_multiplier": 0.0}, "noise_multiplier"),
    ({"noise_multiplier": math.nan}, "noise_multiplier"),
    ({"sample_rate": 1.0}, "sample_rate"),
    ({"sample_rate": 0.0}, "sample_rate"),
    ({"sample_rates": ()}, "sample_rates"),
    ({"sample_rates": (0.5, 1.5)}, "sample_rates"),
    ({"sample_rates": 0.5}, "sample_rates"),
    ({"epsilon_max": 0.5}, "epsilon_max"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    before = plt.get_fignums()
    with pytest.raises(ValueError, match=name):
        amplification_figure(**kwargs)
    for num in set(plt.get_fignums()) - set(before):
        plt.close(num)


def test_bad_axes_are_refused():
    with pytest.raises(ValueError, match="ax"):
        draw_subsampled_pair("not axes")
    with pytest.raises(ValueError, match="ax"):
        draw_amplification_curves(None)
