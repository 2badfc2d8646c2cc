"""The DP-SGD figures draw what dplib computes and refuse bad input."""
import math

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from dplib.figures.dpsgd import (clipped_fraction, gradient_norm_histogram, pipeline_figure,
                                 training_run_figure)
from dplib.training import clip_factors, make_logistic_regression, per_example_grads, train
from dplib.training.grads import flat_norms

matplotlib.use("Agg")


def _texts(fig: Figure) -> str:
    return " ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def _data(n=60, d=5, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, k, (n,), generator=g)
    return x, y


def _run(**kw):
    x, y = _data()
    args = dict(sample_rate=0.5, steps=12, lr=0.5, max_grad_norm=1.0, noise_multiplier=1.5,
                eval_data=(x, y), eval_every=1, device="cpu", seed=0)
    args.update(kw)
    return train(make_logistic_regression(5, 3), (x, y), **args)


# --- the pipeline diagram ------------------------------------------------------------------------

def test_pipeline_names_every_step_and_the_accountant():
    fig = pipeline_figure()
    text = _texts(fig)
    for step in ("Poisson batch", "per-example gradients", "clip", "sum", "noise", "divide",
                 "optimizer step", "accountant", "post-\nprocessing"):
        assert step in text
    assert isinstance(fig, Figure)


def test_pipeline_writes_the_given_values():
    text = _texts(pipeline_figure(noise_multiplier=2.5, max_grad_norm=0.5, sample_rate=0.1,
                                  n=500))
    assert "σ = 2.5" in text and "$C$ = 0.5" in text and "= 0.1" in text
    assert "$qn$ = 50" in text


@pytest.mark.parametrize("kw", [dict(noise_multiplier=-1.0), dict(noise_multiplier=math.inf),
                                dict(max_grad_norm=0.0), dict(max_grad_norm=math.inf),
                                dict(sample_rate=0.0), dict(sample_rate=1.5), dict(n=0),
                                dict(n=2.5), dict(noise_multiplier="1")])
def test_pipeline_refuses_bad_values(kw):
    name = next(iter(kw))
    with pytest.raises(ValueError, match=name):
        pipeline_figure(**kw)


# --- gradient norms ------------------------------------------------------------------------------

def test_clipped_fraction_is_the_share_that_clipping_changes():
    x, y = _data()
    model = make_logistic_regression(5, 3, seed=1)
    norms = flat_norms(per_example_grads(model, F.cross_entropy, x, y))
    c = float(norms.median())
    share = clipped_fraction(norms, c)
    # dplib's clipping scales exactly these examples (factor < 1), and the count matches
    assert share == pytest.approx(float((clip_factors(norms, c) < 1).double().mean()))
    assert share == pytest.approx(np.mean(norms.numpy() > c))
    assert clipped_fraction(norms, float(norms.max())) == 0.0
    assert clipped_fraction([0.0, 2.0], 1.0) == 0.5


@pytest.mark.parametrize("norms, c, name", [([], 1.0, "norms"), ([[1.0]], 1.0, "norms"),
                                            ([-1.0], 1.0, "norms"), ([math.nan], 1.0, "norms"),
                                            ([1.0], 0.0, "max_grad_norm"),
                                            ([1.0], math.inf, "max_grad_norm"),
                                            ([True], 1.0, "norms")])
def test_clipped_fraction_refuses_bad_input(norms, c, name):
    with pytest.raises(ValueError, match=name):
        clipped_fraction(norms, c)


def test_histogram_draws_the_shares_of_dplibs_norms():
    x, y = _data(n=200)
    model = make_logistic_regression(5, 3, seed=1)
    norms = flat_norms(per_example_grads(model, F.cross_entropy, x, y))
    zero = torch.zeros(40, dtype=norms.dtype)        # a zero norm lands in the first bin
    fig = gradient_norm_histogram({"model": norms, "with zeros": torch.cat([norms, zero])},
                                  max_grad_norm=0.5, bins=20)
    ax0, ax1 = fig.axes
    heights0 = np.array([p.get_height() for p in ax0.patches])
    heights1 = np.array([p.get_height() for p in ax1.patches])
    assert len(heights0) == 20 and heights0.sum() == pytest.approx(1.0)
    assert heights1.sum() == pytest.approx(1.0) and heights1[0] >= 40 / 240
    edges = [p.get_x() for p in ax0.patches] + [ax0.patches[-1].get_x()
                                                + ax0.patches[-1].get_width()]
    counts, _ = np.histogram(norms.numpy(), bins=np.array(edges))
    assert np.allclose(heights0, counts / len(norms))
    assert ax0.lines[0].get_xdata()[0] == 0.5                     # C is marked
    assert f"{100 * clipped_fraction(norms, 0.5):.0f}% above C" in ax0.get_title()
    assert ax1.get_xscale() == "log" and ax1.get_xlabel()


@pytest.mark.parametrize("kw, name", [
    (dict(norms=[1.0, 2.0]), "norms"), (dict(norms={}), "norms"),
    (dict(norms={str(i): [1.0] for i in range(5)}), "norms"),
    (dict(norms={1: [1.0]}), "norms"), (dict(norms={"a": [-1.0]}), "norms"),
    (dict(max_grad_norm=-1.0), "max_grad_norm"), (dict(bins=4), "bins"),
    (dict(bins=201), "bins"), (dict(bins=10.0), "bins")])
def test_histogram_refuses_bad_input(kw, name):
    args = dict(norms={"a": [0.5, 2.0]}, max_grad_norm=1.0)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        gradient_norm_histogram(args.pop("norms"), **args)


# --- one training run ----------------------------------------------------------------------------

def test_a_run_stopped_early_is_the_shorter_run():
    """What the chapter's widget relies on: with a fixed seed and σ, the first k steps of a run
    are the k-step run (same batches, same noise), and the history holds its ε."""
    long, short = _run(steps=12), _run(steps=5)
    h = long.history[short.steps - 1]
    assert h["step"] == 5 and h["epsilon"] == short.epsilon
    assert h["test_accuracy"] == short.history[-1]["test_accuracy"]
    assert long.not_private.train_loss[short.steps - 1] == short.not_private.train_loss[-1]


def test_training_run_figure_draws_the_history_up_to_the_stop():
    run = _run()
    fig = training_run_figure(run, 2.5, reference_accuracy=0.9)      # 2.5 epochs = 5 steps
    ax_eps, ax_acc = fig.axes
    bold = ax_eps.lines[1]
    assert list(bold.get_xdata()) == [h["epoch"] for h in run.history[:5]]
    assert list(bold.get_ydata()) == [h["epsilon"] for h in run.history[:5]]
    assert list(ax_acc.lines[1].get_ydata()) == [h["test_accuracy"] for h in run.history[:5]]
    assert f"{run.history[4]['epsilon']:.3g}" in ax_eps.get_title()
    assert any(list(ln.get_ydata()) == [0.9, 0.9] for ln in ax_acc.lines)
    full = training_run_figure(run, 6.0)
    assert len(full.axes[0].lines[1].get_xdata()) == len(run.history)


def test_training_run_figure_refuses_bad_input():
    run = _run()
    with pytest.raises(ValueError, match="result"):
        training_run_figure({"history": []}, 1.0)
    with pytest.raises(ValueError, match="stop_epochs"):
        training_run_figure(run, 7.0)                                # the run has 6 epochs
    with pytest.raises(ValueError, match="stop_epochs"):
        training_run_figure(run, 0.0)
    with pytest.raises(ValueError, match="reference_accuracy"):
        training_run_figure(run, 1.0, reference_accuracy=1.5)
    with pytest.raises(ValueError, match="private run"):
        training_run_figure(_run(eval_data=None), 1.0)
    with pytest.raises(ValueError, match="private run"):
        training_run_figure(_run(noise_multiplier=0.0), 1.0)
