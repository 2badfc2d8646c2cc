"""scikit-learn's bundled handwritten digits, read from their file without importing scikit-learn.

Shared by :func:`dplib.datasets.load_digits`, :func:`dplib.user_data.digit_images` and
:func:`dplib.experiments.finetune.digits_transfer`: importing scikit-learn costs a chapter about a
second of CPU at start (it loads pandas, rich and ``scipy.stats``), reading the file 15 ms.
"""
from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["sklearn_digits"]


def sklearn_digits() -> tuple[np.ndarray, np.ndarray]:
    """(pixels, labels) of scikit-learn's bundled digits (Alpaydin & Kaynak 1998, the UCI optical
    digits: 1,797 8×8 images, pixels 0–16), read from its file ``sklearn/datasets/data/digits.csv.gz``
    as ``sklearn.datasets.load_digits`` reads it (the same float64 ``data`` [1797, 64] and int
    ``target``, in the file's order), but without importing scikit-learn (located by
    ``importlib.util.find_spec``, which runs none of its code)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the digits need scikit-learn's bundled data (pip install scikit-learn)")
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :-1], data[:, -1].astype(int)
