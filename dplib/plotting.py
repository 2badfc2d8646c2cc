"""The book's figure style: one palette, one size, readable labels, in every chapter."""
from __future__ import annotations

import matplotlib as mpl

__all__ = ["COLORS", "use_book_style"]

#: Okabe–Ito colour-blind-safe palette, by role, so a colour means the same thing in every chapter.
COLORS = {
    "truth": "#000000",
    "private": "#0072B2",
    "baseline": "#E69F00",
    "alt": "#009E73",
    "warning": "#D55E00",
    "accent": "#CC79A7",
    "neutral": "#999999",
}


def use_book_style() -> None:
    """Apply the book's matplotlib defaults (called by ``dplib.setup``)."""
    mpl.rcParams.update({
        "figure.figsize": (7.5, 4.0),
        "figure.dpi": 100,
        "savefig.dpi": 110,
        "savefig.bbox": "tight",
        "font.size": 11,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "legend.fontsize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": mpl.cycler(color=[COLORS[k] for k in
                                             ("private", "baseline", "alt", "warning", "accent",
                                              "truth", "neutral")]),
        "lines.linewidth": 2.0,
    })
