"""dplib._tight_png.tight_png writes the very PNG that fig.savefig writes (tight bounding box)."""
import io

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from dplib import plotting  # noqa: E402
from dplib._tight_png import tight_png  # noqa: E402


def _log_panels(fig):
    axes = fig.subplots(2, 1, sharex=True)
    x = np.logspace(-4, 0, 300)
    for k, ax in enumerate(axes):
        ax.loglog(x, x ** (0.3 + k), label=r"$\sqrt{x}$ and more")
        ax.loglog(x, x, ":", label="chance")
        ax.set_title(f"panel {k}\nsecond line")
        ax.legend()                      # loc="best": placed when measured
    axes[1].set_xlabel(r"false-positive rate $\alpha$")
    fig.suptitle("a suptitle")


def _twin_and_colorbar(fig):
    ax = fig.subplots()
    im = ax.imshow(np.arange(64.0).reshape(8, 8), cmap="gray_r")   # equal aspect
    fig.colorbar(im, ax=ax, label="value")
    ax2 = ax.twinx()
    ax2.plot(np.arange(8), np.arange(8) ** 2, color="C1")
    ax.annotate("far away", (7, 7), xytext=(12, -3), arrowprops={"arrowstyle": "->"})


def _histogram_outside_legend(fig):
    ax = fig.subplots()
    rng = np.random.default_rng(3)
    ax.hist(rng.standard_normal(500), bins=30, alpha=0.6, label="a")
    ax.set_yscale("log")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.2))


def _subfigure_images(fig):
    imgs = np.random.default_rng(0).random((10, 64))
    for r, sub in enumerate(fig.subfigures(2, 1)):
        sub.suptitle(f"row {r}")
        for c, ax in enumerate(sub.subplots(2, 5).flat):
            ax.imshow(imgs[c].reshape(8, 8), cmap="gray_r")
            ax.set_xticks([]); ax.set_yticks([]); ax.grid(False)


BUILDERS = [_log_panels, _twin_and_colorbar, _histogram_outside_legend, _subfigure_images]


def _savefig(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


@pytest.mark.parametrize("build", BUILDERS)
@pytest.mark.parametrize("kind", ["pyplot-tight", "pyplot-raw", "figure-tight", "constrained"])
def test_tight_png_is_savefig(build, kind):
    plotting.use_book_style()
    pngs = []
    for save in (_savefig, tight_png):
        if kind == "figure-tight":
            fig = Figure()               # no pyplot canvas (dplib.figures builds these)
        elif kind == "constrained":
            fig = plt.figure(layout="constrained")
        else:
            fig = plt.figure()
        build(fig)
        if kind.endswith("tight"):
            fig.tight_layout()
        pngs.append(save(fig))
        plt.close(fig)
    assert pngs[0][:8] == b"\x89PNG\r\n\x1a\n"
    assert pngs[1] == pngs[0]


def test_tight_png_leaves_the_layout_engine():
    fig = plt.figure()
    _log_panels(fig)
    fig.tight_layout()
    engine = fig.get_layout_engine()
    tight_png(fig)
    assert fig.get_layout_engine() is engine
    plt.close(fig)


def test_non_tight_setting_goes_through_savefig():
    with matplotlib.rc_context({"savefig.bbox": None}):
        figs = [plt.figure(), plt.figure()]
        for f in figs:
            _twin_and_colorbar(f)
        assert tight_png(figs[0]) == _savefig(figs[1])
        plt.close("all")


def test_a_matplotlib_without_the_private_names_gets_plain_savefig(monkeypatch):
    """Colab may bring another matplotlib: without ``cbook._setattr_cm`` the bytes are savefig's."""
    import io

    import matplotlib.pyplot as plt
    from dplib import _tight_png
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], [1, 4, 9])
    ax.set(yscale="log", title="t")
    monkeypatch.setattr(_tight_png, "_has_private_names", lambda fig: False)
    calls = []
    monkeypatch.setattr(fig, "savefig",
                        lambda *a, **k: (calls.append(k), Figure.savefig(fig, *a, **k)))
    got = _tight_png.tight_png(fig)
    assert calls == [{"format": "png"}]            # one plain savefig, no explicit box
    monkeypatch.undo()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    assert got == buf.getvalue()
