"""One way to make an interactive figure, the same in every chapter.

A chapter declares its controls and a function that draws a matplotlib figure for given values::

    panel = interactive_figure(plot, epsilon=log_slider(0.05, 10, 1.0, label="ε"),
                               n=int_slider(100, 10_000, 1_000, label="n"))

What a reader sees depends on where they read:

* **Jupyter / Colab (a kernel)** – ipywidgets sliders above the figure; moving one redraws it in
  place (``display_id`` updates, which Jupyter, JupyterLab, VS Code and Colab all support).
* **the website (no kernel, no server, no network)** – when the book is built with
  ``DPBOOK_WIDGET_FRAMES=1`` in the environment (the book's Sphinx extension sets it), the panel
  is drawn at build time over a grid of control values and the cell's output is a small
  self-contained HTML control (native ``<input type=range>`` and ``<select>``, labelled, keyboard
  operable, with a live readout) whose inline script swaps between those precomputed frames.
  Without that variable the output is the figure at the defaults with a note to run the notebook.

Why precomputed frames and not Python in the browser (Pyodide/JupyterLite): the chapters' panels
call scipy, torch-trained models and cached experiment results, so an offline in-browser kernel
would ship well over a hundred megabytes of wheels (torch has no Pyodide build at all) and take
many seconds to start on a phone; frames cost a few megabytes for the whole book, appear at once,
and need nothing but an ``<img>``. The price is that only grid values can be shown. The grid is
**one control at a time around the defaults** (each control moves over its own values while the
others stay at their defaults: 1 + Σ(kᵢ − 1) frames) unless **the full product** of the controls'
values is small enough to afford, then every combination is drawn. Moving one control of a
one-at-a-time panel returns the others to their defaults, so the controls always show exactly the
values of the figure on screen. Ranges get evenly spaced values on their own scale (linear or
log₁₀) with the default among them; choices get every option. How many values a range gets is set
by a budget of 12 CPU seconds per panel, from the cost of the default figure, which is drawn
first: between 3 and 9 values (plus the default where it falls between them). Quick mode
(``DPBOOK_QUICK=1``) takes the coarsest grid, min, default and max, with no timing at all.
Frames are palette PNGs (:func:`dplib.plotting.compact_png`), a third of matplotlib's PNGs and
several times smaller than SVG for these figures; identical frames are stored once. The frames are cell outputs, so the book's execution
cache keeps them and an unchanged chapter is not drawn again.

Readouts are human in both places: :func:`format_value` writes n = 10,000 and δ = 1e-5, and is
used by the ipywidgets readout, the captions and the static control alike.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
import os
import time
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Callable

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["Control", "slider", "int_slider", "log_slider", "dropdown", "FigurePanel",
           "interactive_figure", "format_value", "FrameGrid", "frame_grid", "plan_grid",
           "frames_enabled", "FRAMES_ENV"]

#: HTML class of the caption under every widget's figure (the site checks look for it).
CAPTION_CLASS = "dpbook-widget-caption"
CONTROLS_CLASS = "dpbook-widget-controls"
#: HTML class of the website's frame-swapping widget (one element per panel).
LIVE_CLASS = "dpbook-live-figure"
#: Set to 1 (the book's build does) to precompute frames and emit the static control.
FRAMES_ENV = "DPBOOK_WIDGET_FRAMES"

#: Values per range control (before the default is added), and the CPU seconds a panel's frames
#: may take in a full build.
MIN_POINTS, MAX_POINTS = 3, 9
FRAME_BUDGET_S = 12.0
#: The most frames a full product may have (beyond it, one control at a time).
MAX_PRODUCT = 36
#: Quick mode: MIN_POINTS per range, every combination when there are at most this many.
QUICK_PRODUCT = 12


@dataclass(frozen=True)
class Control:
    """A declared control: its kind, range and default value."""
    kind: str                       # "float", "int", "log" or "choice"
    value: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    options: tuple = field(default_factory=tuple)
    label: str | None = None
    integer: bool = False           # a log slider whose values are rounded to integers (n, k)

    def check(self, name: str, value: Any) -> Any:
        """Refuse a value this control could not produce."""
        if self.kind == "choice":
            if value not in self.options:
                raise ValueError(f"{name} must be one of {list(self.options)}, got {value!r}")
            return value
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            raise ValueError(f"{name} must be a number in [{self.min}, {self.max}], got {value!r}")
        if not self.min <= value <= self.max:
            raise ValueError(f"{name} must be in [{self.min}, {self.max}], got {value!r}")
        return self.cast(value)

    def cast(self, value: Any) -> Any:
        """The value as the plotting function receives it (integers for int controls)."""
        return int(round(value)) if self.kind == "int" or self.integer else value


def _finite(name: str, value: Any, *, integer: bool = False) -> float:
    """A finite real (an int where ``integer``) for a slider end, value or step."""
    ok = isinstance(value, Integral) if integer else isinstance(value, Real)
    if not ok or isinstance(value, bool) or not math.isfinite(value):
        kind = "an integer" if integer else "a finite number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    return value


def _range(kind: str, lo: float, hi: float, value: float, label: str | None, step=None,
           integer: bool = False) -> Control:
    whole = kind == "int"
    for name, v in (("min", lo), ("max", hi), ("value", value)):
        _finite(name, v, integer=whole)
    if step is not None and (_finite("step", step, integer=whole) <= 0):
        raise ValueError(f"step must be > 0, got {step!r}")
    if not isinstance(integer, bool):
        raise ValueError(f"integer must be True or False, got {integer!r}")
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label must be a string or None, got {label!r}")
    if not lo < hi or not lo <= value <= hi:
        raise ValueError(f"slider needs min < max and min <= value <= max, got min={lo!r}, "
                         f"max={hi!r}, value={value!r}")
    if kind == "log" and lo <= 0:
        raise ValueError(f"a log slider needs min > 0, got min={lo!r}")
    return Control(kind=kind, value=value, min=lo, max=hi, step=step, label=label,
                   integer=integer)


def slider(min: float, max: float, value: float, *, step: float | None = None,
           label: str | None = None) -> Control:
    """A float slider on a linear scale (``step`` defaults to (max − min)/100)."""
    if step is None and all(isinstance(v, Real) and not isinstance(v, bool)
                            and math.isfinite(v) for v in (min, max)):
        step = (max - min) / 100 if max > min else None
    return _range("float", min, max, value, label, step)


def int_slider(min: int, max: int, value: int, *, step: int = 1, label: str | None = None) -> Control:
    """An integer slider."""
    _finite("step", step, integer=True)
    return _range("int", min, max, value, label, step)


def log_slider(min: float, max: float, value: float, *, integer: bool = False,
               label: str | None = None) -> Control:
    """A slider on a log₁₀ scale (for ε, δ, n, noise scales spanning decades).

    ``integer=True`` rounds the value for counts such as n.
    """
    return _range("log", min, max, value, label, integer=integer)


def dropdown(options: list, value: Any, *, label: str | None = None) -> Control:
    """A choice among ``options`` (a non-empty list or tuple)."""
    if not isinstance(options, (list, tuple)) or len(options) == 0:
        raise ValueError(f"options must be a non-empty list or tuple, got {options!r}")
    if value not in options:
        raise ValueError(f"dropdown value must be one of {list(options)}, got {value!r}")
    return Control(kind="choice", value=value, options=tuple(options), label=label)


# --- readouts ------------------------------------------------------------------------------------

def _sci(value: float) -> str:
    """Compact scientific notation: 1e-5, 2.5e-7, 3e9 (three significant digits at most)."""
    mantissa, exponent = f"{value:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def format_value(value: Any) -> str:
    """A control value as a reader writes it: ``10,000``, ``0.5``, ``1.1``, ``1e-5``, ``3.2e-7``.

    Integers get thousands separators; floats three significant digits, in plain notation from
    0.001 up to 10⁹ (with separators from 1,000) and as compact scientific notation outside it;
    anything else (a dropdown option) its ``str``.
    """
    if isinstance(value, bool) or not isinstance(value, (Integral, Real)):
        return str(value)
    if isinstance(value, Integral):
        return f"{int(value):,}"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    rounded = float(f"{value:.3g}")
    if not 1e-3 <= abs(rounded) < 1e9:
        return _sci(value)
    if abs(rounded) >= 1000:
        return f"{rounded:,.0f}"
    return f"{rounded:.3g}"


# --- the grid of precomputed frames --------------------------------------------------------------

@dataclass(frozen=True)
class FrameGrid:
    """The values each control can take on the website, and which combinations are drawn.

    ``values[i]`` are control ``names[i]``'s values (as the plotting function receives them),
    ``defaults[i]`` the index of its default among them. With ``product`` every combination is
    drawn; otherwise one control at a time moves while the others stay at their defaults.
    """
    names: tuple[str, ...]
    values: tuple[tuple, ...]
    defaults: tuple[int, ...]
    product: bool

    def keys(self) -> list[tuple[int, ...]]:
        """The index tuples of the frames to draw, the defaults first."""
        if self.product:
            grids = np.meshgrid(*[np.arange(len(v)) for v in self.values], indexing="ij")
            combos = np.stack([g.ravel() for g in grids], axis=1)
            keys = [tuple(int(i) for i in row) for row in combos]
        else:
            keys = [tuple(self.defaults[:c]) + (j,) + tuple(self.defaults[c + 1:])
                    for c, vals in enumerate(self.values) for j in range(len(vals))]
        start = tuple(self.defaults)
        return [start] + list(dict.fromkeys(k for k in keys if k != start))

    def at(self, key: tuple[int, ...]) -> dict[str, Any]:
        """The keyword values of the frame ``key``."""
        return {n: self.values[i][j] for i, (n, j) in enumerate(zip(self.names, key))}


def _range_values(c: Control, points: int) -> list:
    """``points`` evenly spaced values of a range control on its scale, its default among them.

    The default replaces the nearest grid value when within a quarter of the spacing, and is
    inserted otherwise; log-scale values inside the range are rounded to two significant digits
    so that readouts stay short; every value is snapped to the control's step and kept in range.
    """
    log = c.kind == "log"
    to = (lambda v: np.log10(v)) if log else (lambda v: np.asarray(v, dtype=float))
    lo, hi = float(to(c.min)), float(to(c.max))
    pos = np.linspace(lo, hi, points)
    d = float(to(c.value))
    near = int(np.argmin(np.abs(pos - d)))
    if abs(pos[near] - d) <= 0.25 * (hi - lo) / (points - 1):
        pos[near] = d
    else:
        pos = np.sort(np.append(pos, d))
    vals = 10.0 ** pos if log else pos
    if log:
        inner = (vals > c.min) & (vals < c.max) & (pos != d)
        vals[inner] = [float(f"{v:.2g}") for v in vals[inner]]
    elif c.step:
        vals = c.min + c.step * np.round((vals - c.min) / c.step)
        vals = np.round(vals, 12)
    vals = np.clip(vals, c.min, c.max)
    vals[int(np.argmin(np.abs(pos - d)))] = c.value     # exactly the default, never a neighbour
    out = []
    for v in vals:
        cast = c.cast(float(v))
        cast = cast if isinstance(cast, int) else float(cast)
        if cast not in out:
            out.append(cast)
    return sorted(out)


def frame_grid(controls: dict[str, Control], points: int, *,
               max_product: int = MAX_PRODUCT) -> FrameGrid:
    """The website's grid: ``points`` values per range control, every option of a dropdown.

    All combinations are drawn when there are at most ``max_product`` of them; otherwise one
    control at a time (1 + Σ(kᵢ − 1) frames).
    """
    if not controls or not all(isinstance(c, Control) for c in controls.values()):
        raise ValueError(f"controls must be a non-empty dict of Control, got {controls!r}")
    if not isinstance(points, int) or isinstance(points, bool) or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    if not isinstance(max_product, int) or isinstance(max_product, bool) or max_product < 1:
        raise ValueError(f"max_product must be a positive integer, got {max_product!r}")
    values, defaults = [], []
    for c in controls.values():
        vals = list(c.options) if c.kind == "choice" else _range_values(c, points)
        values.append(tuple(vals))
        defaults.append(vals.index(c.cast(c.value)))
    product = math.prod(len(v) for v in values) <= max_product
    return FrameGrid(tuple(controls), tuple(values), tuple(defaults), product)


def plan_grid(controls: dict[str, Control], frames: int) -> FrameGrid:
    """The finest grid with at most ``frames`` frames (fewer points only as the budget demands).

    Each range control gets between :data:`MIN_POINTS` and :data:`MAX_POINTS` values (every
    control must move, so the lower end holds even over the budget); all combinations are drawn
    when affordable and at most :data:`MAX_PRODUCT`.
    """
    if not isinstance(frames, int) or isinstance(frames, bool) or frames < 1:
        raise ValueError(f"frames must be a positive integer, got {frames!r}")
    cap = min(frames, MAX_PRODUCT)
    for points in range(MAX_POINTS, MIN_POINTS, -1):
        grid = frame_grid(controls, points, max_product=cap)
        if len(grid.keys()) <= frames:
            return grid
    return frame_grid(controls, MIN_POINTS, max_product=cap)


def frames_enabled() -> bool:
    """True when the build asks for precomputed frames (``DPBOOK_WIDGET_FRAMES`` set, not 0)."""
    return os.environ.get(FRAMES_ENV, "").strip().lower() not in ("", "0", "false", "no")


# --- the website's control -----------------------------------------------------------------------

_STYLE = """<style>
.dpbook-live-figure .dpbook-live-controls{display:flex;flex-direction:column;gap:.25rem;
margin:.25rem 0 .5rem}
.dpbook-live-figure .dpbook-live-row{display:flex;flex-wrap:wrap;align-items:center;gap:.2rem .6rem}
.dpbook-live-figure .dpbook-live-row label{min-width:11rem}
.dpbook-live-figure input[type=range]{width:min(20rem,100%);accent-color:#0072B2}
.dpbook-live-figure output{font-variant-numeric:tabular-nums;min-width:5rem}
.dpbook-live-figure img{max-width:100%;height:auto}
@media (max-width:40rem){.dpbook-live-figure .dpbook-live-row label{min-width:0;flex:1 1 auto}
.dpbook-live-figure .dpbook-live-row output{text-align:right}
.dpbook-live-figure input[type=range]{order:2;width:100%}}
</style>"""

# Swaps the frames: reads the panel's JSON, listens to each control, keeps the readouts, the
# aria-valuetext, the image's alt text and the caption's values in step with the frame shown.
_SCRIPT = """<script>(function(){
var root=document.getElementById(%(id)s);
if(!root||root.getAttribute('data-ready'))return;root.setAttribute('data-ready','1');
var d=JSON.parse(root.querySelector('script.dpbook-live-data').textContent);
var img=root.querySelector('img'),shown=root.querySelector('.dpbook-live-values');
var ctl=[].slice.call(root.querySelectorAll('[data-dpbook-control]'));
var out=ctl.map(function(el){return root.querySelector('output[for="'+el.id+'"]');});
d.frames[0]=img.getAttribute('src');
function show(moved){
 if(!d.product)ctl.forEach(function(el,i){if(i!==moved)el.value=String(d.defaults[i]);});
 var at=ctl.map(function(el){return parseInt(el.value,10);});
 var f=d.index[at.join(',')];if(f===undefined)return;
 img.setAttribute('src',f===0?d.frames[0]:'data:image/png;base64,'+d.frames[f]);
 var txt=at.map(function(j,i){return d.labels[i]+' = '+d.readouts[i][j];}).join(', ');
 ctl.forEach(function(el,i){
  if(el.type==='range')el.setAttribute('aria-valuetext',d.readouts[i][at[i]]);
  if(out[i])out[i].textContent=d.readouts[i][at[i]];});
 img.setAttribute('alt',d.alt+txt);shown.textContent=txt;}
ctl.forEach(function(el,i){el.addEventListener(el.tagName==='SELECT'?'change':'input',
 function(){show(i);});});
})();</script>"""


def _control_html(uid: str, i: int, name: str, c: Control, grid: FrameGrid,
                  readouts: list[str]) -> str:
    cid, label = f"{uid}-{i}", html.escape(c.label or name)
    here = grid.defaults[i]
    if c.kind == "choice":
        opts = "".join(f'<option value="{j}"{" selected" if j == here else ""}>'
                       f"{html.escape(r)}</option>" for j, r in enumerate(readouts))
        return (f'<div class="dpbook-live-row"><label for="{cid}">{label}</label>'
                f'<select id="{cid}" data-dpbook-control="{i}">{opts}</select></div>')
    return (f'<div class="dpbook-live-row"><label for="{cid}">{label}</label>'
            f'<input type="range" id="{cid}" data-dpbook-control="{i}" min="0" '
            f'max="{len(readouts) - 1}" step="1" value="{here}" '
            f'aria-valuetext="{html.escape(readouts[here])}">'
            f'<output for="{cid}">{html.escape(readouts[here])}</output></div>')


def _frames_note(grid: FrameGrid, controls: dict[str, Control]) -> str:
    """What the site's control cannot do that the notebook can, in a sentence (or nothing)."""
    steps = any(c.kind != "choice" for c in controls.values())
    if len(grid.names) > 1 and not grid.product:
        between = " and for values between the steps" if steps else ""
        return ("On this page one control moves at a time (the others return to their "
                f"defaults); run the notebook in Colab or Jupyter to combine them{between}.")
    if steps:
        return ("On this page the sliders move in steps; run the notebook in Colab or Jupyter "
                "for values between them.")
    return ""


# --- the panel -----------------------------------------------------------------------------------

def _to_widget(name: str, c: Control):
    import ipywidgets as w
    common = dict(description=c.label or name, continuous_update=False, readout=False,
                  style={"description_width": "initial"}, layout=w.Layout(width="420px"))
    if c.kind == "choice":
        return w.Dropdown(options=list(c.options), value=c.value,
                          description=c.label or name, style={"description_width": "initial"})
    if c.kind == "int":
        return w.IntSlider(min=c.min, max=c.max, value=c.value, step=c.step, **common)
    if c.kind == "log":
        return w.FloatLogSlider(min=math.log10(c.min), max=math.log10(c.max), value=c.value,
                                base=10, step=(math.log10(c.max) - math.log10(c.min)) / 100,
                                **common)
    return w.FloatSlider(min=c.min, max=c.max, value=c.value, step=c.step, **common)


def _widget_bundle(box) -> dict:
    """The display bundle of a widget under ipywidgets 8 (``_repr_mimebundle_``) and 7.x."""
    if hasattr(box, "_repr_mimebundle_"):
        return dict(box._repr_mimebundle_())
    return {"application/vnd.jupyter.widget-view+json":
            {"version_major": 2, "version_minor": 0, "model_id": box.model_id}}


class FigurePanel:
    """A plotting function plus its controls; renders figures for any allowed values."""

    def __init__(self, plot: Callable[..., plt.Figure], controls: dict[str, Control],
                 caption: str | None = None):
        if not controls:
            raise ValueError("controls must declare at least one control, got none")
        self.plot, self.controls, self.caption = plot, dict(controls), caption
        self.values = {k: c.cast(c.value) for k, c in self.controls.items()}
        self.sliders: dict[str, Any] = {}
        self.readouts: dict[str, Any] = {}    # the sliders' readouts (ipywidgets Labels)
        self.grid: FrameGrid | None = None

    def figure(self, **values: Any) -> plt.Figure:
        """The figure for the defaults overridden by ``values`` (validated against the controls)."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"unknown control(s) {sorted(unknown)}; this panel has "
                             f"{sorted(self.controls)}")
        merged = {**self.values, **{k: self.controls[k].check(k, v) for k, v in values.items()}}
        fig = self.plot(**merged)
        if not isinstance(fig, plt.Figure):
            raise ValueError(f"plot must return a matplotlib Figure, got {type(fig).__name__}")
        return fig

    def png(self, **values: Any) -> bytes:
        """The figure as PNG bytes (the figure is closed afterwards, so nothing leaks)."""
        fig = self.figure(**values)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return buf.getvalue()

    def frame(self, **values: Any) -> bytes:
        """The figure as a compact palette PNG, as the website shows it (closed afterwards)."""
        from .plotting import compact_png
        fig = self.figure(**values)
        try:
            return compact_png(fig)
        finally:
            plt.close(fig)

    def shown(self) -> str:
        """The current values as the readouts write them: ``ε = 1.1, n = 10,000``."""
        return ", ".join(f"{c.label or k} = {format_value(self.values[k])}"
                         for k, c in self.controls.items())

    def caption_html(self) -> str:
        text = f"{html.escape(self.caption)} " if self.caption else ""
        return (f'<p class="{CAPTION_CLASS}"><em>{text}Shown at '
                f"{html.escape(self.shown())}.</em></p>")

    def static_html(self, grid: FrameGrid, frames: dict[tuple[int, ...], bytes]) -> str:
        """The website's control: ``frames`` (one per key of ``grid``) behind native inputs."""
        missing = [k for k in grid.keys() if k not in frames]
        if missing:
            raise ValueError(f"frames lacks {len(missing)} of the grid's frames, e.g. {missing[0]}")
        stored: list[bytes] = []
        seen: dict[bytes, int] = {}
        index = {}
        for key in grid.keys():
            png = frames[key]
            if png not in seen:
                seen[png] = len(stored)
                stored.append(png)
            index[",".join(map(str, key))] = seen[png]
        uid = "dpbook-live-" + hashlib.sha1(b"".join(stored) + repr(grid).encode()).hexdigest()[:12]
        labels = [self.controls[n].label or n for n in grid.names]
        readouts = [[format_value(v) for v in vals] for vals in grid.values]
        shown = ", ".join(f"{lab} = {r[j]}" for lab, r, j in zip(labels, readouts, grid.defaults))
        alt = f"{self.caption} Figure at " if self.caption else "Figure at "
        data = {"product": grid.product, "defaults": list(grid.defaults), "labels": labels,
                "readouts": readouts, "index": index, "alt": alt,
                "frames": [""] + [base64.b64encode(p).decode() for p in stored[1:]]}
        payload = json.dumps(data, ensure_ascii=True, separators=(",", ":")).replace("</", "<\\/")
        rows = "".join(_control_html(uid, i, n, self.controls[n], grid, readouts[i])
                       for i, n in enumerate(grid.names))
        cap = f"{html.escape(self.caption)} " if self.caption else ""
        default = base64.b64encode(stored[0]).decode()
        return (f'<div class="{LIVE_CLASS}" id="{uid}">{_STYLE}'
                f'<div class="{CONTROLS_CLASS} dpbook-live-controls" role="group" '
                f'aria-label="Figure controls">{rows}</div>'
                f'<img src="data:image/png;base64,{default}" alt="{html.escape(alt + shown)}">'
                f'<p class="{CAPTION_CLASS}"><em>{cap}Shown at '
                f'<span class="dpbook-live-values">{html.escape(shown)}</span>.</em> '
                f"{_frames_note(grid, self.controls)}</p>"
                f'<script type="application/json" class="dpbook-live-data">{payload}</script>'
                + _SCRIPT % {"id": json.dumps(uid)} + "</div>")

    def precompute(self, *, quick: bool | None = None,
                   budget_s: float = FRAME_BUDGET_S) -> tuple[FrameGrid, dict]:
        """Draw the website's frames: the defaults first, then the grid the budget allows.

        In quick mode the grid is the coarsest (min, default, max of each range), whatever the
        cost; otherwise the default figure's CPU time sets how fine it can be within ``budget_s``.
        """
        from .device import quick_mode
        quick = quick_mode() if quick is None else quick
        start = time.process_time()   # CPU time: a busy build machine does not shrink the grid
        first = self.frame()
        cost = max(time.process_time() - start, 1e-3)
        grid = (frame_grid(self.controls, MIN_POINTS, max_product=QUICK_PRODUCT) if quick
                else plan_grid(self.controls, max(1, int(budget_s / cost))))
        frames = {tuple(grid.defaults): first}
        for key in grid.keys()[1:]:
            frames[key] = self.frame(**grid.at(key))
        self.grid = grid
        return grid, frames

    def show(self) -> None:
        """Display the panel: live ipywidgets with a kernel, or the website's frame control."""
        from IPython.display import HTML, Image, display
        if frames_enabled():
            grid, frames = self.precompute()
            display({"text/html": self.static_html(grid, frames),
                     "text/plain": f"<interactive figure: {self.shown()}>"}, raw=True)
            return
        try:
            import ipywidgets as w
        except ImportError:  # still show the static figure
            w = None
        handles: dict[str, Any] = {}
        if w is not None:
            self.sliders = {k: _to_widget(k, c) for k, c in self.controls.items()}
            self.readouts = readouts = {k: w.Label(format_value(self.values[k]))
                                        for k, c in self.controls.items() if c.kind != "choice"}

            def redraw(_change=None):
                self.values = {k: self.controls[k].cast(s.value) for k, s in self.sliders.items()}
                for k, label in readouts.items():
                    label.value = format_value(self.values[k])
                handles["fig"].update(Image(data=self.png()))
                handles["cap"].update(HTML(self.caption_html()))

            for s in self.sliders.values():
                s.observe(redraw, names="value")
            rows = [w.HBox([s, readouts[k]]) if k in readouts else s
                    for k, s in self.sliders.items()]
            # Live frontends render the widget view; a page without a kernel shows the HTML
            # fallback (a note to run the notebook) instead of the widget's text repr.
            bundle = _widget_bundle(w.VBox(rows))
            bundle.update({"text/plain": "",
                           "text/html": f'<p class="{CONTROLS_CLASS}"><em>Run this notebook '
                                        f"(Colab or Jupyter) to move the sliders.</em></p>"})
            display(bundle, raw=True)
        handles["fig"] = display(Image(data=self.png()), display_id=True)
        handles["cap"] = display(HTML(self.caption_html()), display_id=True)


def interactive_figure(plot: Callable[..., plt.Figure], *, caption: str | None = None,
                       show: bool = True, **controls: Control) -> FigurePanel:
    """Build a :class:`FigurePanel` from ``plot`` and keyword controls, display it, return it."""
    if not callable(plot):
        raise ValueError(f"plot must be a function returning a matplotlib Figure, got {plot!r}")
    if caption is not None and not isinstance(caption, str):
        raise ValueError(f"caption must be a string or None, got {caption!r}")
    if not isinstance(show, bool):
        raise ValueError(f"show must be True or False, got {show!r}")
    bad = [k for k, c in controls.items() if not isinstance(c, Control)]
    if bad:
        raise ValueError(f"controls must be made with slider/int_slider/log_slider/dropdown; "
                         f"{bad[0]}={controls[bad[0]]!r} is not")
    panel = FigurePanel(plot, controls, caption)
    if show:
        panel.show()
    return panel
