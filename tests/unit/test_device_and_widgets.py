"""Seeding, device choice, quick mode and the interactive-figure helper."""
import random

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dplib  # noqa: E402
from dplib.widget_frames import frame_grid, plan_grid  # noqa: E402
from dplib.widgets import (FigurePanel, dropdown, format_value, int_slider,  # noqa: E402
                           interactive_figure, log_slider, slider)


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
    panel = interactive_figure(_plot, a=slider(0, 1, 0.5), b=log_slider(1, 1e5, 10, integer=True),
                               kind=dropdown(["x"], "x"))
    controls, image, caption = shown
    assert "application/vnd.jupyter.widget-view+json" in controls
    assert controls["text/plain"] == "" and "dpbook-widget-controls" in controls["text/html"]
    assert image.data[:4] == b"\x89PNG"
    assert 'class="dpbook-widget-caption"' in caption.data and "b = 10," in caption.data
    # Without a kernel (a page, nbviewer) the controls' HTML says how to move them; the caption
    # itself does not, since it sits under live sliders in Jupyter and Colab.
    assert "Run this notebook" in controls["text/html"] and "Run this" not in caption.data
    # Moving a slider redraws the figure in place and updates the caption and the readout, which
    # format_value writes (not the slider's own d3 format); counts stay integers.
    panel.sliders["b"].value = 12345.6
    assert panel.values["b"] == 12346 and handles[1].last.data != image.data
    assert "b = 12,346," in handles[2].last.data
    assert panel.sliders["b"].readout is False
    assert {k: r.value for k, r in panel.readouts.items()} == {"a": "0.5", "b": "12,346"}


class _Handle:
    last = None

    def update(self, obj):
        self.last = obj



@pytest.mark.parametrize("value,text", [
    (10_000, "10,000"), (10_000.0, "10,000"), (1_000_000, "1,000,000"), (12_345.6, "12,300"),
    (1e-5, "1e-5"), (2.5e-7, "2.5e-7"), (3.162e-6, "3.16e-6"), (1e-10, "1e-10"), (3e9, "3e9"),
    (float(np.log(3)), "1.1"), (0.5, "0.5"), (0.004, "0.004"), (0.0316, "0.0316"),
    (999.7, "1,000"), (256.0, "256"), (0.0, "0"), (-0.25, "-0.25"), (7, "7"),
    ("∞", "∞"), ("classic", "classic")])
def test_format_value_writes_numbers_as_readers_do(value, text):
    assert format_value(value) == text


_CONTROLS = {"eps": log_slider(0.05, 10.0, float(np.log(3)), label="ε"),
             "n": log_slider(100, 1_000_000, 10_000, integer=True, label="n"),
             "q": slider(0.0, 1.0, 0.1, step=0.01, label="q"),
             "m": int_slider(5, 80, 20, step=5, label="M"),
             "kind": dropdown(["x", "y", "z"], "y", label="kind")}


def test_frame_grid_values_include_defaults_and_respect_scales():
    grid = frame_grid(_CONTROLS, 5)
    values = dict(zip(grid.names, grid.values))
    for name, c in _CONTROLS.items():   # each default is among the values, exactly, at its index
        assert values[name][grid.defaults[grid.names.index(name)]] == c.value
    assert values["kind"] == ("x", "y", "z")
    eps = np.log10(values["eps"])
    assert values["eps"][0] == 0.05 and values["eps"][-1] == 10.0 and np.all(np.diff(eps) > 0)
    # evenly spaced on the log scale apart from the inserted default (ln 3 is off the grid)
    assert np.allclose(np.diff(np.delete(eps, grid.defaults[0])), np.log10(200) / 4, rtol=0.05)
    assert all(isinstance(v, int) for v in values["n"]) and values["n"][0] == 100
    assert all(v % 5 == 0 and 5 <= v <= 80 for v in values["m"])
    assert all(abs(v * 100 - round(v * 100)) < 1e-9 for v in values["q"])   # on the 0.01 steps
    for name, vals in values.items():   # every value is one the control accepts
        for v in vals:
            _CONTROLS[name].check(name, v)


def test_frame_grid_one_control_at_a_time_or_full_product():
    star = frame_grid(_CONTROLS, 4, max_product=10)
    keys = star.keys()
    sizes = [len(v) for v in star.values]
    assert not star.product and len(keys) == 1 + sum(s - 1 for s in sizes)
    assert keys[0] == star.defaults and len(set(keys)) == len(keys)
    for key in keys:   # each frame moves one control at most
        assert sum(a != b for a, b in zip(key, star.defaults)) <= 1
    small = {"a": dropdown(["∞", "8", "1"], "∞"), "b": dropdown([100, 898], 100)}
    full = frame_grid(small, 4)
    assert full.product and len(full.keys()) == 6 and len(set(full.keys())) == 6
    assert full.at((2, 1)) == {"a": "1", "b": 898}
    with pytest.raises(ValueError, match="points"):
        frame_grid(_CONTROLS, 1)


def test_plan_grid_fits_the_frame_budget():
    fine, cheap = plan_grid(_CONTROLS, 1000), plan_grid(_CONTROLS, 20)
    assert max(len(v) for v in fine.values[:4]) >= 9
    assert 11 < len(cheap.keys()) <= 20   # the finest grid within 20 frames, not the coarsest
    # Over budget, every control still moves: three values each (min, default, max).
    tight = plan_grid(_CONTROLS, 1)
    assert all(len(v) >= 3 for v in tight.values)


def _line(a, kind):
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, a], label=kind)
    ax.set_title(kind)
    return fig


def test_static_html_is_a_self_contained_labelled_control():
    import json
    import re
    panel = FigurePanel(_line, {"a": log_slider(0.1, 10, 1.0, label="δ"),
                                "kind": dropdown(["x", "y"], "x", label="kind")}, "Lines.")
    grid = frame_grid(panel.controls, 3, max_product=1)
    frames = {k: panel.frame(**grid.at(k)) for k in grid.keys()}
    page = panel.static_html(grid, frames)
    assert "http" not in page and "<script src" not in page     # nothing fetched
    assert re.search(r'<label for="(dpbook-live-\w+-0)">δ</label><input type="range" '
                     r'id="\1"[^>]*aria-valuetext="1"', page)
    assert '<select id="dpbook-live-' in page and "<option value=\"1\">y</option>" in page
    data = json.loads(re.search(r'class="dpbook-live-data">(.*?)</script>', page).group(1))
    assert data["readouts"] == [["0.1", "1", "10"], ["x", "y"]] and data["product"] is False
    assert set(data["index"]) == {",".join(map(str, k)) for k in grid.keys()}
    assert len(data["frames"]) == len(set(frames.values())) == 4
    assert "Shown at" in page and "Run this notebook" not in page and "one control" in page
    with pytest.raises(ValueError, match="lacks"):
        panel.static_html(grid, {grid.defaults: frames[grid.defaults]})


def test_frames_mode_displays_the_static_control(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    monkeypatch.setenv("DPBOOK_WIDGET_FRAMES", "1")
    monkeypatch.setenv("DPBOOK_QUICK", "1")
    panel = interactive_figure(_line, a=slider(0, 1, 0.5), kind=dropdown(["x", "y"], "x"))
    (bundle,) = shown
    assert 'class="dpbook-live-figure"' in bundle["text/html"]
    # Quick mode: the coarsest grid (min, default, max), all 3 x 2 combinations drawn.
    assert panel.grid.values == ((0.0, 0.5, 1.0), ("x", "y")) and panel.grid.product
    assert bundle["text/html"].count('type="range"') == 1 and "<select" in bundle["text/html"]
    # The caption says what only the notebook can do: here values between the slider's steps.
    note = bundle["text/html"]
    assert "sliders move in steps" in note and "one control" not in note


def test_widget_bundle_under_ipywidgets_7():
    from dplib.widgets import _widget_bundle

    class Old:   # ipywidgets 7 widgets display through _ipython_display_, not a mimebundle
        model_id = "abc"
    view = _widget_bundle(Old())["application/vnd.jupyter.widget-view+json"]
    assert view == {"version_major": 2, "version_minor": 0, "model_id": "abc"}


def test_compact_png_is_a_smaller_palette_png_on_white():
    import io

    from PIL import Image

    from dplib.plotting import compact_png
    fig = _line(1.0, "x")
    fig.patch.set_alpha(0.0)   # transparent: must come out on white, not black
    raw = io.BytesIO()
    fig.savefig(raw, format="png")
    small = compact_png(fig)
    assert small == compact_png(fig)   # deterministic: identical frames are stored once
    plt.close(fig)
    with Image.open(io.BytesIO(small)) as im, Image.open(raw) as ref:
        assert im.mode == "P" and im.size == ref.size and len(small) < len(raw.getvalue())
        assert im.convert("RGB").getpixel((1, 1)) == (255, 255, 255)
    with pytest.raises(ValueError, match="colors"):
        compact_png(plt.figure(), colors=1)
