"""Bad-input specs (:class:`~dplib.testing.bad_inputs.Spec`) of the book's display helpers:
:mod:`dplib.plotting` (the PNG that records its smallest font, for the site's phone check) and
:mod:`dplib.source` (code shown to a reader)."""
from __future__ import annotations

from ._sweep import Spec

__all__ = ["plotting_specs"]


def plotting_specs() -> list[Spec]:
    """:func:`dplib.plotting.figure_png` and :func:`dplib.plotting.min_font_pt`."""
    def fn(name):
        return lambda: getattr(__import__("dplib.plotting", fromlist=["x"]), name)

    def fig():
        return __import__("matplotlib.figure", fromlist=["x"]).Figure()

    return [
        Spec("dplib.plotting.figure_png", fn("figure_png"), args=(fig(),)),    # fig declared
        Spec("dplib.plotting.min_font_pt", fn("min_font_pt"), args=(fig(),)),
        Spec("dplib.source.source", lambda: __import__("dplib.source", fromlist=["x"]).source,
             args=(plotting_specs,)),                                        # obj declared
    ]
