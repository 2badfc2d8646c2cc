"""Seeding, device choice, quick mode and the interactive-figure helper."""
import random

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dplib  # noqa: E402
from dplib.widgets import (FigurePanel, dropdown, int_slider, interactive_figure,  # noqa: E402
                           log_slider, slider)


def test_seed_everything_reproduces_all_generators():
    torch = pytest.importorskip("torch")
    draws = []
    for _ in range(2):
        g = dplib.seed_everything(11)
        draws.append((g.random(), np.random.rand(), random.random(), torch.rand(1).item()))
    assert draws[0] == draws[1]
    assert dplib.seed_everything(12).random() != draws[0][0]


def test_quick_mode(monkeypatch):
    for value, expected in [("1", True), ("yes", True), ("0", False), ("", False), ("false", False)]:
        monkeypatch.setenv("DPBOOK_QUICK", value)
        assert dplib.quick_mode() is expected
    monkeypatch.delenv("DPBOOK_QUICK")
    assert dplib.quick_mode() is False


def test_device_defaults_to_cpu_without_gpu():
    torch = pytest.importorskip("torch")
    dev = dplib.get_device()
    expected = "cuda" if torch.cuda.is_available() else dev.type
    assert dev.type == expected
    assert dplib.get_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="prefer"):
        dplib.get_device("tpu")


def test_setup_prints_and_seeds(capsys):
    env = dplib.setup(seed=3)
    assert "seed: 3" in capsys.readouterr().out
    assert env.rng.random() == np.random.default_rng(3).random()
    with pytest.raises(ValueError, match="seed"):
        dplib.setup(seed=-1)


def _plot(a, b, kind):
    fig, ax = plt.subplots()
    ax.plot([0, 1], [a, b], label=kind)
    return fig


def test_panel_renders_defaults_and_overrides():
    panel = FigurePanel(_plot, {"a": slider(0, 1, 0.5), "b": int_slider(1, 10, 3),
                                "kind": dropdown(["x", "y"], "x")})
    fig = panel.figure(a=0.25, kind="y")
    ys = fig.axes[0].lines[0].get_ydata()
    assert list(ys) == [0.25, 3] and fig.axes[0].lines[0].get_label() == "y"
    plt.close(fig)
    png = panel.png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    assert "a = 0.5" in panel.caption_html() and "b = 3" in panel.caption_html()


def test_panel_refuses_bad_values():
    panel = FigurePanel(_plot, {"a": slider(0, 1, 0.5), "b": log_slider(1, 100, 10),
                                "kind": dropdown(["x"], "x")})
    with pytest.raises(ValueError, match="a must be in"):
        panel.figure(a=2.0)
    with pytest.raises(ValueError, match="unknown control"):
        panel.figure(c=1)
    with pytest.raises(ValueError, match="kind must be one of"):
        panel.figure(kind="z")
    with pytest.raises(ValueError, match="min > 0"):
        log_slider(0, 1, 0.5)
    with pytest.raises(ValueError, match="min < max"):
        slider(1, 0, 0.5)
    bad = FigurePanel(lambda a: "not a figure", {"a": slider(0, 1, 0.5)})
    with pytest.raises(ValueError, match="matplotlib Figure"):
        bad.figure()


def test_interactive_figure_displays_png_and_caption(monkeypatch):
    shown, handles = [], []

    def fake_display(obj, **kw):
        shown.append(obj)
        handles.append(_Handle())
        return handles[-1]

    monkeypatch.setattr("IPython.display.display", fake_display)
    panel = interactive_figure(_plot, a=slider(0, 1, 0.5), b=log_slider(1, 1000, 10, integer=True),
                               kind=dropdown(["x"], "x"))
    controls, image, caption = shown
    assert "application/vnd.jupyter.widget-view+json" in controls
    assert controls["text/plain"] == "" and "dpbook-widget-controls" in controls["text/html"]
    assert image.data[:4] == b"\x89PNG"
    assert 'class="dpbook-widget-caption"' in caption.data and "b = 10," in caption.data
    # Moving a slider redraws the figure in place and updates the caption; counts stay integers.
    panel.sliders["b"].value = 123.4
    assert panel.values["b"] == 123 and handles[1].last.data != image.data
    assert "b = 123," in handles[2].last.data


class _Handle:
    last = None

    def update(self, obj):
        self.last = obj
