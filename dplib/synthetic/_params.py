"""The declared parameters shared by the modules of :mod:`dplib.synthetic`
(:mod:`dplib._constraints`): a table of records, the shares of a budget. The privacy parameters
(ε, δ, counts) are those of :mod:`dplib.accounting._params`."""
from __future__ import annotations

import math

from .._constraints import Custom, Interval
from .data import check_tabular

__all__ = ["TABULAR", "FRACTION"]

#: A :class:`~dplib.synthetic.data.TabularData` holding at least one record.
TABULAR = Custom(check_tabular, "a dplib.synthetic.TabularData with at least one record",
                 [None, 3, "abc", [[0, 1]], math.nan])
#: A fraction in (0, 1) (a share of the budget or of the records).
FRACTION = Interval(0.0, 1.0, closed="neither", family="frac_open")
