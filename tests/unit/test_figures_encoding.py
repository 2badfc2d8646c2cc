"""dplib.figures.encoding and dplib.encoding.clamp_thresholds: the figure of chapter 8 draws the
numbers Algorithm 2 computes, and refuses bad input."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from dplib.encoding import Codebook, build_codebook, clamp_thresholds, encode  # noqa: E402
from dplib.figures.encoding import clamp_data, clamp_figure  # noqa: E402

D = 60


@pytest.fixture(scope="module")
def codebook():
    return build_codebook(7, D, rng=3)


@pytest.fixture(scope="module")
def grad():
    return 0.4 * torch.randn(D, generator=torch.Generator().manual_seed(5), dtype=torch.float64)


def test_thresholds_are_the_matched_code_vector_by_rank(codebook, grad):
    thr, idx = clamp_thresholds(grad, codebook)
    out, idx2 = encode(grad, codebook, return_index=True)
    assert int(idx) == int(idx2)
    # the thresholds, read in the order of |∇|, are the matched code vector's sorted magnitudes
    order = torch.argsort(grad.abs())
    assert torch.allclose(thr[order], codebook.vectors[idx].double())
    assert torch.equal(out, torch.clamp(grad, -thr, thr))
    # it is the best match: no other code vector has a larger cosine with the sorted magnitudes
    mags = torch.sort(grad.abs()).values
    sims = (codebook.vectors.double() @ mags) / codebook.norms
    assert int(torch.argmax(sims)) == int(idx)


def test_batched_thresholds_equal_row_by_row(codebook):
    g = torch.randn(4, D, generator=torch.Generator().manual_seed(1))
    thr, idx = clamp_thresholds(g, codebook)
    for r in range(4):
        t1, i1 = clamp_thresholds(g[r], codebook)
        assert torch.equal(thr[r], t1) and int(idx[r]) == int(i1)


def test_clamp_data_reports_what_encode_does(codebook, grad):
    data = clamp_data(grad, codebook)
    enc = encode(grad, codebook)
    assert np.array_equal(data["encoded"], enc.numpy())
    assert np.array_equal(data["grad"], grad.numpy())
    assert data["clamped_fraction"] == pytest.approx(float((enc != grad).double().mean()))
    cos = float(torch.nn.functional.cosine_similarity(enc, grad, dim=0))
    assert data["cosine"] == pytest.approx(cos, rel=1e-12)
    assert np.all(np.abs(data["encoded"]) <= data["threshold"])
    # a numpy gradient gives the same numbers
    same = clamp_data(grad.numpy(), codebook)
    assert np.array_equal(same["encoded"], data["encoded"]) and same["index"] == data["index"]


def test_figure_draws_the_computed_numbers(codebook, grad):
    data = clamp_data(grad, codebook)
    fig = clamp_figure(grad, codebook, window=10, start=20)
    try:
        ax1, ax2 = fig.axes
        order = data["order"]
        lines = {ln.get_label(): ln.get_ydata() for ln in ax1.get_lines()}
        grad_line = next(v for k, v in lines.items() if k.startswith("gradient"))
        thr_line = next(v for k, v in lines.items() if k.startswith("thresholds"))
        assert np.allclose(grad_line, np.abs(data["grad"])[order])
        assert np.allclose(thr_line, data["threshold"][order])
        assert np.allclose(lines["encoded"], np.minimum(grad_line, thr_line))
        heights = [p.get_height() for p in ax2.patches]
        assert np.allclose(heights[:10], data["grad"][20:30])
        assert np.allclose(heights[10:20], data["encoded"][20:30])
        assert ax1.get_title() and ax2.get_title() and ax1.get_xlabel() and ax2.get_ylabel()
        assert "20–29" in ax2.get_title()
    finally:
        plt.close(fig)


def test_default_window_contains_the_largest_coordinate(codebook, grad):
    fig = clamp_figure(grad, codebook, window=8)
    try:
        i = int(torch.argmax(grad.abs()))
        lo, hi = fig.axes[1].get_xlim()
        assert lo < i < hi
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kwargs, name", [
    ({"window": 0}, "window"), ({"window": D + 1}, "window"), ({"window": 2.5}, "window"),
    ({"window": True}, "window"), ({"start": -1}, "start"), ({"window": 10, "start": D - 9},
                                                               "start"),
    ({"start": 1.0}, "start"),
])
def test_figure_refuses_bad_window_and_start(codebook, grad, kwargs, name):
    with pytest.raises(ValueError, match=name):
        clamp_figure(grad, codebook, **kwargs)
    plt.close("all")


def test_bad_gradient_and_codebook_are_refused(codebook, grad):
    with pytest.raises(ValueError, match="grad"):
        clamp_data(torch.ones(D + 1), codebook)
    with pytest.raises(ValueError, match="grad"):
        clamp_data(torch.ones(2, D), codebook)
    bad = grad.clone()
    bad[3] = float("nan")
    with pytest.raises(ValueError, match="grad"):
        clamp_data(bad, codebook)
    with pytest.raises(ValueError, match="grad"):
        clamp_data("not a gradient", codebook)
    with pytest.raises(ValueError, match="codebook"):
        clamp_data(grad, codebook.vectors)
    with pytest.raises(ValueError, match="codebook"):
        clamp_figure(grad, None)
    with pytest.raises(ValueError, match="grads"):
        clamp_thresholds(np.ones(D), codebook)
    with pytest.raises(ValueError, match="codebook"):
        clamp_thresholds(grad, codebook.vectors)
    with pytest.raises(ValueError, match="grads"):
        clamp_thresholds(torch.ones(D + 2), Codebook(codebook.vectors))
