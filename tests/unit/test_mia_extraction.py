"""Model extraction (Tramèr et al. 2016 equation solving) and model inversion (Fredrikson et al.
2015 MI-Face).

Extraction must recover a logistic regression's parameters to 1e-6 from exactly n + 1 queries
(binary: w and b; softmax: the weights up to the common shift, i.e. W − W[0]). Inversion must
produce, for every digit class of a trained model, an input the model assigns to that class
with high confidence and that resembles the class's average training image more than any other
class's.
"""
import math

import numpy as np
import pytest
import torch

from dplib.attacks import extract_logistic_regression, invert_model, prediction_api
from dplib.training import make_logistic_regression, make_mlp, train


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("n", [1, 5, 64])
def test_binary_extraction_exact(n):
    g = np.random.default_rng(n)
    w, b = g.normal(size=n), float(g.normal())

    def api(X):
        return 1 / (1 + np.exp(-(X @ w + b)))
    res = extract_logistic_regression(api, n, rng=0)
    assert res.num_queries == n + 1 and res.queries.shape == (n + 1, n)
    np.testing.assert_allclose(res.weights, w, atol=1e-6, rtol=0)
    assert res.bias == pytest.approx(b, abs=1e-6)
    X = g.normal(size=(50, n))
    np.testing.assert_allclose(res.decision(X), X @ w + b, atol=1e-6)


def _digits():
    from sklearn.datasets import load_digits
    d = load_digits()
    return (torch.tensor(d.data / 16.0 - 0.3, dtype=torch.float32), torch.tensor(d.target))


def test_softmax_extraction_of_a_trained_model():
    x, y = _digits()
    model = make_logistic_regression(64, 10)
    train(model, (x[:600], y[:600]), sample_rate=0.2, lr=0.05, epochs=5, optimizer="adam",
          noise_multiplier=0.0, max_grad_norm=math.inf, device="cpu", seed=0)
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][0]
    W = lin.weight.detach().double().numpy()
    b = lin.bias.detach().double().numpy()
    res = extract_logistic_regression(prediction_api(model), 64, rng=1)
    assert res.num_queries == 65
    np.testing.assert_allclose(res.weights, W - W[0], atol=1e-6, rtol=0)
    np.testing.assert_allclose(res.bias, b - b[0], atol=1e-6, rtol=0)
    stolen = np.argmax(res.decision(x.double().numpy()), 1)
    assert (stolen == model(x).argmax(1).numpy()).all()
    # binary interface of a two-class model: P(class 1) only
    two = make_logistic_regression(64, 2, seed=3)
    lin2 = [m for m in two.modules() if isinstance(m, torch.nn.Linear)][0]
    w2 = (lin2.weight[1] - lin2.weight[0]).detach().double().numpy()
    r2 = extract_logistic_regression(prediction_api(two, binary=True), 64, rng=2)
    np.testing.assert_allclose(r2.weights, w2, atol=1e-6, rtol=0)


def test_extraction_with_more_queries_and_bad_answers():
    g = np.random.default_rng(0)
    w, b = g.normal(size=8), 0.3

    def api(X):
        return 1 / (1 + np.exp(-(X @ w + b)))
    res = extract_logistic_regression(api, 8, rng=0, num_queries=40)
    np.testing.assert_allclose(res.weights, w, atol=1e-9)
    with pytest.raises(ValueError, match="exactly 0 or 1"):
        extract_logistic_regression(lambda X: np.round(api(X * 100)), 8, rng=0)
    with pytest.raises(ValueError, match="num_queries"):
        extract_logistic_regression(api, 8, rng=0, num_queries=5)
    with pytest.raises(ValueError, match="shape"):
        extract_logistic_regression(lambda X: api(X)[:3], 8, rng=0)


def test_model_inversion_recovers_class_prototypes():
    x, y = _digits()
    torch.manual_seed(0)
    model = make_mlp(64, 10, (32,), seed=0)
    train(model, (x, y), sample_rate=0.1, lr=0.02, epochs=10, optimizer="adam",
          noise_multiplier=0.0, max_grad_norm=math.inf, device="cpu", seed=0)
    lo, hi = float(x.min()), float(x.max())
    res = invert_model(model, np.arange(10), (64,), steps=300, lr=0.1, l2=1e-3,
                       bounds=(lo, hi), device="cpu")
    assert res.inputs.shape == (10, 64)
    assert np.all(res.confidence > 0.99)
    assert np.all(res.inputs >= lo) and np.all(res.inputs <= hi)
    with torch.no_grad():
        pred = model(torch.tensor(res.inputs)).argmax(1).numpy()
    np.testing.assert_array_equal(pred, np.arange(10))
    means = np.stack([x[y == c].numpy().mean(0) for c in range(10)])
    corr = np.corrcoef(np.vstack([res.inputs, means]))[:10, 10:]
    assert (corr.argmax(1) == np.arange(10)).sum() >= 9
    # gamma stops a row as soon as its cost is small enough
    early = invert_model(model, [3], (64,), steps=300, lr=0.1, gamma=0.5, device="cpu")
    assert early.iterations[0] < 300 and early.costs[0] <= 0.5
    assert all(p.requires_grad for p in model.parameters())


def test_inversion_bad_input():
    m = make_mlp(4, 2, (3,), seed=0)
    with pytest.raises(ValueError, match="bounds"):
        invert_model(m, [0], (4,), bounds=(1.0, 0.0), device="cpu")
    with pytest.raises(ValueError, match="gamma"):
        invert_model(m, [0], (4,), gamma=2.0, device="cpu")
