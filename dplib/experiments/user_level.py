"""Chapter 13's user-level utility sweep: what capping and clipping per writer costs in accuracy.

**Data** (:func:`writer_split`): :func:`dplib.user_data.make_user_digits` writes
:data:`N_WRITERS` = 179 writers × :data:`RECORDS` = 10 digits each (1,790 records, so no two
writers share a digit image: the pool holds 1,797), ``style=0`` (each writer's own ink gain,
one-pixel offset and pixel noise, without the signature pattern, which leaves too little for a
small model to learn from 140 writers), data seed 0. The first :data:`N_TRAIN` = 140 writers
are the private training set, the other 39 (390 digits) the test set: accuracy is measured on
writers the model never saw.

**Runs** (:func:`user_level_run`). A multi-layer perceptron 64 → 64 → 10 (tanh;
:func:`dplib.training.make_mlp`, initialised from the training seed) trained with DP-SGD at
the fixed settings :data:`SETTINGS` (q = 0.5, T = 100 steps, learning rate 1, C = 1; the same
for every row, chosen by hand after a few trial runs that looked at the test writers). σ is calibrated by the RDP accountant so that (σ, q, T) is
(ε, δ = 10⁻⁵)-DP (:func:`dplib.accounting.calibrate_noise`). Two runs share that σ, q and T:

* ``"user"``: user-level DP-SGD, :func:`dplib.training.train` with ``user_ids`` and
  ``records_per_user=cap`` — each writer keeps at most ``cap`` records (chosen at random before
  training), writers are Poisson-sampled at rate q, a writer's gradient is the mean over its
  kept records, clipped to C as one (McMahan, Ramage, Talwar & Zhang 2018, Algorithm 1 with one
  local step; the user-level sampling of Charles et al. 2024). Its ε is about one WRITER.
* ``"record"``: record-level DP-SGD on the same capped records (the same random subset: drawn
  as ``train`` draws it from the seed), records Poisson-sampled at rate q and clipped one by
  one. Its ε is about one RECORD; for a writer with ``cap`` records it guarantees only the
  group-privacy ε (:func:`dplib.training.user_level.group_epsilon`; Dwork & Roth 2014,
  Thm 2.2) or, tightly, the example-level-sampling ε of
  :func:`dplib.accounting.els.els_user_epsilon` (Ganesh 2024; Charles et al. 2024).

With ``cap = 1`` the two runs are the same algorithm on the same records (one record per
writer), so their accuracies coincide. ``epsilon=None``: the same runs without noise (σ = 0,
the same clipping and batches; ε = ∞), the ceiling of each unit at these settings.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from .._common_params import PATH_OR_NONE, POSITIVE, SEED, int_range
from .._constraints import Custom, Integer, Options, constrained
from .._validate import shown
from ._finetune_params import EPSILON_OR_NONE, epsilon_list

__all__ = ["CAPS", "EPSILONS", "DELTA", "SETTINGS", "N_WRITERS", "N_TRAIN", "RECORDS", "UNITS",
           "USER_LEVEL_TABLE", "writer_split", "user_level_run", "unit_privacy",
           "user_level_table", "load_user_level_table", "user_level_accuracy",
           "user_level_privacy"]

#: Records kept per writer in the sweep (the contribution bound).
CAPS = (1, 2, 5, 10)
#: ε of the sweep, at δ = :data:`DELTA` (for the record-level run: per record).
EPSILONS = (1.0, 3.0, 8.0)
DELTA = 1e-5
#: Fixed DP-SGD settings of every run (sample rate over writers or records, steps, learning rate,
#: clipping norm); set by hand once, the same for every cap, ε, unit and seed.
SETTINGS = dict(sample_rate=0.5, steps=100, lr=1.0, max_grad_norm=1.0)
N_WRITERS, N_TRAIN, RECORDS = 179, 140, 10
HIDDEN = (64,)
#: The privacy units compared.
UNITS = ("user", "record")
#: Where ``benchmarks/user_level_utility.py`` stores the sweep.
USER_LEVEL_TABLE = Path(__file__).resolve().parents[1] / "data" / "user_level_utility.json"

_CAP = int_range(1, RECORDS)
_UNIT = Options(*UNITS)
_ROW_KEYS = {"unit": str, "cap": int, "epsilon": (float, type(None)), "seed": int,
             "accuracy": float, "noise_multiplier": float}
_PRIV_KEYS = {"epsilon": float, "cap": int, "noise_multiplier": float, "user_epsilon": float,
              "group_epsilon": float, "els_epsilon": float}


def _caps(name: str, value: object) -> tuple:
    if not isinstance(value, (tuple, list)) or not value or any(
            isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= RECORDS
            for c in value):
        raise ValueError(f"{name} must be a non-empty tuple of integers in [1, {RECORDS}], got "
                         f"{shown(value)}")
    return value


def _check_table(name: str, value: object) -> dict:
    """A stored sweep: a dict with 'rows' (each with _ROW_KEYS of their types, unit in UNITS,
    accuracy in [0, 1]), 'privacy' (each with _PRIV_KEYS) and a 'provenance' dict."""
    def bad(why: str) -> ValueError:
        return ValueError(f"{name} must be a stored user-level sweep ({why}), got "
                          f"{shown(value)}"[:300])
    if not isinstance(value, dict):
        raise bad("a dict")
    for key, kind in (("rows", list), ("privacy", list), ("provenance", dict)):
        if not isinstance(value.get(key), kind):
            raise bad(f"'{key}' must be a {kind.__name__}")
    for part, keys in (("rows", _ROW_KEYS), ("privacy", _PRIV_KEYS)):
        for r in value[part]:
            if not isinstance(r, dict) or any(
                    k not in r or not isinstance(r[k], t) or isinstance(r[k], bool)
                    for k, t in keys.items()):
                raise bad(f"every entry of '{part}' must have {sorted(keys)} of the right types")
    for r in value["rows"]:
        if r["unit"] not in UNITS or not 0.0 <= r["accuracy"] <= 1.0 or not 1 <= r["cap"]:
            raise bad("a row with unit in ('user', 'record'), accuracy in [0, 1] and cap >= 1")
    return value


_TABLE = Custom(_check_table, "a stored user-level sweep (dict with 'rows', 'privacy', "
                "'provenance')", [None, 3, "abc", [], {}, {"rows": [], "privacy": []}])


@constrained(seed=SEED)
def writer_split(*, seed: int) -> tuple:
    """The sweep's data (module docstring): ((X, y, writer ids) of the :data:`N_TRAIN` training
    writers, (X, y) of the other writers), tensors X [n, 64] float32, y [n] int64, ids a numpy
    int64 array. ``seed``: :func:`~dplib.user_data.make_user_digits`' generator."""
    import torch

    from ..user_data import make_user_digits
    x, y, uid = make_user_digits(N_WRITERS, RECORDS, rng=seed, style=0.0)
    tr = uid < N_TRAIN
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return (xt[tr], yt[tr], uid[tr]), (xt[~tr], yt[~tr])


def _sigma(epsilon: float | None) -> float:
    if epsilon is None:
        return 0.0
    from ..accounting import calibrate_noise
    return float(calibrate_noise(epsilon, DELTA, SETTINGS["sample_rate"], SETTINGS["steps"],
                                 "rdp"))


def _check_data(name: str, value: object) -> tuple:
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple)
            and len(value[0]) == 3 and isinstance(value[1], tuple) and len(value[1]) == 2):
        raise ValueError(f"{name} must be writer_split()'s ((X, y, ids), (X, y)), got "
                         f"{shown(value)}"[:200])
    return value


_DATA = Custom(_check_data, "writer_split()'s ((X, y, ids), (X, y))",
               [None, 3, "abc", (), ((1, 2), (3, 4))])


@constrained(data=_DATA, unit=_UNIT, cap=_CAP, epsilon=EPSILON_OR_NONE, seed=SEED)
def user_level_run(data: tuple, unit: str, cap: int, epsilon: float | None, *,
                   seed: int) -> dict:
    """One run of the sweep on ``data`` = :func:`writer_split`'s output: an MLP trained with
    DP-SGD at :data:`SETTINGS`, σ calibrated to (``epsilon``, :data:`DELTA`) for (q, T) by the
    RDP accountant (None: σ = 0), at the privacy ``unit`` ("user": writers sampled, at most
    ``cap`` records each, each writer's mean gradient clipped as one; "record": records of the
    same capped subset sampled and clipped one by one), training seed ``seed``. Returns
    ``{"unit", "cap", "epsilon", "seed", "accuracy" (on the test writers), "noise_multiplier",
    "records" (training records used)}``."""
    import torch

    from ..training import evaluate, make_mlp, train
    from ..training.user_level import cap_records
    (x, y, uid), (x_te, y_te) = data
    sigma = _sigma(epsilon)
    s = SETTINGS
    model = make_mlp(64, 10, HIDDEN, seed=seed)
    fit = dict(sample_rate=s["sample_rate"], steps=s["steps"], lr=s["lr"],
               max_grad_norm=s["max_grad_norm"], noise_multiplier=sigma, delta=DELTA,
               seed=seed, eval_every=10 ** 9)
    # the subset each writer keeps: drawn as train() draws it for a user-level run with this seed
    kept = cap_records(uid, cap, rng=np.random.default_rng([seed, 1]))
    if unit == "user":
        train(model, (x, y), user_ids=uid, records_per_user=cap, **fit)
    else:
        idx = torch.from_numpy(kept)
        train(model, (x[idx], y[idx]), **fit)
    return {"unit": unit, "cap": cap, "epsilon": epsilon, "seed": seed,
            "accuracy": float(evaluate(model, x_te, y_te)), "noise_multiplier": sigma,
            "records": int(kept.size)}


@constrained(epsilon=POSITIVE, cap=_CAP)
def unit_privacy(epsilon: float, cap: int) -> dict:
    """What the two runs at ``epsilon`` guarantee a writer with ``cap`` records, for the σ of
    :func:`user_level_run`: ``user_epsilon`` (the user-level run: ``epsilon`` itself, by the RDP
    accountant that calibrated σ; McMahan et al. 2018), ``group_epsilon`` (the record-level run
    by the group lemma at δ, :func:`dplib.training.user_level.group_epsilon`; inf: no group ε at
    δ) and ``els_epsilon`` (the record-level run by the tight example-level-sampling analysis,
    :func:`dplib.accounting.els.els_user_epsilon`, by PLD; Ganesh 2024, Charles et al. 2024)."""
    from ..accounting.els import els_user_epsilon
    from ..training.user_level import compare_privacy_units
    sigma = _sigma(epsilon)
    q, t = SETTINGS["sample_rate"], SETTINGS["steps"]
    c = compare_privacy_units(sigma, q, t, DELTA, cap)
    return {"epsilon": epsilon, "cap": cap, "noise_multiplier": sigma,
            "user_epsilon": float(c.epsilon), "group_epsilon": float(c.group_epsilon_at_delta),
            "els_epsilon": float(els_user_epsilon(sigma, q, cap, t, DELTA))}


@constrained(seeds=Integer(min=1), caps=Custom(_caps, f"a tuple of integers in [1, {RECORDS}]",
                                               [(), (0,), (RECORDS + 1,), (2.5,), 3, None]),
             epsilons=epsilon_list(none_allowed=True))
def user_level_table(*, seeds: int, caps: tuple = CAPS,
                     epsilons: tuple = (*EPSILONS, None)) -> dict:
    """Every unit at every cap and ε (None: no noise) for training seeds 0, …, ``seeds`` − 1 on
    :func:`writer_split` (seed 0). Returns ``{"rows": [:func:`user_level_run` results],
    "privacy": [:func:`unit_privacy` for every cap and finite ε], "settings", "delta", "caps",
    "epsilons", "seeds", "n_train_writers", "n_test_writers", "records_per_writer", "hidden",
    "data_seed", "style"}``."""
    data = writer_split(seed=0)
    rows = [user_level_run(data, unit, cap, eps, seed=s)
            for eps in epsilons for cap in caps for unit in UNITS for s in range(seeds)]
    privacy = [unit_privacy(eps, cap) for eps in epsilons if eps is not None for cap in caps]
    return {"rows": rows, "privacy": privacy, "settings": dict(SETTINGS), "delta": DELTA,
            "caps": list(caps), "epsilons": list(epsilons), "seeds": seeds,
            "n_train_writers": N_TRAIN, "n_test_writers": N_WRITERS - N_TRAIN,
            "records_per_writer": RECORDS, "hidden": list(HIDDEN), "data_seed": 0, "style": 0.0}


@constrained(path=PATH_OR_NONE)
def load_user_level_table(path: str | None = None) -> dict:
    """The stored sweep of ``benchmarks/user_level_utility.py`` (default
    :data:`USER_LEVEL_TABLE`), checked: a ``ValueError`` naming ``path`` when the file is missing,
    is not JSON or does not hold a sweep (rows with unit, cap, ε, seed, accuracy in [0, 1] and σ;
    privacy entries; provenance)."""
    import json
    p = USER_LEVEL_TABLE if path is None else Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing JSON file, got {shown(str(p))}")
    try:
        table = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"path must hold JSON, got {shown(str(p))} ({err})") from None
    return _check_table("path", table)


@constrained(table=_TABLE, unit=_UNIT, cap=_CAP, epsilon=EPSILON_OR_NONE)
def user_level_accuracy(table: dict, unit: str, cap: int,
                        epsilon: float | None) -> tuple[float, float]:
    """Mean and standard deviation over seeds (in %) of the ``unit`` runs at ``cap`` and
    ``epsilon`` (None: no noise) in ``table``."""
    acc = [100 * r["accuracy"] for r in table["rows"]
           if r["unit"] == unit and r["cap"] == cap and r["epsilon"] == epsilon]
    if not acc:
        raise ValueError(f"cap and epsilon must be in the table's sweep (caps {table.get('caps')}, "
                         f"epsilons {table.get('epsilons')}), got cap={cap}, "
                         f"epsilon={shown(epsilon)}")
    return statistics.mean(acc), (statistics.stdev(acc) if len(acc) > 1 else 0.0)


@constrained(table=_TABLE, cap=_CAP, epsilon=POSITIVE)
def user_level_privacy(table: dict, cap: int, epsilon: float) -> dict:
    """The stored :func:`unit_privacy` entry of ``table`` at ``cap`` and ``epsilon``."""
    found = [p for p in table["privacy"] if p["cap"] == cap and p["epsilon"] == epsilon]
    if not found:
        raise ValueError(f"cap and epsilon must be in the table's sweep (caps {table.get('caps')}, "
                         f"finite epsilons), got cap={cap}, epsilon={shown(epsilon)}")
    return found[0]
