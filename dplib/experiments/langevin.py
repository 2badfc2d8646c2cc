"""Chapter 7's experiments: DP-SGLD against DP-GLD, DP-SGD and no DP on private logistic
regression (the book's version of Ryffel, Bach & Pointcheval 2022, Tables 1–4), behind the
stored tables of ``benchmarks/sgld_table.py``.

* :func:`compare_methods` — one table of :data:`METHODS` on a data set of unit-norm features;
  :func:`compare_on_digits` runs it on public features of scikit-learn's digits and
  :func:`scaling_study` against the training-set size;
* :func:`format_comparison` — the rows as the printed table.

The science they run is in :mod:`dplib.langevin`: the sampler
(:func:`~dplib.langevin.train_dp_sgld_logistic`), the accountants, the DP-SGD baseline's σ under
replace-one adjacency (:func:`~dplib.langevin.calibrate_noise_replace_one`) and Table 4's
quantities (:func:`~dplib.langevin.table4_diagnostics`).

Every run draws fresh OS entropy unless a seed is passed; a fixed seed makes a table
reproducible — for experiments, never for a release.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral

import numpy as np

from .._constraints import Custom, Integer, constrained, same_as, unconstrained
from .._validate import shown
from ..accounting._params import COUNT, DELTA, POSITIVE, SAMPLE_RATE
from ..device import release_seed
from ..langevin import (RELEASED_ORDERS, SGLDResult, calibrate_noise_replace_one,
                        logistic_regression_constants, released_iterates_epsilon,
                        released_iterates_rdp, sgld_calibrate_sigma, sgld_epsilon, sgld_rdp,
                        table4_diagnostics, train_dp_sgld_logistic)
from ..langevin._checks import check_features
from ..langevin._params import SEED_OR_NONE
from ..tables import format_table

__all__ = ["METHODS", "DEFAULT_METHODS", "compare_methods", "compare_on_digits",
           "scaling_study", "format_comparison"]

#: Rows of :func:`compare_methods`. The two "Thm 3.1 claim" rows account DP-SGLD by Theorem 3.1
#: for m < n (``accountant="theorem_3_1"``, flagged unproved); they are not in
#: :data:`DEFAULT_METHODS`.
METHODS = ("DP-SGLD constant", "DP-SGLD decreasing", "DP-SGLD constant, Thm 3.1 claim",
           "DP-SGLD decreasing, Thm 3.1 claim", "DP-GLD", "DP-SGD add/remove",
           "DP-SGD replace-one", "No DP constant", "No DP decreasing")
DEFAULT_METHODS = tuple(m for m in METHODS if "claim" not in m)


def _methods(name: str, value: object) -> tuple:
    """A tuple (or list) of names from :data:`METHODS`, returned as a tuple."""
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{name} must be a tuple of names from {list(METHODS)}, "
                         f"got {shown(value)}")
    for m in value:
        if not isinstance(m, str) or m not in METHODS:
            raise ValueError(f"{name} must be a tuple of names from {list(METHODS)}, "
                             f"got {shown(m)} in it")
    return tuple(value)


#: A subset of :data:`METHODS`.
_METHODS = Custom(_methods, "a tuple of names from METHODS",
                  ["no-such-method", ("no-such-method",), None, 3, "DP-GLD", ("DP-GLD", 3)])


def _data(name: str, value: object) -> Mapping:
    """{"train": (X, y), "test": (X, y), "num_classes": C}; the arrays are checked where used."""
    if not isinstance(value, Mapping) or not {"train", "test", "num_classes"} <= set(value):
        raise ValueError(f'{name} must be a dict with "train": (X, y), "test": (X, y) and '
                         f'"num_classes", got {shown(value)}')
    for part in ("train", "test"):
        if not isinstance(value[part], (tuple, list)) or len(value[part]) != 2:
            raise ValueError(f'{name}["{part}"] must be a pair (X, y), got '
                             f"{shown(value[part])}")
    return value


_DATA = Custom(_data, 'a dict {"train": (X, y), "test": (X, y), "num_classes": C}',
               [None, 3, "abc", {}, {"train": None, "test": None, "num_classes": 2}])


def _sizes(name: str, value: object) -> tuple:
    """A non-empty tuple of training-set sizes, integers ≥ 10."""
    vals = list(value) if isinstance(value, (tuple, list, np.ndarray)) else None
    if not vals or any(isinstance(v, bool) or not isinstance(v, (Integral, np.integer))
                       or v < 10 for v in vals):
        raise ValueError(f"{name} must be a non-empty tuple of integers >= 10, got "
                         f"{shown(value)}")
    return tuple(int(v) for v in vals)


_SIZES = Custom(_sizes, "a non-empty tuple of integers >= 10",
                [(), (9,), (500, 5), (500.0,), (True,), None, 500, "500"])

_ACCOUNTANT_LABEL = {"theorem_3_1": "Theorem 3.1", "released_iterates": "released iterates",
                     "none": "-"}


def _run_rdp_pair(res: SGLDResult, n: int) -> tuple[float, float]:
    """(RDP ε at the best order α, α) of a run, from the accountant that produced its ε."""
    from ..accounting import rdp_to_epsilon

    c = res.constants
    if res.accountant == "theorem_3_1":
        _, alpha = sgld_epsilon(res.delta, c.lipschitz, res.sigma, c.lam, n, res.step_sizes)
        return float(sgld_rdp(alpha, c.lipschitz, res.sigma, c.lam, n, res.step_sizes)), alpha
    orders, rdp = released_iterates_rdp(c.lipschitz, res.sigma, n, res.batch_size,
                                        res.step_sizes, orders=RELEASED_ORDERS)
    _, alpha = rdp_to_epsilon(orders, rdp, res.delta)
    return float(rdp[int(np.argmin(np.abs(orders - alpha)))]), alpha


@constrained(data=_DATA, seeds=COUNT, epochs=POSITIVE, batch_size=COUNT, lam=POSITIVE,
             target_epsilon=POSITIVE, delta=DELTA, max_grad_norm=POSITIVE, methods=_METHODS,
             seed=SEED_OR_NONE)
def compare_methods(data: dict, *, seeds: int = 5, epochs: float = 30, batch_size: int = 200,
                    lam: float = 0.03, target_epsilon: float = 1.0, delta: float = 1e-5,
                    max_grad_norm: float = 1.0, methods: tuple = DEFAULT_METHODS,
                    seed: int | None = None, device: object = None) -> dict:
    """Ryffel et al.'s Tables 1–2 protocol on a data set of unit-norm features (see
    :func:`compare_on_digits`). ``data``: {"train": (X, y), "test": (X, y), "num_classes": C}
    with ‖x‖ ≤ 1 (a public bound). ``methods``: a subset of :data:`METHODS`.

    DP-SGLD rows use :func:`train_dp_sgld_logistic`'s default accountant (released iterates
    for m < n, Theorem 3.1 for the full-batch DP-GLD row); the "Thm 3.1 claim" rows opt in to
    Theorem 3.1 for m < n and carry ``proved=False``.

    Every run is seeded from ``seed`` (DP-SGLD: ``seed``; DP-SGD: ``seed``, …,
    ``seed + seeds − 1``): None (the default) draws 62 fresh bits of OS entropy, an integer makes
    the table reproducible — for experiments, never for a release (a fixed seed makes the noise
    a public function of public inputs).

    Returns ``{"rows": [...], "diagnostics": {...}, "seed": the random seed drawn or passed}``; each row has
    "key" (its name in :data:`METHODS`), "method", "schedule", "adjacency", "accountant",
    "proved", "epsilon", "sigma", "steps", "batch_size", "accuracy" (array over seeds). The
    diagnostics describe the constant-step DP-SGLD run: the quantities of
    :func:`table4_diagnostics` for the RDP pair of its accountant, its ε if every iterate were
    released, what Theorem 3.1 would claim at its σ ("theorem_3_1_epsilon", unproved for m < n)
    and the σ Theorem 3.1 claims suffices ("theorem_3_1_sigma").
    """
    import torch

    from ..training import evaluate, make_logistic_regression, train

    s, m = seeds, batch_size
    s0 = release_seed(seed, bits=62)
    (X, y), (Xt, yt), C = data["train"], data["test"], data["num_classes"]
    X = check_features(X)
    n, p = X.shape
    rows = []

    def sgld(key, method, schedule, batch, target, ep, accountant="auto"):
        res = train_dp_sgld_logistic(X, y, num_classes=C, lam=lam, epochs=ep, batch_size=batch,
                                     target_epsilon=target, delta=delta, schedule=schedule,
                                     chains=s, accountant=accountant, seed=s0,
                                     eval_data=(Xt, yt), device=device, feature_bound=1.0)
        rows.append(dict(key=key, method=method, schedule=schedule,
                         adjacency="replace-one" if target else "-",
                         accountant=_ACCOUNTANT_LABEL[res.accountant], proved=res.proved,
                         epsilon=res.epsilon, sigma=res.sigma, steps=res.steps,
                         batch_size=batch, accuracy=res.test_accuracy))
        return res

    # the constant-step run always happens: it fixes η and K for the other rows
    const = sgld("DP-SGLD constant", "DP-SGLD", "constant", m, target_epsilon, epochs)
    if "DP-SGLD constant" not in methods:
        rows.pop()
    if "DP-SGLD decreasing" in methods:
        sgld("DP-SGLD decreasing", "DP-SGLD", "decreasing", m, target_epsilon, epochs)
    for schedule in ("constant", "decreasing"):
        key = f"DP-SGLD {schedule}, Thm 3.1 claim"
        if key in methods:
            sgld(key, "DP-SGLD", schedule, m, target_epsilon, epochs, "theorem_3_1")
    if "DP-GLD" in methods:       # full batches for the same number of steps
        sgld("DP-GLD", "DP-GLD (full batch)", "constant", n, target_epsilon, const.steps)
    q, lr = m / n, float(const.step_sizes[0])
    T = max(1, round(epochs / q))
    dpsgd = [(a, k) for a, k in (("add/remove", "DP-SGD add/remove"),
                                 ("replace-one", "DP-SGD replace-one")) if k in methods]
    if dpsgd:
        Xtt, ytt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(np.asarray(y))
        Xet = torch.as_tensor(check_features(Xt), dtype=torch.float32)
        yet = torch.as_tensor(np.asarray(yt))
    for adjacency, key in dpsgd:
        kwargs = dict(target_epsilon=target_epsilon) if adjacency == "add/remove" else \
            dict(noise_multiplier=calibrate_noise_replace_one(target_epsilon, delta, q, T))
        accs = []
        for i in range(s):
            res = train(make_logistic_regression(p, C), (Xtt, ytt), sample_rate=q, lr=lr,
                        steps=T, max_grad_norm=max_grad_norm, delta=delta, seed=s0 + i,
                        device=device, **kwargs)
            accs.append(evaluate(res.model, Xet, yet, device=device))
        eps = target_epsilon if adjacency == "replace-one" else res.epsilon
        rows.append(dict(key=key, method="DP-SGD", schedule="constant", adjacency=adjacency,
                         accountant="PLD" if adjacency == "replace-one" else "RDP",
                         proved=True, epsilon=eps, sigma=res.noise_multiplier, steps=T,
                         batch_size=m, accuracy=np.array(accs)))
    if "No DP constant" in methods:
        sgld("No DP constant", "No DP", "constant", m, None, epochs)
    if "No DP decreasing" in methods:
        sgld("No DP decreasing", "No DP", "decreasing", m, None, epochs)

    c = const.constants
    eps_alpha, alpha = _run_rdp_pair(const, n)
    dataset_beta = logistic_regression_constants(X, lam, num_classes=C).beta
    diag = table4_diagnostics(c.beta, c.lam, eps_alpha, alpha, n, C * p)
    diag.update(epsilon_rdp=eps_alpha, beta_dataset=dataset_beta,
                beta_over_lam_dataset=dataset_beta / c.lam, lipschitz=c.lipschitz,
                radius=c.radius, alpha=alpha, n=n, d=C * p, sigma=const.sigma,
                step_size=lr, steps=const.steps, accountant=const.accountant,
                released_iterates_epsilon=released_iterates_epsilon(
                    delta, c.lipschitz, const.sigma, n, m, const.step_sizes,
                    orders=RELEASED_ORDERS),
                theorem_3_1_epsilon=sgld_epsilon(delta, c.lipschitz, const.sigma, c.lam, n,
                                                 const.step_sizes)[0],
                theorem_3_1_sigma=sgld_calibrate_sigma(target_epsilon, delta, c.lipschitz,
                                                       c.lam, n, const.step_sizes))
    return {"rows": rows, "diagnostics": diag, "seed": s0}


@constrained(**same_as(compare_methods, "seeds", "epochs", "batch_size", "lam",
                       "target_epsilon", "delta", "max_grad_norm", "methods", "seed"),
             dim=COUNT, data_seed=Integer(min=0))
def compare_on_digits(*, seeds: int = 5, epochs: float = 30, batch_size: int = 200,
                      lam: float = 0.03, dim: int = 16, target_epsilon: float = 1.0,
                      delta: float = 1e-5, max_grad_norm: float = 1.0, data_seed: int = 0,
                      methods: tuple = DEFAULT_METHODS, seed: int | None = None,
                      device: object = None) -> dict:
    """The book's version of Ryffel et al.'s Tables 1–2: private logistic regression on public
    features.

    Data: :func:`dplib.features.digits_features` (features fitted on a public split). All
    methods take the same step size η = 1/(2β) (β per example, β = ½ + λ for unit features),
    the same epochs and batch size m (DP-SGD: Poisson rate m/n), no momentum — the paper's
    protocol (§5.2). Rows (test accuracy over ``seeds`` runs):

    * DP-SGLD, constant and decreasing step, m records per step, accounted as released
      iterates (valid for every batch size; replace-one);
    * optionally (``methods`` from :data:`METHODS`) the same at the σ Theorem 3.1 claims
      suffices — unproved for m < n, flagged ``proved=False``;
    * DP-GLD: full batches for the same number of steps (Theorem 3.1 with m = n is Chourasia
      et al.'s theorem, which the one-step check cannot fault);
    * DP-SGD (:func:`dplib.training.train`, logistic-regression model, clipping C =
      ``max_grad_norm``) at ε under add/remove (the library's and Opacus' convention) and under
      replace-one (:func:`calibrate_noise_replace_one`);
    * no DP: the same projected SGD schedule without noise (σ = 0).

    ``data_seed`` picks the public features; ``seed`` the runs' noise and batches (None: fresh
    OS entropy, recorded; an integer reproduces the table — for experiments, never for a
    release). Returns ``{"rows", "diagnostics", "seed", "config"}`` (see
    :func:`compare_methods`).
    """
    from ..features import digits_features

    out = compare_methods(digits_features(seed=data_seed, dim=dim), seeds=seeds, epochs=epochs,
                          batch_size=batch_size, lam=lam, target_epsilon=target_epsilon,
                          delta=delta, max_grad_norm=max_grad_norm, methods=methods,
                          seed=seed, device=device)
    out["config"] = dict(seeds=seeds, epochs=epochs, batch_size=batch_size, lam=lam, dim=dim,
                         target_epsilon=target_epsilon, delta=delta,
                         max_grad_norm=max_grad_norm, data_seed=data_seed, seed=out["seed"],
                         step_size=out["diagnostics"]["step_size"])
    return out


@constrained(sizes=_SIZES, batch_fraction=SAMPLE_RATE, data_seed=Integer(min=0),
             **same_as(compare_methods, "seeds", "epochs", "lam", "target_epsilon", "delta",
                       "methods", "seed"))
def scaling_study(sizes: tuple = (500, 2000, 8000), *, seeds: int = 2, epochs: float = 30,
                  batch_fraction: float = 0.2, lam: float = 0.03, target_epsilon: float = 1.0,
                  delta: float = 1e-5, data_seed: int = 0,
                  methods: tuple = ("DP-SGLD decreasing", "DP-SGD replace-one",
                                    "No DP decreasing"),
                  seed: int | None = None, device: object = None) -> dict:
    """Accuracy against the training-set size n on synthetic unit-norm features
    (:func:`dplib.features.synthetic_features`, the same task for every n), for ``methods``
    (names from :data:`METHODS`; by default DP-SGLD with the decreasing step accounted as
    released iterates, DP-SGD replace-one and no DP), with the protocol of
    :func:`compare_methods` and batches of ``batch_fraction``·n. ``seed`` as in
    :func:`compare_methods` (None: fresh OS entropy, the same for every n). Returns {"sizes",
    "seed", method name: (len(sizes), seeds) array}.
    """
    from ..features import synthetic_features

    seed = release_seed(seed, bits=62)
    acc = {k: [] for k in methods}
    for n in sizes:
        data = synthetic_features(n, n_test=2000, seed=data_seed)
        out = compare_methods(data, seeds=seeds, epochs=epochs,
                              batch_size=max(1, round(batch_fraction * n)), lam=lam,
                              target_epsilon=target_epsilon, delta=delta, methods=methods,
                              seed=seed, device=device)
        for row in out["rows"]:
            acc[row["key"]].append(np.asarray(row["accuracy"]))
    return {"sizes": np.asarray(sizes), "seed": seed,
            **{k: np.array(v) for k, v in acc.items()}}


@unconstrained("formats the rows compare_methods returns (plain text, no privacy input)")
def format_comparison(rows: list[dict]) -> str:
    """The rows of :func:`compare_methods` as a plain-text table: method, step schedule,
    adjacency, accountant, ε, σ, steps and test accuracy in % (mean ± std over seeds).

    An ε resting on Theorem 3.1 with m < n (``proved=False``) is marked with * and a footnote.
    Built by :func:`dplib.tables.format_table`.
    """
    cells = [dict(method=r["method"], step=r["schedule"], adjacency=r["adjacency"],
                  accountant=r.get("accountant", ""),
                  eps="-" if math.isinf(r["epsilon"]) else f"{r['epsilon']:.2f}",
                  mark=" " if r.get("proved", True) else "*", sigma=r["sigma"],
                  steps=r["steps"], accuracy=100 * np.asarray(r["accuracy"])) for r in rows]
    footer = () if all(r.get("proved", True) for r in rows) else (
        "* as Theorem 3.1 claims (unproved for batches m < n: one_step_delta_lower_bound "
        "refutes it for some parameters)",)
    columns = ["method", "step", "adjacency", "accountant", "eps", "mark", "sigma", "steps",
               "accuracy"]
    return format_table(
        cells, columns, headers={"mark": "", "accuracy": "accuracy (%)"},
        formats={"sigma": ".4g", "accuracy": lambda a: f"{a.mean():6.1f} ± {a.std():4.1f}"},
        align=dict(method="<", step="<", adjacency="<", accountant="<", eps=">", mark="<",
                   sigma=">", steps=">", accuracy=">"),
        widths=dict(method=21, step=10, adjacency=11, accountant=17, eps=6, mark=1, sigma=8,
                    steps=6, accuracy=13),
        sep=[" ", " ", " ", " ", "", " ", " ", "  "], footer=footer)
