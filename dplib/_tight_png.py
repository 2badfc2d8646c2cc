"""A figure as PNG bytes with ``savefig``'s tight bounding box, drawn once instead of twice.

``fig.savefig(..., bbox_inches="tight")`` draws the whole figure once with rendering switched off
(to place everything), measures the tight bounding box, then draws it again into the PNG. For a
figure whose layout is already done (no layout engine, or the placeholder that
``fig.tight_layout()`` leaves), the first draw changes nothing that the measurement reads:
``Figure.get_tightbbox`` updates the ticks, applies the aspect and places titles and legends
itself. So the box is measured directly, at the save resolution, on a fresh Agg renderer, and
``savefig`` gets it as an explicit box (which skips the extra draw). A constrained layout (which
savefig's first draw runs before drawing anything) is run first, at the save resolution, as that
draw would. The PNG is byte-for-byte the one ``savefig`` writes (tests/unit/test_tight_png.py
compares them); other layout engines, non-tight ``savefig.bbox`` settings and a matplotlib
without the two private names used here (``cbook._setattr_cm``, ``Figure._layout_engine``, both
in 3.7 to 3.11) go through ``savefig`` unchanged.
"""
from __future__ import annotations

import io

import matplotlib as mpl
from matplotlib.figure import Figure

__all__ = ["tight_png"]


def _has_private_names(fig: Figure) -> bool:
    """Whether this matplotlib has the two private names :func:`tight_png` uses."""
    from matplotlib import cbook
    return hasattr(cbook, "_setattr_cm") and hasattr(fig, "_layout_engine")


def tight_png(fig: Figure) -> bytes:
    """``fig.savefig(buf, format="png")`` under the current rcParams, as bytes (see the module)."""
    from matplotlib import cbook
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.layout_engine import ConstrainedLayoutEngine, PlaceHolderLayoutEngine

    buf = io.BytesIO()
    if not _has_private_names(fig):
        fig.savefig(buf, format="png")     # a matplotlib without the private names used below
        return buf.getvalue()
    engine = fig.get_layout_engine()
    dpi = mpl.rcParams["savefig.dpi"]
    pad = mpl.rcParams["savefig.pad_inches"]
    if (mpl.rcParams["savefig.bbox"] != "tight" or dpi == "figure" or pad in (None, "layout")
            or type(engine) not in (type(None), PlaceHolderLayoutEngine,
                                    ConstrainedLayoutEngine)):
        fig.savefig(buf, format="png")
        return buf.getvalue()
    with cbook._setattr_cm(fig, dpi=float(dpi)):         # as savefig measures it
        if isinstance(engine, ConstrainedLayoutEngine):
            engine.execute(fig)          # what savefig's first draw starts with
        width, height = fig.bbox.size
        bbox = fig.get_tightbbox(RendererAgg(width, height, fig.dpi)).padded(pad)
    fig._layout_engine = None            # the placeholder would make savefig draw twice
    try:
        fig.savefig(buf, format="png", bbox_inches=bbox)
    finally:
        fig._layout_engine = engine
    return buf.getvalue()
