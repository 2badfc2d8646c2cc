"""Beyond membership: stealing a model's parameters (extraction) and its training inputs
(inversion) through its prediction interface.

Model extraction by equation solving (Tramèr, Zhang, Juels, Reiter & Ristenpart 2016, Sec. 4.1;
the "Extraction of Logistic Regression" example of Ying's lecture notes, ``YingCPSC680``). A binary logistic regression answers
f(x) = 1 / (1 + exp(−(w·x + b))); its log-odds are linear in the unknowns,

    ln(f(x) / (1 − f(x))) = w·x + b ,

so n + 1 queries at points in general position give n + 1 linear equations for the n + 1
unknowns (w, b), solved exactly. For a K-class softmax regression p_k(x) ∝ exp(w_k·x + b_k) the
weights are identifiable only up to adding one vector to every class (the probabilities do not
change); the log-ratios ln(p_k/p_0) = (w_k − w_0)·x + (b_k − b_0) are linear, so the same n + 1
queries recover every w_k − w_0 and b_k − b_0, i.e. the model up to that invariance, and hence
its exact predictions. With more than n + 1 queries (or rounded outputs) the system is solved
by least squares.

Model inversion (Fredrikson, Jha & Ristenpart 2015, Algorithm 1 "MI-Face"; also in
``YingCPSC680``):
gradient descent on the *input* to make the model confident in a chosen label,
c(x) = 1 − f̃_label(x) + AUXTERM(x), x_i = PROCESS(x_{i−1} − λ∇c(x_{i−1})), stopping when c has
not improved on the last β iterates or when c ≤ γ, and returning the best iterate. The result is
a class-representative input ("what the model thinks a 3 looks like"), not a particular
training record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import math

import numpy as np

from .._constraints import Custom, Flag, Interval, IsCallable, constrained, unconstrained
from .._validate import check_int, check_real, shown
from ._params import COUNT, COUNT_OR_NONE, POSITIVE, POSITIVE_OR_NONE, RNG

__all__ = ["ExtractionResult", "extract_logistic_regression", "prediction_api",
           "InversionResult", "invert_model"]


@unconstrained("result record built by extract_logistic_regression (declared)")
@dataclass(frozen=True)
class ExtractionResult:
    """Recovered parameters. Binary: ``weights`` [n], ``bias`` scalar. Softmax with K classes:
    ``weights`` [K, n] and ``bias`` [K] normalised so that class 0 has zero weights and bias
    (compare with the true W − W[0], b − b[0]). ``queries``: the points that were asked."""
    weights: np.ndarray
    bias: np.ndarray | float
    queries: np.ndarray
    num_queries: int

    @unconstrained("applies the extracted model to query points: any real array [q, n] the api "
                   "itself would take")
    def decision(self, X) -> np.ndarray:
        """The extracted model's logits (binary: log-odds [q]; softmax: [q, K])."""
        x = np.asarray(X, dtype=np.float64)
        return x @ self.weights.T + self.bias


@constrained(api=IsCallable("a function from a query array to probabilities"),
             n_features=COUNT, rng=RNG, num_queries=COUNT_OR_NONE, query_scale=POSITIVE_OR_NONE)
def extract_logistic_regression(api: Callable, n_features: int, *, rng,
                                num_queries: int | None = None,
                                query_scale: float | None = None) -> ExtractionResult:
    """Recover a logistic-regression model from its predicted probabilities.

    ``api(X)`` takes a float64 array [q, n] and returns probabilities: [q] (binary: P(y = 1))
    or [q, K] (softmax, rows summing to 1). Queries are i.i.d. N(0, s²) points with
    s = ``query_scale`` (default 1/√n: then w·x has standard deviation ‖w‖/√n, the size of a
    typical weight, so the answers stay away from 0 and 1, where a probability rounded in
    floating point loses its log-odds); they are in general position with probability 1.
    ``num_queries`` defaults to n + 1, the minimum (more are solved by least squares).
    Probabilities of exactly 0 or 1 carry no log-odds and are refused (lower ``query_scale``).
    Tramèr et al. (2016, Sec. 4.1).
    """
    n = n_features
    q = n + 1 if num_queries is None else check_int("num_queries", num_queries, low=n + 1)
    scale = 1 / np.sqrt(n) if query_scale is None else query_scale
    gen = rng
    X = gen.normal(0.0, scale, size=(q, n))
    p = np.asarray(api(X), dtype=np.float64)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.shape[0] != q or p.ndim not in (1, 2):
        raise ValueError(f"api must return [{q}] or [{q}, K] probabilities for {q} queries, "
                         f"got shape {p.shape}")
    if not np.all((p > 0) & (p < 1)):
        raise ValueError("api returned a probability of exactly 0 or 1: its log-odds are "
                         "undefined; query closer to the data (smaller query_scale)")
    if p.ndim == 1:
        target = np.log(p) - np.log1p(-p)
    else:
        lp = np.log(p)
        target = lp - lp[:, :1]                      # ln(p_k / p_0)
    A = np.hstack([X, np.ones((q, 1))])
    if q == n + 1:
        theta = np.linalg.solve(A, target)
    else:
        theta = np.linalg.lstsq(A, target, rcond=None)[0]
    weights, bias = theta[:-1].T, theta[-1]
    return ExtractionResult(weights=np.ascontiguousarray(weights),
                            bias=float(bias) if np.ndim(bias) == 0 else bias,
                            queries=X, num_queries=q)


@constrained(decimals=Custom(lambda name, value: (None if value is None
                                                  else check_int(name, value, low=0)),
                             "None or an integer >= 0", [-1, 2.5, "3", True, float("nan")]),
             binary=Flag())
def prediction_api(model, *, decimals: int | None = None, binary: bool = False) -> Callable:
    """A black-box prediction interface to a torch classifier: X ↦ softmax probabilities.

    The model is evaluated in float64 on a copy (so that the interface returns full-precision
    probabilities, as the APIs studied by Tramèr et al. did). ``decimals`` rounds the returned
    probabilities (a proposed defence); ``binary=True`` returns P(class 1) for a two-class model.
    """
    import copy

    import torch
    m = copy.deepcopy(model).to("cpu").double().eval()

    def api(X):
        with torch.no_grad():
            z = m(torch.as_tensor(np.asarray(X, dtype=np.float64)))
        if binary and z.shape[-1] == 1:
            p = torch.sigmoid(z[:, 0])
        else:
            p = torch.softmax(z, dim=-1)
            if binary:
                if p.shape[-1] != 2:
                    raise ValueError(f"binary=True needs a 2-class model, got {p.shape[-1]}")
                p = p[:, 1]
        out = p.numpy()
        return np.round(out, decimals) if decimals is not None else out
    return api


@unconstrained("result record built by invert_model (declared)")
@dataclass(frozen=True)
class InversionResult:
    """``inputs`` [k, *input_shape]: the best input found per requested label; ``costs`` [k]:
    c at that input; ``confidence`` [k]: f_label there; ``iterations`` [k]: iterations run."""
    inputs: np.ndarray
    costs: np.ndarray
    confidence: np.ndarray
    iterations: np.ndarray


@constrained(steps=COUNT, lr=POSITIVE, patience=COUNT,
             gamma=Interval(0.0, 1.0, closed="both"), l2=Interval(0.0, math.inf, closed="left"))
def invert_model(model, labels, input_shape: tuple[int, ...], *, steps: int = 500,
                 lr: float = 0.1, patience: int = 50, gamma: float = 0.0, l2: float = 0.0,
                 bounds: tuple[float, float] | None = None, device=None) -> InversionResult:
    """MI-Face (Fredrikson et al. 2015, Algorithm 1) for a batch of labels at once.

    Cost c(x) = 1 − softmax(model(x))_label + ``l2``·‖x‖² (the AUXTERM; 0 by default);
    iterate x ← PROCESS(x − ``lr``·∇c(x)) from x₀ = 0, where PROCESS clips to ``bounds`` (the
    data range) when given; a row stops when its cost is ≥ the maximum of its previous
    ``patience`` costs (β in the paper: no recent progress), or when it is ≤ ``gamma`` (γ), or
    after ``steps`` (α) iterations. Returns the lowest-cost iterate of every row. All rows run
    in one batch (no loop over labels).
    """
    import torch

    from ..device import as_device
    if bounds is not None:
        lo, hi = (check_real("bounds", float(v)) for v in bounds)
        if not lo < hi:
            raise ValueError(f"bounds must be (low, high) with low < high, got {shown(bounds)}")
    dev = as_device(device)
    lab = torch.as_tensor(np.asarray(labels), dtype=torch.long, device=dev).reshape(-1)
    shape = tuple(check_int("input_shape", s) for s in input_shape)
    model = model.to(dev).eval()
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    k = lab.numel()
    x = torch.zeros((k, *shape), device=dev, requires_grad=True)
    best_x = x.detach().clone()
    best_c = torch.full((k,), np.inf, device=dev)
    history = torch.full((patience, k), np.inf, device=dev)
    active = torch.ones(k, dtype=torch.bool, device=dev)
    iters = torch.zeros(k, dtype=torch.long, device=dev)

    def cost(z):
        prob = torch.softmax(model(z), dim=-1).gather(1, lab[:, None])[:, 0]
        return 1 - prob + l2 * z.reshape(k, -1).pow(2).sum(1), prob

    for i in range(steps):
        c, _ = cost(x)
        (g,) = torch.autograd.grad(c.sum(), x)
        with torch.no_grad():
            step = torch.where(active.view(-1, *([1] * len(shape))), lr * g, torch.zeros_like(g))
            x -= step
            if bounds is not None:
                x.clamp_(lo, hi)
            c_new, _ = cost(x)
            iters += active.long()
            improved = active & (c_new < best_c)
            best_c = torch.where(improved, c_new, best_c)
            best_x[improved] = x[improved]
            stop = active & ((c_new >= history.max(0).values) | (c_new <= gamma))
            history = torch.roll(history, 1, 0)
            history[0] = torch.where(active, c_new, history[0])
            active &= ~stop
        if not bool(active.any()):
            break
    with torch.no_grad():
        _, conf = cost(best_x)
    for p, f in zip(model.parameters(), flags):
        p.requires_grad_(f)
    return InversionResult(inputs=best_x.cpu().numpy(), costs=best_c.cpu().numpy(),
                           confidence=conf.cpu().numpy(), iterations=iters.cpu().numpy())
