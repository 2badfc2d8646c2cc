"""The book's figure style: one palette, one size, readable labels, in every chapter."""
from __future__ import annotations

import io

import matplotlib as mpl
from matplotlib.figure import Figure

__all__ = ["COLORS", "use_book_style", "compact_png"]

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


def compact_png(fig: Figure, *, colors: int = 256) -> bytes:
    """``fig`` as a palette PNG of at most ``colors`` colours, about a third of matplotlib's size.

    For the website's precomputed widget frames: the book's figures are flat colours on white
    with anti-aliased edges, which 256 colours reproduce without visible change (octree
    quantisation, no dithering, so identical figures give identical bytes). Chapter 1's panel,
    for instance, is 10 KB this way, against 37 KB as matplotlib's RGBA PNG and 69 KB as SVG.
    The figure is not closed (the caller owns it).
    """
    if not isinstance(fig, Figure):
        raise ValueError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(colors, int) or isinstance(colors, bool) or not 2 <= colors <= 256:
        raise ValueError(f"colors must be an integer in [2, 256], got {colors!r}")
    from PIL import Image

    raw = io.BytesIO()
    fig.savefig(raw, format="png")
    raw.seek(0)
    with Image.open(raw) as im:   # on white, as the page shows it (a transparent figure too)
        rgba = im.convert("RGBA")
    rgb = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba).convert("RGB")
    pal = rgb.quantize(colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    # Octree averaging turns the background into 254-grey; colours within 3 of white are white.
    entries = pal.getpalette()
    pal.putpalette([255 if min(entries[i:i + 3]) >= 252 else v
                    for i in range(0, len(entries), 3) for v in entries[i:i + 3]])
    out = io.BytesIO()
    pal.save(out, format="PNG", optimize=True)
    return out.getvalue()
