"""dplib.tables.format_table: the one formatter behind the results tables.

Oracles: hand-written expected strings, and the two experiment tables that call it
(dplib.experiments.icl and dplib.experiments.encoding) reproduced from their layout rules.
"""
import math

import numpy as np
import pytest

from dplib.tables import format_table

ROWS = [{"name": "a", "x": 1.23456, "n": 3}, {"name": "bbbb", "x": 2.0}]


def test_plain_aligns_numbers_right_and_text_left():
    assert format_table(ROWS) == ("name      x  n\n"
                                  "--------------\n"
                                  "a     1.235  3\n"
                                  "bbbb      2")


def test_columns_formats_headers_and_missing():
    out = format_table(ROWS, ["n", "x"], formats={"x": ".2f"}, headers={"n": "count"},
                       missing="-", rule=None)
    assert out.splitlines() == ["count     x", "    3  1.23", "    -  2.00"]


def test_callable_format_and_alignment_override():
    out = format_table([{"v": np.array([1.0, 3.0])}], formats={"v": lambda a: f"{a.mean():.1f}"},
                       align={"v": "<"}, widths={"v": 5}, rule=None)
    assert out.splitlines() == ["v", "2.0"]          # trailing padding stripped


def test_minimum_widths_and_per_gap_separators():
    out = format_table([{"a": 1, "b": "*", "c": 2}], sep=["", " | "], widths={"a": 4})
    assert out.splitlines() == ["   ab | c", "---------", "   1* | 2"]


def test_unpadded_fields():
    out = format_table([{"k": "long name", "v": 1}], sep=" | ", pad=False, rule=None)
    assert out.splitlines() == ["k | v", "long name | 1"]


def test_footer_lines_follow_the_table():
    out = format_table([{"x": 1}], footer=["* a footnote"])
    assert out.splitlines()[-1] == "* a footnote"


def test_markdown():
    out = format_table(ROWS, style="markdown")
    assert out.splitlines() == ["| name |     x |   n |",
                                "| :--- | ----: | --: |",
                                "| a    | 1.235 |   3 |",
                                "| bbbb |     2 |     |"]


def test_right_aligned_lines_all_have_the_table_width():
    rows = [{"eps": e, "acc": 100 * a} for e, a in [(0.5, 0.91), (8, 0.953), (math.inf, 0.99)]]
    lines = format_table(rows, formats={"acc": ".1f"}, widths={"eps": 6}).splitlines()
    assert len({len(s) for s in lines}) == 1
    assert lines[-1] == "   inf  99.0"


def test_icl_table_layout():
    from dplib.experiments.icl import format_table as icl_table
    runs = np.array([60.0, 70.0])
    tables = {"sentiment": {"ε = 0 (0-shot)": {"mean": 55.0, "std": 0.0, "runs": np.array([55.0])},
                            "ε = 1": {"mean": 65.0, "std": 5.0, "runs": runs}}}
    assert icl_table(tables) == ("data set | ε = 0 (0-shot) | ε = 1\n"
                                 "sentiment | 55.00 | 65.00 ± 5.00")


def test_encoding_table_layout():
    from dplib.experiments.encoding import format_table as encoding_table
    rows = [{"method": m, "target_epsilon": e, "mean": 0.9, "std": 0.01, "lr": 0.5}
            for m in ("dpsgd", "alg1_gaussian") for e in (2.0, 8.0)]
    lines = encoding_table({"rows": rows, "config": {"epsilons": [2.0, 8.0]}}).splitlines()
    cell = "90.0 ± 1.0 (lr 0.5)".rjust(24)
    assert lines[0] == f"{'eps':>5} | {'dpsgd':>24} | {'alg1_gaussian':>24}"
    assert lines[1] == "-" * len(lines[0])
    assert lines[2:] == [f"    2 | {cell} | {cell}", f"    8 | {cell} | {cell}"]


@pytest.mark.parametrize("kwargs, match", [
    ({"style": "html"}, "style must be one of .*got 'html'"),
    ({"rule": "--"}, "rule must be one character or None, got '--'"),
    ({"align": {"x": "left"}}, r"align\['x'\] must be one of .*got 'left'"),
    ({"widths": {"x": -1}}, r"widths\['x'\] must be an integer >= 0, got -1"),
    ({"formats": {"zzz": ".2f"}}, r"formats names columns not in the table: \['zzz'\]"),
    ({"sep": ["a"]}, "sep must be a string or 2 strings"),
    ({"columns": []}, "columns must name at least one column"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        format_table(ROWS, **kwargs)


def test_bad_rows():
    with pytest.raises(ValueError, match=r"rows\[1\] must be a dict, got list"):
        format_table([{"a": 1}, [1]])
