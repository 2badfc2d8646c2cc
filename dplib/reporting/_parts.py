"""Helpers of :mod:`dplib.reporting`: what an accountant's history says (sampler, steps, σ, q,
ρ), the accountant's name and version, the checks of a stated batch sampler and of a fixed seed,
and the fixed sentences of the statements."""
from __future__ import annotations

import math

import numpy as np

from .._validate import check_choice, shown
from ..accounting import (Accountant, BandedMatrixMechanismEvent, DpEvent, GaussianEvent,
                          LaplaceEvent, MatrixMechanismEvent, accountant_names)
from ..accounting.events import flatten
from ..accounting.registry import accountant_class
from .statement import BATCHES

NEIGHBORING_TEXT = {"add_remove": "add/remove one {unit}", "replace_one": "replace one {unit}",
                     "zero_out": "zero-out one {unit} (its contributions replaced by zero)"}
FLOAT_NOISE = ("floating-point noise: the noise is drawn by floating-point samplers, which the "
               "attack of Mironov (2012) can see through; the guarantee is for exact real noise")
HYPER_SEARCH = ("hyper-parameter search: ε covers this one run; every other run tried on the "
                "same data adds to the cost (Papernot & Steinke 2022; dplib.selection.tuning)")
PUBLIC_DATA = ("pretraining and public data: only the private data given to this run are "
               "protected; pretrained weights, public features or data treated as public are not")
NOT_PRIVATE = ("the not_private diagnostics (realised batch sizes, clip fraction, training "
               "loss): computed from the data without noise, not covered by ε")
SEED_WARNING = ("the run's seed was fixed by the caller: with a known seed every batch and noise "
                "draw is a known function of public inputs, so this run is an experiment, not a "
                "private release")


def registry_name(acc: Accountant) -> str:
    for name in accountant_names():
        if accountant_class(name) is type(acc):
            return name
    return type(acc).__name__


def accountant_version(acc: Accountant | None, extra: str = "") -> str:
    from .. import __version__
    if acc is None:
        return f"dplib {__version__}{extra}"
    cls = type(acc)
    settings = []
    if hasattr(acc, "conversion"):
        orders = np.asarray(acc.orders)
        settings.append(f"conversion={acc.conversion}, {orders.size} orders in "
                        f"[{orders.min():g}, {orders.max():g}]")
    if hasattr(acc, "h"):
        settings.append(f"value_discretization_interval={acc.h:g}")
    own = getattr(acc, "version", None)
    return (f"dplib {__version__}, {cls.__module__}.{cls.__qualname__}"
            + (f" {own}" if own else "") + (f" ({'; '.join(settings)})" if settings else ""))


def leaf_rho(leaf, neighboring: str) -> float | None:
    """ρ-zCDP of one flattened leaf, None when it has none here: a Gaussian without subsampling
    ρ = 1/(2σ_Δ²) (Bun & Steinke 2016, Prop. 1.6), a Laplace without subsampling is (1/σ_Δ)-DP,
    so ρ = 1/(2σ_Δ²) too (their Prop. 3.3: ε-DP implies ε²/2-zCDP), σ_Δ the noise over the
    relation's sensitivity (half of σ under replace-one); a curve event that states its ρ. The
    count adds up (their Lemma 2.3)."""
    if leaf.curve is not None:
        under = getattr(leaf.curve, "rho_under", None)      # ZCDPEvent: ρ under the relation
        rho = under(neighboring) if under is not None else getattr(leaf.curve, "rho", None)
        return None if rho is None else float(rho) * leaf.count
    if leaf.sample_rate < 1.0 or not issubclass(leaf.mechanism, (GaussianEvent, LaplaceEvent)):
        return None
    sigma = leaf.noise_multiplier / (2.0 if neighboring == "replace_one" else 1.0)
    return leaf.count / (2.0 * sigma ** 2)


def curve_poisson_rate(curve: object) -> float | None:
    """The Poisson rate q < 1 a curve event analyses, or None: its own ``sample_rate`` (e.g. the
    gradient encoding's step, Nasr et al. 2020, Lemma 4), or the Poisson leaves of the run it
    wraps (e.g. :class:`~dplib.selection.tuning.TunedRuns`)."""
    rate = getattr(curve, "sample_rate", None)
    if isinstance(rate, (int, float)) and rate < 1.0:
        return float(rate)
    inner = getattr(curve, "event", None)
    if isinstance(inner, DpEvent):
        rates = [leaf.sample_rate for leaf in flatten(inner)
                 if leaf.curve is None and leaf.sampling == "poisson" and leaf.sample_rate < 1.0]
        return float(rates[0]) if rates else None
    return None


def history(acc: Accountant) -> dict:
    """Sampler, steps, σ, q and ρ read from an accountant's recorded events."""
    leaves = list(acc.history)
    if not leaves:
        raise ValueError("result_or_event: its accountant has no recorded steps (a run without "
                         "noise has no privacy statement: ε = inf)")
    events = list(acc.events)
    cyclic = any(isinstance(e, MatrixMechanismEvent) for e in events)
    banded = [e for e in events if isinstance(e, BandedMatrixMechanismEvent)]
    kinds, curve_rates = [], []
    for leaf in leaves:
        rate = curve_poisson_rate(leaf.curve) if leaf.curve is not None else None
        curve_rates.append(rate)
        if leaf.curve is not None and rate is not None:
            kinds.append(f"Poisson sampling at rate q = {rate:.4g} (as analysed by "
                         f"{type(leaf.curve).__name__})")
        elif leaf.curve is not None:
            kinds.append(f"no subsampling ({type(leaf.curve).__name__} on the whole data set)")
        elif leaf.sample_rate == 1.0:
            kinds.append("full batch (every record in every step)")
        elif leaf.sampling == "poisson":
            kinds.append(f"Poisson sampling at rate q = {leaf.sample_rate:.4g}")
        else:
            kinds.append(f"fixed-size batches drawn uniformly without replacement, "
                         f"m/n = {leaf.sample_rate:.4g}")
    if cyclic:
        kinds = ["cyclic fixed batches (records split once into groups; no amplification "
                 "assumed)"]
    if banded:
        b = banded[0]
        kinds = [f"cyclic Poisson batches: {b.bands} fixed groups, each Poisson-sampled at "
                 f"rate {b.sample_rate:.4g} (Choquette-Choo et al. 2023, Thm 4)"]
    uniq = list(dict.fromkeys(kinds))
    rhos = [leaf_rho(leaf, acc.neighboring) for leaf in leaves]
    one = leaves[0] if len(leaves) == 1 and leaves[0].curve is None else None
    return {"sampler": "; ".join(uniq), "steps": int(sum(leaf.count for leaf in leaves)),
            "sigma": None if one is None else one.noise_multiplier,
            "q": None if one is None else one.sample_rate,
            "poisson": any(leaf.sampling == "poisson" and leaf.sample_rate < 1.0
                           and leaf.curve is None for leaf in leaves)
            or any(r is not None for r in curve_rates),
            "rho": None if any(r is None for r in rhos) else float(sum(rhos)),
            "cyclic": cyclic, "banded": bool(banded), "leaves": leaves}


def close(a: float, b: float) -> bool:
    return a == b or (math.isfinite(a) and math.isfinite(b)
                      and abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)))


def neighboring_of(acc: Accountant, hist: dict) -> str:
    return "zero_out" if hist["cyclic"] or hist["banded"] else acc.neighboring


def check_batches(facts: dict, hist: dict | None) -> None:
    batches = facts.get("batches")
    if batches is None:
        return
    check_choice("batches", batches, BATCHES)
    if hist is not None and hist["poisson"] and batches != "poisson":
        raise ValueError(f"batches={shown(batches)}: the accountant assumed Poisson sampling "
                         f"({hist['sampler']}), whose amplification does not hold for "
                         f"{batches} batches; account the run with the sampler it used (e.g. "
                         "SampledWithoutReplacementEvent under replace-one for fixed-size "
                         "batches, or no amplification for shuffled/cyclic ones)")
    if hist is not None and not hist["poisson"] and batches == "poisson" and \
            all(leaf.sample_rate == 1.0 for leaf in hist["leaves"]):
        return                          # full-batch accounting is valid for any batches
    if hist is not None and not hist["poisson"] and batches == "poisson":
        raise ValueError(f"batches={shown(batches)}: the accountant recorded "
                         f"{hist['sampler']}, not Poisson sampling")


def seed_fixed_of(result: object) -> tuple[bool | None, str]:
    cfg = getattr(result, "config", None)
    if cfg is not None and hasattr(cfg, "seed"):
        return cfg.seed is not None, "config.seed"
    seeds = getattr(result, "seeds", None)
    seed = getattr(result, "seed", None)
    vals = list(seeds) if seeds is not None else ([] if seed is None else [seed])
    if not vals:
        return None, "not recorded"
    return any(int(s) < 2 ** 32 for s in vals), "seed < 2**32 (fresh seeds have 63 bits)"


def one_shot(mechanism: str, eps: float, delta: float, rel: str, acc: str, version: str,
              sigma: float | None, not_covered: list, warnings: list) -> dict:
    return {"mechanism": mechanism, "unit": "record", "neighboring": rel,
            "sampler": "none (one release on the whole data set)", "accountant": acc,
            "accountant_version": accountant_version(None, f", {version}"), "epsilon": eps,
            "delta": delta, "rho": eps ** 2 / 2.0 if delta == 0 else None, "steps": 1,
            "noise_multiplier": sigma, "sample_rate": None, "max_grad_norm": None,
            "seed_fixed": None, "noise": "float (numpy)", "covers": "the released output",
            "not_covered": not_covered + [FLOAT_NOISE], "warnings": warnings}
