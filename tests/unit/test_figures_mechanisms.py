"""dplib.figures.mechanisms: the figures of chapter 2 draw the numbers dplib.mechanisms computes
(privacy losses, noise scales, exact error formulas) and refuse bad input."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from dplib.figures.mechanisms import (local_vs_central_errors,  # noqa: E402
                                      local_vs_central_figure, neighbour_outputs_figure)
from dplib.mechanisms import (gaussian_delta, gaussian_privacy_loss,  # noqa: E402
                              gaussian_sigma, laplace_privacy_loss, laplace_scale,
                              rr_estimator_variance)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _line(ax, label):
    (line,) = [ln for ln in ax.get_lines() if ln.get_label() == label]
    return line.get_xdata(), line.get_ydata()


@pytest.mark.parametrize("eps,sens", [(0.5, 1.0), (1.0, 1.0), (2.0, 0.3)])
def test_laplace_loss_panel_is_dplib_loss_and_bounded_by_eps(eps, sens):
    fig = neighbour_outputs_figure(eps, sens, mechanisms=("laplace",))
    top, bottom = fig.axes
    x, y = _line(bottom, "Laplace: bounded by ε")
    b = laplace_scale(eps, sens)
    assert np.allclose(y, laplace_privacy_loss(x, b, sens))
    assert np.max(np.abs(y)) <= eps + 1e-12
    assert np.isclose(y.max(), eps) and np.isclose(y.min(), -eps)
    xd, yd = _line(top, "Laplace, data set D")
    assert np.allclose(yd, stats.laplace.pdf(xd, 0.0, b))
    assert np.isclose(yd.max(), 1 / (2 * b))                 # the peak is on the grid
    assert not any("Gaussian" in ln.get_label() for ax in fig.axes for ln in ax.get_lines())


@pytest.mark.parametrize("method,eps", [("analytic", 1.0), ("analytic", 3.0), ("classic", 0.5)])
def test_gaussian_loss_panel_is_a_line_with_the_tail_probability(method, eps):
    delta, sens = 1e-5, 2.0
    fig = neighbour_outputs_figure(eps, sens, delta=delta, mechanisms=("gaussian",),
                                   gaussian_method=method)
    top, bottom = fig.axes
    sigma = gaussian_sigma(eps, delta, sens, method=method)
    x, y = _line(bottom, "Gaussian: a line, unbounded")
    assert np.allclose(y, gaussian_privacy_loss(x, sigma, sens))
    assert y.max() > eps                                     # the range shows the crossing
    xd, yd = _line(top, "Gaussian, data set D'")
    assert np.allclose(yd, stats.norm.pdf(xd, sens, sigma))
    # the legend's probability is P[L > eps] under D, and it exceeds the exact delta(eps)
    tail = stats.norm.sf(eps, loc=(sens / sigma) ** 2 / 2, scale=sens / sigma)
    labels = [t.get_text() for t in bottom.get_legend().get_texts()]
    assert f"L > ε: probability {tail:.1e} under D" in labels
    assert tail > gaussian_delta(sigma, eps, sens)
    assert f"σ = {sigma:.3g}" in fig.get_suptitle()


def test_both_mechanisms_by_default():
    fig = neighbour_outputs_figure(0.5, delta=1e-6)
    names = {ln.get_label() for ln in fig.axes[0].get_lines()}
    assert names == {"Laplace, data set D", "Laplace, data set D'",
                     "Gaussian, data set D", "Gaussian, data set D'"}


@pytest.mark.parametrize("kwargs,name", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": float("nan")}, "epsilon"),
    ({"sensitivity": -1.0}, "sensitivity"),
    ({"delta": None}, "delta"),
    ({"delta": 1.0}, "delta"),
    ({"mechanisms": ()}, "mechanisms"),
    ({"mechanisms": "laplace"}, "mechanisms"),
    ({"mechanisms": ("laplace", "cauchy")}, "mechanisms"),
    ({"mechanisms": ("laplace", "laplace")}, "mechanisms"),
    ({"gaussian_method": "exact"}, "gaussian_method"),
    ({"epsilon": 1.0, "gaussian_method": "classic"}, "epsilon"),
])
def test_neighbour_outputs_figure_refuses_bad_input(kwargs, name):
    args = {"epsilon": 0.5, "sensitivity": 1.0, "delta": 1e-5} | kwargs
    with pytest.raises(ValueError, match=name):
        neighbour_outputs_figure(args.pop("epsilon"), args.pop("sensitivity"), **args)


def test_laplace_alone_needs_no_delta():
    neighbour_outputs_figure(1.0, mechanisms=["laplace"])


def test_local_vs_central_errors_are_the_exact_formulas_and_agree_with_simulation():
    eps, ns, trials = 0.7, [50, 2_000, 300_000], 3_000
    err = local_vs_central_errors(eps, ns, proportion=0.4, trials=trials, rng=11)
    n = np.array(ns, dtype=float)
    assert err["n"].tolist() == ns
    assert np.allclose(err["local_std"], [np.sqrt(rr_estimator_variance(0.0, k, eps)) for k in ns])
    assert np.allclose(err["local_std"], 1 / (2 * np.sinh(eps / 2) * np.sqrt(n)))
    assert np.allclose(err["central_std"], np.sqrt(2) / (eps * n))
    assert np.allclose(err["sampling_std"], np.sqrt(0.4 * 0.6 / n))
    for sim, exact in (("local_simulated", "local_std"), ("central_simulated", "central_std")):
        assert np.all(np.abs(err[sim] / err[exact] - 1) < 6 / np.sqrt(trials))
    again = local_vs_central_errors(eps, ns, proportion=0.4, trials=trials, rng=11)
    assert all(np.array_equal(err[k], again[k]) for k in err)


@pytest.mark.parametrize("args,kwargs,name", [
    ((0.0, [10]), {}, "epsilon"),
    ((1.0, []), {}, "n_values"),
    ((1.0, 100), {}, "n_values"),
    ((1.0, [100, 0]), {}, "n_values"),
    ((1.0, [100, 2.5]), {}, "n_values"),
    ((1.0, [100]), {"proportion": 1.5}, "proportion"),
    ((1.0, [100]), {"trials": 1}, "trials"),
])
def test_local_vs_central_errors_refuses_bad_input(args, kwargs, name):
    with pytest.raises(ValueError, match=name):
        local_vs_central_errors(*args, **({"rng": 0} | kwargs))


def test_local_vs_central_figure_draws_the_errors():
    err = local_vs_central_errors(1.0, [100, 10_000], trials=200, rng=0)
    fig = local_vs_central_figure(err, epsilon=1.0)
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    drawn = [ln.get_ydata() for ln in lines]
    for key in ("local_std", "central_std", "local_simulated", "central_simulated",
                "sampling_std"):
        assert any(np.array_equal(y, err[key]) for y in drawn), key
    assert all(np.array_equal(ln.get_xdata(), err["n"]) for ln in lines)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "ε = 1" in ax.get_title()


@pytest.mark.parametrize("mutate,kwargs", [
    (lambda e: e.pop("central_std"), {}),
    (lambda e: e.__setitem__("local_std", e["local_std"][:1]), {}),
    (lambda e: e.__setitem__("local_std", -e["local_std"]), {}),
    (lambda e: None, {"epsilon": -1.0}),
])
def test_local_vs_central_figure_refuses_bad_input(mutate, kwargs):
    err = local_vs_central_errors(1.0, [100, 1_000], trials=50, rng=0)
    mutate(err)
    with pytest.raises(ValueError, match="errors|epsilon"):
        local_vs_central_figure(err, **kwargs)
    with pytest.raises(ValueError, match="errors"):
        local_vs_central_figure([1, 2, 3])
