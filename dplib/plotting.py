"""The book's figure style: one palette, one size, readable labels, in every chapter."""
from __future__ import annotations

import io
import struct
import warnings
import zlib
from collections import OrderedDict

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.text import Text

from ._common_params import FIGURE, int_range
from ._constraints import constrained
from ._tight_png import tight_png

__all__ = ["COLORS", "use_book_style", "compact_png", "figure_png", "min_font_pt",
           "PHONE_WIDTH_IN", "MIN_FONT_PT", "FONT_KEY"]

#: The widest figure (inches) whose smallest text (MIN_FONT_PT) is still >= 9 px tall when the
#: page scales it down to a 390 px phone's content column (about 340 px): 10 pt / 72 * 340 / 5.
PHONE_WIDTH_IN = 5.0
#: The smallest font size (points) a figure of the book uses.
MIN_FONT_PT = 10.0
#: PNG text chunk holding the figure's smallest font size in pixels of the PNG (site tests read it).
FONT_KEY = "dpbook:min-font-px"

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
        # Phone-sized: a 5-inch figure keeps 10-pt text >= 9 px on a 390 px screen; wider
        # figures stack their panels vertically (see PHONE_WIDTH_IN).
        "figure.figsize": (PHONE_WIDTH_IN, 3.4),
        "figure.dpi": 100,
        "savefig.dpi": 110,
        "savefig.bbox": "tight",
        "font.size": 11,
        "axes.titlesize": 11,
        "axes.labelsize": 11,
        "xtick.labelsize": 10,
        "ytick.labelsize": 10,
        "legend.fontsize": 10,
        "legend.title_fontsize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": mpl.cycler(color=[COLORS[k] for k in
                                             ("private", "baseline", "alt", "warning", "accent",
                                              "truth", "neutral")]),
        "lines.linewidth": 2.0,
    })
    _share_mathtext_parses()
    _register_png_formatter()


#: Parsed math texts shared by every renderer (see :func:`_share_mathtext_parses`), oldest first.
_MATH_PARSES: OrderedDict = OrderedDict()
_MATH_PARSES_SIZE = 4096


def _share_mathtext_parses() -> None:
    """Let every Agg renderer reuse the math texts (``$…$``, log-axis tick labels) parsed before.

    matplotlib caches a parse per renderer (an ``lru_cache(50)`` on the method, keyed by the
    renderer's own parser), and saving one figure makes three renderers (the tight layout, the
    tight bounding box, the PNG itself), so every ``$10^{-3}$`` of every figure was parsed three
    times or more (a sixth of a book figure's drawing time). The parse is a function of its key
    (the string, dpi, font properties, antialiasing, hinting; the ``mathtext.*`` settings are
    added to the key here), and renderers only read it, so one process-wide cache returns the
    very same object and the images are byte-identical. Left as it is when matplotlib's private
    method is not the expected one.
    """
    from matplotlib import mathtext
    cls = mathtext.MathTextParser
    parse = getattr(cls, "_parse_cached", None)
    inner = getattr(parse, "__wrapped__", None)
    if getattr(parse, "_dpbook_shared", False) or inner is None or not callable(inner):
        return

    settings = [k for k in mpl.rcParams if k.startswith("mathtext.")]

    def _parse_cached(self, s, dpi, prop, antialiased, load_glyph_flags):
        key = (getattr(self, "_output_type", None), s, dpi, prop, antialiased, load_glyph_flags,
               tuple(str(mpl.rcParams[k]) for k in settings))
        out = _MATH_PARSES.get(key)
        if out is None:
            out = _MATH_PARSES[key] = inner(self, s, dpi, prop, antialiased, load_glyph_flags)
            while len(_MATH_PARSES) > _MATH_PARSES_SIZE:
                _MATH_PARSES.popitem(last=False)
        else:
            _MATH_PARSES.move_to_end(key)
        return out

    _parse_cached._dpbook_shared = True
    _parse_cached.__wrapped__ = inner
    cls._parse_cached = _parse_cached


def _register_png_formatter() -> None:
    """In a Jupyter kernel, show every matplotlib figure through :func:`figure_png`."""
    try:
        from IPython import get_ipython
    except ImportError:     # pragma: no cover - IPython is a dependency of the book's kernel
        return
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    try:    # matplotlib-inline registers its own formatter when imported; ours must come after
        import matplotlib_inline.backend_inline  # noqa: F401
    except ImportError:     # pragma: no cover
        pass
    shell.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


@constrained(fig=FIGURE)
def min_font_pt(fig: Figure) -> float:
    """The smallest font size (points) of the visible, non-empty text of a drawn ``fig``."""
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and _shown(t)]
    return float(min(sizes)) if sizes else float("inf")


def _shown(t: Text) -> bool:
    """False for the text of an invisible artist's subtree (e.g. the hidden label2 of ticks)."""
    parent = getattr(t, "axes", None)
    return parent is None or parent.get_visible()


def _png_text(png: bytes, key: str, value: str) -> bytes:
    """``png`` with a tEXt chunk ``key``=``value`` right after IHDR (no re-encoding), where
    readers find it before the image data."""
    body = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = (struct.pack(">I", len(body)) + b"tEXt" + body
             + struct.pack(">I", zlib.crc32(b"tEXt" + body) & 0xFFFFFFFF))
    at = 8 + 25     # the signature, then IHDR (length, type, 13 bytes of data, CRC)
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("png must be PNG bytes starting with IHDR")
    return png[:at] + chunk + png[at:]


@constrained(fig=FIGURE)
def figure_png(fig: Figure) -> bytes:
    """``fig`` as the book shows it: a PNG that records its smallest text in pixels.

    The PNG (book style: ``savefig.dpi``, tight bounding box) carries a text chunk
    :data:`FONT_KEY` with the smallest font size of its visible text, in pixels of the image
    (points x dpi / 72). The site test (tests/site/test_figures.py) divides it by the image's
    native width and multiplies by its width on a 390 px page: the text height a phone reader
    sees. ``use_book_style`` makes this the kernel's PNG formatter for every figure, so a chapter
    neither calls ``plt.show()`` (a pyplot figure is shown at the end of its cell) nor
    ``fig.tight_layout()`` (done here unless the figure has a layout engine already).
    """
    if fig.get_layout_engine() is None:     # so that no chapter calls fig.tight_layout()
        with warnings.catch_warnings():     # best effort: savefig's tight bounding box follows,
            warnings.filterwarnings(        # and a reader's page shows no warning
                "ignore", "This figure includes Axes that are not compatible", UserWarning)
            fig.tight_layout()
    png = tight_png(fig)                # draws the figure: every tick label exists now
    dpi = mpl.rcParams["savefig.dpi"]
    dpi = fig.dpi if dpi == "figure" else float(dpi)
    return _png_text(png, FONT_KEY, f"{min_font_pt(fig) * dpi / 72:.2f}")


@constrained(fig=FIGURE, colors=int_range(2, 256))
def compact_png(fig: Figure, *, colors: int = 256) -> bytes:
    """``fig`` as a palette PNG of at most ``colors`` colours, about a third of matplotlib's size.

    For the website's precomputed widget frames: the book's figures are flat colours on white
    with anti-aliased edges, which 256 colours reproduce without visible change (octree
    quantisation, no dithering, so identical figures give identical bytes). Chapter 1's panel,
    for instance, is 10 KB this way, against 37 KB as matplotlib's RGBA PNG and 69 KB as SVG.
    The figure is not closed (the caller owns it).
    """
    from PIL import Image

    raw = io.BytesIO(tight_png(fig))
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
    dpi = mpl.rcParams["savefig.dpi"]
    dpi = fig.dpi if dpi == "figure" else float(dpi)
    return _png_text(out.getvalue(), FONT_KEY, f"{min_font_pt(fig) * dpi / 72:.2f}")
