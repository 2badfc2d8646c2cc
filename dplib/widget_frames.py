"""The website's interactive figures: a grid of precomputed frames behind a native HTML control.

A :class:`~dplib.widgets.FigurePanel` has ipywidgets sliders wherever a kernel runs. The website
has no kernel, no server and no network: when the book is built with ``DPBOOK_WIDGET_FRAMES=1`` in
the environment (the book's Sphinx extension sets it, :func:`frames_enabled`), the panel is drawn
at build time over a grid of control values (:func:`frame_grid`, :func:`plan_grid`) and the cell's
output is a small self-contained HTML control (native ``<input type=range>`` and ``<select>``,
labelled, keyboard operable, with a live readout) whose inline script swaps between those
precomputed frames (:func:`live_control_html`).

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
several times smaller than SVG for these figures; identical frames are stored once. The frames
are cell outputs, so the book's execution cache keeps them and an unchanged chapter is not drawn
again.
"""
from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._common_params import TEXT_OR_NONE
from ._constraints import Custom, InstanceOf, Integer, constrained, unconstrained
from ._validate import shown
from .widget_controls import CAPTION_CLASS, CONTROLS, CONTROLS_CLASS, Control, format_value

__all__ = ["FrameGrid", "frame_grid", "plan_grid", "frames_enabled", "live_control_html",
           "FRAMES_ENV", "LIVE_CLASS", "MIN_POINTS", "MAX_POINTS", "FRAME_BUDGET_S",
           "MAX_PRODUCT", "QUICK_PRODUCT"]

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


# --- the grid of precomputed frames --------------------------------------------------------------

@unconstrained("result record returned by frame_grid/plan_grid, built from their checked "
               "controls")
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

    @unconstrained("called with the grid's own keys (FrameGrid.keys) by FigurePanel.precompute")
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


@constrained(controls=CONTROLS, points=Integer(min=2), max_product=Integer(min=1))
def frame_grid(controls: dict[str, Control], points: int, *,
               max_product: int = MAX_PRODUCT) -> FrameGrid:
    """The website's grid: ``points`` values per range control, every option of a dropdown.

    All combinations are drawn when there are at most ``max_product`` of them; otherwise one
    control at a time (1 + Σ(kᵢ − 1) frames).
    """
    values, defaults = [], []
    for c in controls.values():
        vals = list(c.options) if c.kind == "choice" else _range_values(c, points)
        values.append(tuple(vals))
        defaults.append(vals.index(c.cast(c.value)))
    product = math.prod(len(v) for v in values) <= max_product
    return FrameGrid(tuple(controls), tuple(values), tuple(defaults), product)


@constrained(controls=CONTROLS, frames=Integer(min=1))
def plan_grid(controls: dict[str, Control], frames: int) -> FrameGrid:
    """The finest grid with at most ``frames`` frames (fewer points only as the budget demands).

    Each range control gets between :data:`MIN_POINTS` and :data:`MAX_POINTS` values (every
    control must move, so the lower end holds even over the budget); all combinations are drawn
    when affordable and at most :data:`MAX_PRODUCT`.
    """
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



def _frames(name: str, value: Any) -> Any:
    if not isinstance(value, dict) or not all(isinstance(v, bytes) for v in value.values()):
        raise ValueError(f"{name} must be a dict of PNG bytes keyed by the grid's keys, got "
                         f"{shown(value)}"[:300])
    return value


@constrained(grid=InstanceOf(FrameGrid, "a FrameGrid (from frame_grid or plan_grid)"),
             frames=Custom(_frames, "a dict of PNG bytes keyed by the grid's keys",
                           [None, 3, "png", {(0,): "png"}]),
             controls=CONTROLS, caption=TEXT_OR_NONE)
def live_control_html(grid: FrameGrid, frames: dict[tuple[int, ...], bytes],
                      controls: dict[str, Control], caption: str | None = None) -> str:
    """The website's control for a panel: ``frames`` (one per key of ``grid``) behind native inputs.

    One self-contained HTML element: the labelled ``<input type=range>``/``<select>`` of every
    control of ``grid`` (declared in ``controls``), the default frame as an ``<img>``, the
    caption with the values shown, the other frames as base64 PNGs in a JSON payload (identical
    frames stored once) and the inline script that swaps them; nothing is fetched. Every key of
    ``grid`` must have a frame and every control of ``grid`` a declaration in ``controls``.
    """
    missing = [k for k in grid.keys() if k not in frames]
    if missing:
        raise ValueError(f"frames lacks {len(missing)} of the grid's frames, e.g. {missing[0]}")
    if any(n not in controls for n in grid.names):
        raise ValueError(f"controls must declare every control of the grid {list(grid.names)}, "
                         f"got {sorted(controls)}")
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
    labels = [controls[n].label or n for n in grid.names]
    readouts = [[format_value(v) for v in vals] for vals in grid.values]
    shown = ", ".join(f"{lab} = {r[j]}" for lab, r, j in zip(labels, readouts, grid.defaults))
    alt = f"{caption} Figure at " if caption else "Figure at "
    data = {"product": grid.product, "defaults": list(grid.defaults), "labels": labels,
            "readouts": readouts, "index": index, "alt": alt,
            "frames": [""] + [base64.b64encode(p).decode() for p in stored[1:]]}
    payload = json.dumps(data, ensure_ascii=True, separators=(",", ":")).replace("</", "<\\/")
    rows = "".join(_control_html(uid, i, n, controls[n], grid, readouts[i])
                   for i, n in enumerate(grid.names))
    cap = f"{html.escape(caption)} " if caption else ""
    default = base64.b64encode(stored[0]).decode()
    return (f'<div class="{LIVE_CLASS}" id="{uid}">{_STYLE}'
            f'<div class="{CONTROLS_CLASS} dpbook-live-controls" role="group" '
            f'aria-label="Figure controls">{rows}</div>'
            f'<img src="data:image/png;base64,{default}" alt="{html.escape(alt + shown)}">'
            f'<p class="{CAPTION_CLASS}"><em>{cap}Shown at '
            f'<span class="dpbook-live-values">{html.escape(shown)}</span>.</em> '
            f"{_frames_note(grid, controls)}</p>"
            f'<script type="application/json" class="dpbook-live-data">{payload}</script>'
            + _SCRIPT % {"id": json.dumps(uid)} + "</div>")
