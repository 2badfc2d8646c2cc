"""The declared parameters shared by the gradient-encoding modules (:mod:`dplib._constraints`).

One statement per kind of parameter of :mod:`dplib.encoding`: the noise, the code book (as a
:class:`~dplib.encoding.codebook.Codebook` or as an array of code vectors), integer Rényi orders
(Lemma 4 of Nasr, Shokri & Houmansadr 2020 is stated for integer α), the accountant's method,
torch gradients and generators. Where the meaning is that of :mod:`dplib.accounting` (q, δ, ε, a
count, a conversion) the declarations of :mod:`dplib.accounting._params` are used. The check,
its error message and the bad-input sweep's values all come from here.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from .._constraints import Custom, InstanceOf, Integer, Interval, Options
from .._validate import shown
from .codebook import Codebook
from .noise import NoiseDistribution

__all__ = ["NOISE", "CODEBOOK", "CODEBOOK_ARRAY", "CODE_VECTOR", "ORDERS_K", "ORDERS_INT",
           "ORDERS_INT_OR_DEFAULT", "METHODS", "METHOD", "GRADS_2D", "STEP_SIZE",
           "OPTIONAL_COUNT", "OPTIONAL_POSITIVE", "OPTIONAL_CALLABLE", "DF", "codes_of",
           "orders_int"]

NAN, INF = math.nan, math.inf

#: The noise of Algorithm 1: a symmetric location–scale family (:mod:`dplib.encoding.noise`).
NOISE = InstanceOf(NoiseDistribution, "a dplib.encoding NoiseDistribution (GaussianNoise, "
                   "LaplaceNoise, StudentTNoise, ScipyNoise)", bad=(None, 1.0, "gaussian"))
#: A code book built by :func:`~dplib.encoding.codebook.build_codebook` (the encoder needs the
#: sorted torch vectors).
CODEBOOK = InstanceOf(Codebook, "a Codebook (build one with build_codebook)",
                      bad=(None, np.eye(4), "abc"))
#: Student-t degrees of freedom ν > 0.
DF = Interval(0.0, INF)
#: A learning rate or a public divisor: a real > 0.
STEP_SIZE = Interval(0.0, INF)
#: The ways of computing the code book's Rényi moments (:func:`~dplib.encoding.code_log_moments`).
METHODS = ("auto", "exact", "table", "closed_form")
METHOD = Options(*METHODS)


def codes_of(codebook: object, name: str = "codebook") -> np.ndarray:
    """|ψ| as a float64 array of shape (n_codes, d) from a Codebook, tensor or array (a single
    vector is one row); ``ValueError`` naming ``name`` otherwise."""
    vec = getattr(codebook, "vectors", codebook)
    if hasattr(vec, "detach"):
        vec = vec.detach().to("cpu").double().numpy()
    try:
        arr = np.asarray(vec, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers, got "
                         f"{shown(codebook)}") from None
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"{name} must be a vector or an (n_codes, d) array, got shape "
                         f"{arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite numbers, got inf or nan")
    return np.abs(arr)


def _one_vector(name: str, value: object) -> np.ndarray:
    codes = codes_of(value, name)
    if codes.shape[0] != 1:
        raise ValueError(f"{name} must be one vector, got {codes.shape[0]} "
                         "(use codebook_rdp for a code book)")
    return codes


_BAD_CODES = [None, "abc", [], [[NAN, 1.0]], [[1.0, INF]], np.ones((2, 2, 2))]
#: Code vectors for the accountant: a Codebook, or an (n_codes, d) array or tensor of finite
#: reals (only |ψ| matters); the function receives |ψ| as a float64 (n_codes, d) array.
CODEBOOK_ARRAY = Custom(lambda name, value: codes_of(value, name),
                        "a Codebook or an (n_codes, d) array of finite reals", _BAD_CODES,
                        family="array")
#: One code vector ψ (a 1-D array of finite reals), as a (1, d) array of |ψ|.
CODE_VECTOR = Custom(_one_vector, "one vector of finite reals", _BAD_CODES + [np.ones((2, 3))],
                     family="array")


def orders_int(orders: object, *, low: int = 0) -> np.ndarray:
    """``orders`` as a 1-D float array of integers ≥ ``low``, else ``ValueError`` (Lemma 4 of
    Nasr, Shokri & Houmansadr 2020 is stated for integer orders)."""
    try:
        arr = np.atleast_1d(np.asarray(orders, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"orders must be a non-empty 1-D array of integers >= {low}, "
                         f"got {shown(orders)}") from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError(f"orders must be a non-empty 1-D array of integers >= {low}, "
                         f"got {shown(orders)}")
    bad = (arr != np.round(arr)) | (arr < low)
    if bad.any():
        raise ValueError(f"orders must be integers >= {low} (Lemma 4 expands the binomial "
                         f"(1 − q + q·ratio)^α, which needs integer α), "
                         f"got {shown(arr[bad][0])}")
    return arr


_BAD_ORDERS = [[0.5], [2.5], [NAN], [INF], [], "abc", None, [[2, 3]]]
#: Integer orders k ≥ 0 of the per-coordinate moments I_k (a scalar or 1-D array).
ORDERS_K = Custom(lambda name, value: orders_int(value, low=0),
                  "a non-empty 1-D array of integers >= 0", _BAD_ORDERS + [[-1]])
#: Integer Rényi orders α ≥ 2 of Lemma 4 (a scalar or 1-D array).
ORDERS_INT = Custom(lambda name, value: orders_int(value, low=2),
                    "a non-empty 1-D array of integers >= 2", _BAD_ORDERS + [[1], [1.0], [-1]])
#: As :data:`ORDERS_INT`, or None for ``INTEGER_ORDERS`` (2…64).
ORDERS_INT_OR_DEFAULT = Custom(
    lambda name, value: None if value is None else orders_int(value, low=2),
    "None or a non-empty 1-D array of integers >= 2", [o for o in _BAD_ORDERS if o is not None]
    + [[1], [-1]])


def _grads_2d(name: str, value: object) -> object:
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor) or value.ndim != 2:
        raise ValueError(f"{name} must be a [B, d] torch tensor, got {shown(value)}")
    return value


#: Per-example gradients as a [B, d] torch tensor.
GRADS_2D = Custom(_grads_2d, "a [B, d] torch tensor", [None, "abc", [[1.0, 2.0]], 1.0])


def _optional(constraint, name: str, value: object) -> object:
    return None if value is None else constraint.check(name, value)


_COUNT = Integer(min=1)
#: None (the function's default) or an integer ≥ 1 (a chunk size, an evaluation period, steps).
OPTIONAL_COUNT = Custom(lambda name, value: _optional(_COUNT, name, value),
                        "None or an integer >= 1", [0, -3, 2.5, NAN, "3", True])
#: None (the function's default) or a real > 0 (epochs, a public divisor).
OPTIONAL_POSITIVE = Custom(lambda name, value: _optional(STEP_SIZE, name, value),
                           "None or a real > 0", [0.0, -1.0, NAN, INF, "1.0", True])


def _optional_callable(name: str, value: object) -> object:
    if value is not None and not callable(value):
        raise ValueError(f"{name} must be None or a function, got {shown(value)}")
    return value


#: None (the default) or a function (a loss, a logger).
OPTIONAL_CALLABLE = Custom(_optional_callable, "None or a function", [1.0, "f", 3])
