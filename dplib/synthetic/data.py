"""Categorical tabular data for private synthetic data: a container, marginals, and an offline set.

:class:`TabularData` holds integer-coded records (one column per attribute, values 0..k−1) with
the names and sizes of the columns. A *marginal* on a set of columns C is the table of counts of
every combination of their values (McKenna, Miklau & Sheldon 2021): it is what the
marginal-based methods of this package measure and match.

:func:`load_adult_like` draws a data set that needs no download from a fixed Bayesian network
whose columns mimic the UCI Adult census extract (Kohavi 1996) — age band, sex, education,
marital status, occupation group, weekly hours and income above 50K. The network's structure and
its conditional probability tables are **invented for this book** (plausible, not estimated from
Adult or any census), so the set contains no real person. It is seeded, so every reader gets the
same records.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .._common_params import RNG
from .._constraints import Custom, Interval, constrained, unconstrained
from .._validate import as_generator, shown
from ..accounting._params import COUNT
from ..device import release_seed

__all__ = ["TabularData", "load_adult_like", "all_marginals", "check_tabular", "check_workload",
           "release_seed_and_rng"]

#: The UCI Adult extract is from the 1994 census: the public default seed of
#: :func:`load_adult_like`.
ADULT_LIKE_SEED = 1994


@unconstrained("its fields are checked together in __post_init__: one column name, size and "
               "label list per column of records (relations between the fields)")
@dataclass(frozen=True, eq=False)
class TabularData:
    """Integer-coded categorical records: ``records[i, j]`` ∈ {0, …, sizes[j] − 1}.

    ``columns``: the attribute names; ``sizes``: the number of values of each; ``labels``: the
    name of every value (for display); ``target``: the column a downstream classifier predicts
    (or None). The domain (every combination of values) has ``prod(sizes)`` cells.
    """
    records: np.ndarray
    columns: tuple[str, ...]
    sizes: tuple[int, ...]
    labels: tuple[tuple[str, ...], ...]
    target: str | None = None

    def __post_init__(self) -> None:
        rec = np.asarray(self.records)
        if rec.ndim != 2 or not np.issubdtype(rec.dtype, np.integer):
            raise ValueError(f"records must be a 2-d integer array, got dtype {rec.dtype} and "
                             f"shape {rec.shape}")
        if len(self.columns) != rec.shape[1] or len(self.sizes) != rec.shape[1] \
                or len(self.labels) != rec.shape[1]:
            raise ValueError(f"columns, sizes and labels must each have one entry per column "
                             f"of records ({rec.shape[1]}), got {len(self.columns)}, "
                             f"{len(self.sizes)}, {len(self.labels)}")
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"columns must be distinct names, got {shown(self.columns)}")
        for name, k, lab in zip(self.columns, self.sizes, self.labels):
            if isinstance(k, bool) or int(k) < 1 or len(lab) != int(k):
                raise ValueError(f"column {name!r} must have a size >= 1 and one label per "
                                 f"value, got size {shown(k)} and {len(lab)} labels")
        if rec.size and ((rec < 0).any() or (rec >= np.asarray(self.sizes)).any()):
            raise ValueError("records must hold values in {0, ..., size - 1} of their column")
        if self.target is not None and self.target not in self.columns:
            raise ValueError(f"target must be one of {list(self.columns)} or None, "
                             f"got {shown(self.target)}")
        object.__setattr__(self, "records", rec.astype(np.int64))
        object.__setattr__(self, "sizes", tuple(int(k) for k in self.sizes))

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.records.shape[0])

    @property
    def domain_size(self) -> int:
        """Number of cells of the full domain, prod(sizes)."""
        return int(np.prod(self.sizes, dtype=np.float64))

    @unconstrained("looks column up among this table's own columns; an unknown one is refused "
                   "with ValueError listing them")
    def index(self, column: str) -> int:
        """Position of ``column``."""
        if column not in self.columns:
            raise ValueError(f"column must be one of {list(self.columns)}, got {shown(column)}")
        return self.columns.index(column)

    @unconstrained("columns are checked by check_workload against this table's own columns")
    def marginal(self, columns: tuple[str, ...] | list[str]) -> np.ndarray:
        """Counts of every combination of the values of ``columns`` (a float array of shape
        ``[sizes of columns]``), by one ``bincount`` over the raveled cell index."""
        cols = check_workload(self, [tuple(columns)])[0]
        idx = [self.index(c) for c in cols]
        shape = tuple(self.sizes[i] for i in idx)
        flat = np.ravel_multi_index(tuple(self.records[:, i] for i in idx), shape)
        return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(float)

    @unconstrained("builds a TabularData, whose __post_init__ checks the records against the "
                   "columns")
    def with_records(self, records: np.ndarray) -> "TabularData":
        """The same columns with other records (e.g. synthetic ones)."""
        return TabularData(np.asarray(records), self.columns, self.sizes, self.labels,
                           self.target)

    @unconstrained("columns are checked by check_workload against this table's own columns")
    def select(self, columns: tuple[str, ...] | list[str]) -> "TabularData":
        """Only ``columns`` (in that order); the target is kept if selected."""
        cols = check_workload(self, [tuple(columns)])[0]
        idx = [self.index(c) for c in cols]
        return TabularData(self.records[:, idx], cols, tuple(self.sizes[i] for i in idx),
                           tuple(self.labels[i] for i in idx),
                           self.target if self.target in cols else None)

    @constrained(test_fraction=Interval(0.0, 1.0, closed="neither", family="frac_open"),
                 rng=RNG)
    def split(self, test_fraction: float = 0.25, *, rng: np.random.Generator | int
              ) -> tuple["TabularData", "TabularData"]:
        """A random (train, test) split; ``test_fraction`` of the records go to test."""
        frac = test_fraction
        perm = rng.permutation(self.n)
        k = int(round(frac * self.n))
        if not 1 <= k < self.n:
            raise ValueError(f"test_fraction={frac} leaves an empty train or test part of "
                             f"{self.n} records")
        return self.with_records(self.records[perm[k:]]), self.with_records(self.records[perm[:k]])


@unconstrained("a validator: the rng check of mst, mwem and the audit (it returns the integer "
               "it drew the generator from, which a declaration cannot hand back)")
def release_seed_and_rng(rng: object) -> tuple[int | None, np.random.Generator]:
    """The generator a synthetic-data release draws from, and which seed to record: a numpy
    ``Generator`` is used as given (seed None: not known here); an int ≥ 0 is a fixed seed (for
    experiments); ``None`` draws 63 fresh bits of OS entropy (:func:`dplib.device.release_seed`),
    so the noise is not a known function of the public inputs."""
    if isinstance(rng, np.random.Generator):
        return None, rng
    seed = release_seed(rng, "rng")
    return seed, np.random.default_rng(seed)


@unconstrained("a validator: it is the check of the declaration TABULAR "
               "(dplib.synthetic._params)")
def check_tabular(name: str, value: object) -> TabularData:
    """``value`` if it is a non-empty :class:`TabularData`, else ``ValueError`` naming ``name``."""
    if not isinstance(value, TabularData):
        raise ValueError(f"{name} must be a dplib.synthetic.TabularData (e.g. from "
                         f"load_adult_like), got {type(value).__name__}")
    if value.n < 1:
        raise ValueError(f"{name} must hold at least one record, got 0")
    return value


@unconstrained("a validator: a workload is checked against the columns of its data (a "
               "relation), raising ValueError naming the parameter")
def check_workload(data: TabularData, workload: object, name: str = "workload"
                   ) -> tuple[tuple[str, ...], ...]:
    """A non-empty list of marginals, each a non-empty tuple of distinct column names of
    ``data``; returned as a tuple of tuples."""
    if isinstance(workload, (str, bytes)) or not hasattr(workload, "__iter__"):
        raise ValueError(f"{name} must be a non-empty list of tuples of column names, "
                         f"got {shown(workload)}")
    out = []
    for clique in workload:
        if isinstance(clique, str) or not hasattr(clique, "__iter__"):
            raise ValueError(f"{name} must hold tuples of column names, got {shown(clique)}")
        clique = tuple(clique)
        if not clique or len(set(clique)) != len(clique) \
                or any(c not in data.columns for c in clique):
            raise ValueError(f"{name} must hold non-empty tuples of distinct names from "
                             f"{list(data.columns)}, got {shown(clique)}")
        out.append(clique)
    if not out:
        raise ValueError(f"{name} must hold at least one marginal, got none")
    return tuple(out)


@constrained(data=Custom(lambda name, value: check_tabular(name, value),
                        "a dplib.synthetic.TabularData with at least one record",
                        [None, 3, "abc", [[0, 1]]]), k=COUNT)
def all_marginals(data: TabularData, k: int) -> tuple[tuple[str, ...], ...]:
    """Every k-way marginal of ``data``'s columns (a workload), in column order."""
    if k > len(data.columns):
        raise ValueError(f"k must be in [1, {len(data.columns)}] (the number of columns), got {k}")
    return tuple(combinations(data.columns, k))


# ---- the offline Adult-like Bayesian network -------------------------------------------------
# Invented conditional probability tables (rows sum to 1). Structure:
# age, sex -> marital; age -> education; education, sex -> occupation; sex, occupation -> hours;
# age, education, marital, occupation, hours -> income (a logistic table).
_LABELS = {
    "age": ("17-29", "30-44", "45-59", "60+"),
    "sex": ("female", "male"),
    "education": ("HS or less", "some college", "bachelors", "postgraduate"),
    "marital": ("never married", "married", "separated/widowed"),
    "occupation": ("service", "manual", "clerical/sales", "professional"),
    "hours": ("<35", "35-45", ">45"),
    "income": ("<=50K", ">50K"),
}
_P_AGE = np.array([0.30, 0.34, 0.24, 0.12])
_P_SEX = np.array([0.33, 0.67])
_P_EDU_AGE = np.array([[0.45, 0.35, 0.16, 0.04], [0.42, 0.28, 0.20, 0.10],
                       [0.48, 0.25, 0.16, 0.11], [0.60, 0.20, 0.12, 0.08]])
_P_MAR_AGE_SEX = np.array([[[0.70, 0.22, 0.08], [0.75, 0.22, 0.03]],
                           [[0.25, 0.50, 0.25], [0.25, 0.65, 0.10]],
                           [[0.10, 0.50, 0.40], [0.08, 0.72, 0.20]],
                           [[0.05, 0.35, 0.60], [0.05, 0.70, 0.25]]])
_P_OCC_EDU_SEX = np.array([[[0.40, 0.15, 0.38, 0.07], [0.22, 0.55, 0.15, 0.08]],
                           [[0.28, 0.07, 0.45, 0.20], [0.18, 0.40, 0.22, 0.20]],
                           [[0.10, 0.03, 0.32, 0.55], [0.08, 0.14, 0.23, 0.55]],
                           [[0.05, 0.02, 0.13, 0.80], [0.04, 0.06, 0.10, 0.80]]])
_P_HOURS_SEX_OCC = np.array([[[0.45, 0.45, 0.10], [0.25, 0.60, 0.15], [0.30, 0.58, 0.12],
                              [0.18, 0.57, 0.25]],
                             [[0.30, 0.52, 0.18], [0.10, 0.62, 0.28], [0.15, 0.62, 0.23],
                              [0.08, 0.50, 0.42]]])
# income: logit P(>50K) = −3.2 + a[age] + e[education] + m[marital] + o[occupation] + h[hours]
_W_INCOME = {"bias": -3.2, "age": np.array([-1.2, 0.3, 0.6, 0.2]),
             "education": np.array([0.0, 0.6, 1.3, 1.8]), "marital": np.array([0.0, 1.4, 0.2]),
             "occupation": np.array([0.0, 0.2, 0.4, 1.1]), "hours": np.array([-0.8, 0.0, 0.6])}


def _draw(gen: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` (n, k), by inverting the row's CDF."""
    cdf = np.cumsum(probs, axis=1)
    u = gen.random((probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(axis=1), probs.shape[1] - 1)


@constrained(n=COUNT, rng=RNG)
def load_adult_like(n: int = 5000, *, rng: np.random.Generator | int = ADULT_LIKE_SEED
                    ) -> TabularData:
    """``n`` records drawn from the book's Adult-like Bayesian network (see the module note).

    Seven categorical columns (age band 4, sex 2, education 4, marital status 3, occupation
    group 4, weekly hours 3, income above 50K 2; a domain of 2304 cells) with ``income`` as the
    target of a downstream classifier. About a quarter of the records have income >50K, as in
    Adult. Ancestral sampling, vectorised over records: each column is drawn from its table given
    its parents' drawn values. The default ``rng`` is the public constant 1994 (the census year of
    the Adult extract), so the data set is fixed and public; pass another seed for other draws.
    """
    gen = as_generator(rng)     # the default (a seed) is not converted by the declaration
    age = _draw(gen, np.broadcast_to(_P_AGE, (n, 4)))
    sex = _draw(gen, np.broadcast_to(_P_SEX, (n, 2)))
    edu = _draw(gen, _P_EDU_AGE[age])
    mar = _draw(gen, _P_MAR_AGE_SEX[age, sex])
    occ = _draw(gen, _P_OCC_EDU_SEX[edu, sex])
    hrs = _draw(gen, _P_HOURS_SEX_OCC[sex, occ])
    w = _W_INCOME
    logit = (w["bias"] + w["age"][age] + w["education"][edu] + w["marital"][mar]
             + w["occupation"][occ] + w["hours"][hrs])
    p = 1.0 / (1.0 + np.exp(-logit))
    inc = (gen.random(n) < p).astype(np.int64)
    cols = ("age", "sex", "education", "marital", "occupation", "hours", "income")
    records = np.stack([age, sex, edu, mar, occ, hrs, inc], axis=1)
    return TabularData(records, cols, tuple(len(_LABELS[c]) for c in cols),
                       tuple(_LABELS[c] for c in cols), target="income")
