"""dplib.plotting shares matplotlib's math-text parses between renderers: same bytes, fewer parses."""
import functools

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import mathtext  # noqa: E402

from dplib import plotting  # noqa: E402


def _log_figure_png() -> bytes:
    fig, ax = plt.subplots()
    x = np.logspace(-3, 2, 40)
    ax.loglog(x, np.sqrt(x), label=r"$\sigma = \sqrt{x}$")
    ax.set_ylabel(r"$\varepsilon$")
    ax.legend()
    try:
        return plotting.figure_png(fig)
    finally:
        plt.close(fig)


def test_shared_parses_give_the_same_png_as_matplotlib():
    plotting.use_book_style()
    cls = mathtext.MathTextParser
    shared = cls._parse_cached
    assert getattr(shared, "_dpbook_shared", False)
    plotting.use_book_style()                     # idempotent: not wrapped twice
    assert cls._parse_cached is shared
    plotting._MATH_PARSES.clear()
    ours = _log_figure_png()
    assert any(r"\sigma" in key[1] for key in plotting._MATH_PARSES)   # parsed once, kept
    n = len(plotting._MATH_PARSES)
    assert _log_figure_png() == ours
    assert len(plotting._MATH_PARSES) == n        # the second figure parsed nothing new
    cls._parse_cached = functools.lru_cache(50)(shared.__wrapped__)   # matplotlib's own
    try:
        theirs = _log_figure_png()
    finally:
        cls._parse_cached = shared
    assert theirs == ours


def test_a_mathtext_setting_is_part_of_the_key():
    plotting.use_book_style()
    plotting._MATH_PARSES.clear()
    _log_figure_png()
    n = len(plotting._MATH_PARSES)
    with matplotlib.rc_context({"mathtext.fontset": "cm"}):
        _log_figure_png()
    assert len(plotting._MATH_PARSES) > n         # parsed again under the new setting
