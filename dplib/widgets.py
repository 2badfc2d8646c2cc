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
  The grid, the frames and that control are in :mod:`dplib.widget_frames` (why frames and not
  Python in the browser, and how the grid is chosen, are explained there).

This module holds the panel (:class:`FigurePanel`, :func:`interactive_figure`); the controls
(:func:`slider`, :func:`int_slider`, :func:`log_slider`, :func:`dropdown`) and the readouts are
declared in :mod:`dplib.widget_controls` and importable from here.
Readouts are human in both places: :func:`format_value` writes n = 10,000 and δ = 1e-5, and is
used by the ipywidgets readout, the captions and the static control alike.
"""
from __future__ import annotations

import html
import math
import time
from typing import Any, Callable

import matplotlib.pyplot as plt

# The website's frames (re-exported: they are importable from here as before).
from .widget_frames import (FRAME_BUDGET_S, FRAMES_ENV, LIVE_CLASS,  # noqa: F401
                            MAX_POINTS, MAX_PRODUCT, MIN_POINTS, QUICK_PRODUCT, FrameGrid,
                            frame_grid, frames_enabled, live_control_html, plan_grid)
from ._common_params import FLAG, FLAG_OR_NONE, POSITIVE, TEXT_OR_NONE
from ._constraints import IsCallable, constrained, unconstrained
from ._tight_png import tight_png
from ._validate import shown
from .widget_controls import (CAPTION_CLASS, CONTROLS, CONTROLS_CLASS, Control,  # noqa: F401
                              dropdown, format_value, int_slider, log_slider, slider)

__all__ = ["Control", "slider", "int_slider", "log_slider", "dropdown", "FigurePanel",
           "interactive_figure", "format_value", "FrameGrid", "frame_grid", "plan_grid",
           "frames_enabled", "FRAMES_ENV"]

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


#: The plotting function of a panel.
PLOT = IsCallable("a function returning a matplotlib Figure")


class FigurePanel:
    """A plotting function plus its controls; renders figures for any allowed values."""

    @constrained(plot=PLOT, controls=CONTROLS, caption=TEXT_OR_NONE)
    def __init__(self, plot: Callable[..., plt.Figure], controls: dict[str, Control],
                 caption: str | None = None):
        self.plot, self.controls, self.caption = plot, dict(controls), caption
        self.values = {k: c.cast(c.value) for k, c in self.controls.items()}
        self.sliders: dict[str, Any] = {}
        self.readouts: dict[str, Any] = {}    # the sliders' readouts (ipywidgets Labels)
        self.grid: FrameGrid | None = None

    @unconstrained("its keyword values are checked by each control's own Control.check")
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

    @unconstrained("passes its keyword values to FigurePanel.figure, which checks them")
    def png(self, **values: Any) -> bytes:
        """The figure as PNG bytes (the figure is closed afterwards, so nothing leaks)."""
        fig = self.figure(**values)
        try:
            return tight_png(fig)       # fig.savefig's PNG, drawn once (dplib._tight_png)
        finally:
            plt.close(fig)

    @unconstrained("passes its keyword values to FigurePanel.figure, which checks them")
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

    @unconstrained("forwards to live_control_html, which declares grid and frames")
    def static_html(self, grid: FrameGrid, frames: dict[tuple[int, ...], bytes]) -> str:
        """The website's control: ``frames`` (one per key of ``grid``) behind native inputs
        (:func:`dplib.widget_frames.live_control_html`)."""
        return live_control_html(grid, frames, self.controls, self.caption)

    @constrained(quick=FLAG_OR_NONE, budget_s=POSITIVE)
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


@constrained(plot=PLOT, caption=TEXT_OR_NONE, show=FLAG)
def interactive_figure(plot: Callable[..., plt.Figure], *, caption: str | None = None,
                       show: bool = True, **controls: Control) -> FigurePanel:
    """Build a :class:`FigurePanel` from ``plot`` and keyword controls, display it, return it."""
    bad = [k for k, c in controls.items() if not isinstance(c, Control)]
    if bad:
        raise ValueError(f"controls must be made with slider/int_slider/log_slider/dropdown; "
                         f"{bad[0]}={shown(controls[bad[0]])} is not")
    panel = FigurePanel(plot, controls, caption)
    if show:
        panel.show()
    return panel
