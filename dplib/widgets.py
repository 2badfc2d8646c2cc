"""One way to make an interactive figure, the same in every chapter.

A chapter declares its controls and a function that draws a matplotlib figure for given values::

    panel = interactive_figure(plot, epsilon=log_slider(0.05, 10, 1.0, label="ε"),
                               n=int_slider(100, 10_000, 1_000, label="n"))

What a reader sees depends on where they read:

* **website (no kernel)** – the figure at the default values is saved in the notebook as a plain
  PNG, with a caption listing those values; it needs no JavaScript and no network.
* **Jupyter / Colab** – the sliders appear above the figure; moving one redraws it in place
  (``display_id`` updates, which Jupyter, JupyterLab, VS Code and Colab all support).
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Callable

import matplotlib.pyplot as plt

__all__ = ["Control", "slider", "int_slider", "log_slider", "dropdown", "FigurePanel",
           "interactive_figure"]

#: HTML class of the caption under every widget's default figure (the site check looks for it).
CAPTION_CLASS = "dpbook-widget-caption"
CONTROLS_CLASS = "dpbook-widget-controls"


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


def _to_widget(name: str, c: Control):
    import ipywidgets as w
    common = dict(description=c.label or name, continuous_update=False,
                  style={"description_width": "initial"}, layout=w.Layout(width="420px"))
    if c.kind == "choice":
        return w.Dropdown(options=list(c.options), value=c.value,
                          description=c.label or name, style={"description_width": "initial"})
    if c.kind == "int":
        return w.IntSlider(min=c.min, max=c.max, value=c.value, step=c.step, **common)
    if c.kind == "log":
        return w.FloatLogSlider(min=math.log10(c.min), max=math.log10(c.max), value=c.value,
                                base=10, step=(math.log10(c.max) - math.log10(c.min)) / 100,
                                readout_format=".3g", **common)
    return w.FloatSlider(min=c.min, max=c.max, value=c.value, step=c.step,
                         readout_format=".3g", **common)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


class FigurePanel:
    """A plotting function plus its controls; renders figures for any allowed values."""

    def __init__(self, plot: Callable[..., plt.Figure], controls: dict[str, Control],
                 caption: str | None = None):
        if not controls:
            raise ValueError("controls must declare at least one control, got none")
        self.plot, self.controls, self.caption = plot, dict(controls), caption
        self.values = {k: c.cast(c.value) for k, c in self.controls.items()}
        self.sliders: dict[str, Any] = {}

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

    def caption_html(self) -> str:
        shown = ", ".join(f"{c.label or k} = {_fmt(self.values[k])}" for k, c in self.controls.items())
        text = f"{self.caption} " if self.caption else ""
        return (f'<p class="{CAPTION_CLASS}"><em>{text}Shown at {shown}.</em> '
                f"Run this notebook (Colab or Jupyter) to move the sliders.</p>")

    def show(self) -> None:
        """Display controls (when ipywidgets is available), the figure and its caption."""
        from IPython.display import HTML, Image, display
        try:
            import ipywidgets as w
        except ImportError:  # still show the static figure
            w = None
        handles: dict[str, Any] = {}
        if w is not None:
            self.sliders = {k: _to_widget(k, c) for k, c in self.controls.items()}

            def redraw(_change=None):
                self.values = {k: self.controls[k].cast(s.value) for k, s in self.sliders.items()}
                handles["fig"].update(Image(data=self.png()))
                handles["cap"].update(HTML(self.caption_html()))

            for s in self.sliders.values():
                s.observe(redraw, names="value")
            # Live frontends render the widget view; the website (no kernel) falls back to an
            # empty element instead of the widget's text repr ("VBox(children=...)").
            bundle = w.VBox(list(self.sliders.values()))._repr_mimebundle_()
            bundle.update({"text/plain": "", "text/html": f'<span class="{CONTROLS_CLASS}"></span>'})
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
