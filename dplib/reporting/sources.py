"""The builders of :func:`dplib.reporting.privacy_report`: one per kind of private result, and
one for events and accountants. Every field is read from the run (see the package docstring)."""
from __future__ import annotations

import copy
import math

from .._constraints import unconstrained
from .._validate import check_choice, check_int, shown
from ..accounting import (Accountant, DpEvent, accountant_names, check_delta, dpsgd_event,
                          group_privacy, make_accountant)
from ._parts import (FLOAT_NOISE, HYPER_SEARCH, NEIGHBORING_TEXT, NOT_PRIVATE, PUBLIC_DATA,
                     SEED_WARNING, accountant_version, check_batches, close, history,
                     neighboring_of, one_shot, registry_name, seed_fixed_of)
from .statement import PRIVACY_UNITS, PrivacyReport, PureDPEvent

__all__ = ["privacy_report"]

_FACTS = ("delta", "accountant", "neighboring", "privacy_unit", "records_per_user", "batches",
          "mechanism")


@unconstrained("dispatches on the type of result_or_event; its public facts arrive as "
               "**public_facts and are each checked in the body against what the run records")
def privacy_report(result_or_event: object, **public_facts: object) -> PrivacyReport:
    """The privacy statement of a private result, an accountant or an event.

    ``result_or_event``: a result of a dplib trainer or mechanism (``TrainResult``,
    ``EncodedTrainResult``, ``BatchedModels``, ``SGLDResult``, ``DPICLResult``, ``SVTResult``,
    ``PTRResult``), an :class:`~dplib.accounting.Accountant` with its recorded events, or a
    :class:`~dplib.accounting.DpEvent` (a one-shot mechanism: :class:`GaussianEvent`,
    :class:`LaplaceEvent`, :class:`PureDPEvent`, or a composed run).

    ``public_facts`` — only what the run cannot know:

    * ``delta``, ``accountant`` (a registry name or an Accountant; default "rdp") and
      ``neighboring`` ("add_remove" or "replace_one", default "add_remove"): for an event only
      (a result and an accountant carry their own);
    * ``privacy_unit`` (one of :data:`PRIVACY_UNITS`) and ``records_per_user``: echoed and
      flagged; a record-level run reported for a user with k records states the group-privacy
      bound (kε, δ(e^{kε} − 1)/(e^ε − 1)) (:func:`dplib.accounting.group_privacy`);
    * ``batches`` (one of :data:`BATCHES`): how the batches were really formed, e.g. by a
      caller's own loop around a dplib accountant; a Poisson-accounted history with
      "fixed_size", "shuffled" or "full" batches is refused (``ValueError``): Poisson
      amplification does not hold for them;
    * ``mechanism``: a name for the mechanism (events only).

    A fixed seed (read from the run's configuration, or a recorded seed below 2³², which 63 fresh
    bits of OS entropy give with probability 2⁻³¹) is reported ``seed_fixed=True`` with a warning.
    """
    unknown = sorted(set(public_facts) - set(_FACTS))
    if unknown:
        raise ValueError(f"public_facts: unknown fact {shown(unknown[0])}; allowed: "
                         f"{list(_FACTS)}")
    facts = dict(public_facts)
    kind = type(result_or_event).__name__
    builders = {"TrainResult": _from_dpsgd, "EncodedTrainResult": _from_dpsgd,
                "BatchedModels": _from_batched, "SGLDResult": _from_sgld,
                "DPICLResult": _from_icl, "SVTResult": _from_svt, "PTRResult": _from_ptr}
    if isinstance(result_or_event, (DpEvent, Accountant)):
        fields = _from_event(result_or_event, facts)
    elif kind in builders:
        own = [k for k in ("delta", "accountant", "neighboring", "mechanism") if k in facts]
        if own:
            raise ValueError(f"{own[0]}: a {kind} carries its own {own[0]}; it is read from the "
                             f"run, not typed, got {shown(facts[own[0]])}")
        fields = builders[kind](result_or_event, facts)
    else:
        raise ValueError(f"result_or_event must be a private result of dplib, an Accountant or a "
                         f"DpEvent, got {type(result_or_event).__name__}")
    return _finish(fields, facts)


def _finish(f: dict, facts: dict) -> PrivacyReport:
    from .. import __version__
    warnings = list(f.pop("warnings", []))
    not_covered = list(f.pop("not_covered", []))
    caller = []
    unit = f.pop("unit", "record")
    stated = facts.get("privacy_unit")
    k = facts.get("records_per_user")
    if k is not None:
        k = check_int("records_per_user", k)
        caller.append(("records_per_user", str(k)))
    if stated is not None:
        check_choice("privacy_unit", stated, PRIVACY_UNITS)
        caller.append(("privacy_unit", stated))
        if stated != unit:
            msg = (f"privacy unit stated by the caller as {stated!r}, but the run's guarantee is "
                   f"for one {unit}")
            if unit == "record" and k is not None and math.isfinite(f["epsilon"]):
                ge, gd = group_privacy(f["epsilon"], f["delta"], k)
                msg += (f"; a {stated} with up to {k} records is protected only by group privacy:"
                        f" ({ge:.4g}, {gd:.3g})-DP (group privacy, dplib.accounting.group_privacy)"
                        + ("; with δ ≥ 1 this bound says nothing" if gd >= 1 else ""))
            elif unit == "record":
                msg += (f"; a {stated} with several records is protected only by group privacy "
                        "(pass records_per_user to state the bound)")
            warnings.append(msg)
    elif unit == "record":
        not_covered.append("people with several records: the unit is one record; a person with k "
                           "records is protected only by group privacy (about kε)")
    if "batches" in facts:
        caller.append(("batches", str(facts["batches"])))
    if f["seed_fixed"]:
        warnings.append(SEED_WARNING)
    unit_text = unit if stated is None or stated == unit else f"{unit} (caller: {stated})"
    rel = f.pop("neighboring")
    neighboring = NEIGHBORING_TEXT.get(rel, rel).format(unit=unit)
    return PrivacyReport(privacy_unit=unit_text, neighboring=neighboring,
                         dplib_version=__version__, not_covered=tuple(not_covered),
                         warnings=tuple(warnings), caller_facts=tuple(caller),
                         filled_from=tuple(f.pop("filled_from", {}).items()), **f)


def _accounted(acc: Accountant, result: object, facts: dict) -> tuple[dict, float]:
    hist = history(acc)
    check_batches(facts, hist)
    eps = float(acc.get_epsilon(result.delta))
    if not close(eps, float(result.epsilon)):
        raise ValueError(f"result_or_event: its epsilon {result.epsilon!r} is not what its own "
                         f"accountant gives at delta={result.delta!r} ({eps!r}): a field was "
                         "changed after the run")
    if hist["steps"] != result.steps and not (hist["cyclic"] or hist["banded"]):
        raise ValueError(f"result_or_event: steps={result.steps} but its accountant recorded "
                         f"{hist['steps']}")
    return hist, eps


def _from_dpsgd(r: object, facts: dict) -> dict:
    """TrainResult (train, train_distributed) and EncodedTrainResult."""
    acc = r.accountant
    if not isinstance(acc, Accountant):
        raise ValueError("result_or_event: a non-private run (σ = 0, no accountant) has no "
                         "privacy statement")
    hist, eps = _accounted(acc, r, facts)
    cfg = getattr(r, "config", None)
    encoded = type(r).__name__ == "EncodedTrainResult"
    if cfg is not None:
        corr = getattr(cfg, "noise_correlation", "independent")
        if corr in ("tree", "sqrt", "optimal") and hist["poisson"]:
            raise ValueError(f"result_or_event: the configuration says cyclic fixed batches "
                             f"(noise_correlation={corr!r}) but the accountant assumed Poisson "
                             f"sampling ({hist['sampler']})")
        if corr == "independent" and (hist["cyclic"] or hist["banded"]):
            raise ValueError("result_or_event: the configuration says independent DP-SGD on "
                             "Poisson batches but the accountant recorded a matrix mechanism")
        if not close(float(cfg.sample_rate), float(r.sample_rate)):
            raise ValueError(f"result_or_event: config.sample_rate={cfg.sample_rate!r} differs "
                             f"from the result's sample_rate={r.sample_rate!r}")
    if not (hist["cyclic"] or hist["banded"]) and not encoded:
        if hist["q"] is None or not close(hist["q"], float(r.sample_rate)):
            raise ValueError(f"result_or_event: sample_rate={r.sample_rate!r} but its "
                             f"accountant recorded {hist['sampler']}")
    secure = cfg is not None and getattr(cfg, "noise", "float") == "secure"
    not_covered = []
    ebs = getattr(cfg, "expected_batch_size", "unknown") if cfg is not None else "unknown"
    if ebs is None:
        not_covered.append("the data-set size n: the noisy sum was divided by q·n "
                           "(expected_batch_size=None), which treats n as public")
    elif ebs == "unknown":
        not_covered.append("the data-set size n, unless a public expected_batch_size was passed "
                           "(this result does not record it): q·n treats n as public")
    not_covered += [HYPER_SEARCH, PUBLIC_DATA, NOT_PRIVATE]
    if secure:
        noise = "secure (exact discrete Gaussian on a lattice, CSPRNG)"
        if hist["poisson"]:
            not_covered.append("secure noise under Poisson subsampling: the subsampled-Gaussian "
                               "bound at the widened σ is a close approximation, not a proof")
    else:
        noise = "float (torch.randn)" if not encoded else f"float ({type(r.noise).__name__})"
        not_covered.append(FLOAT_NOISE)
    seed_fixed, seed_from = seed_fixed_of(r)
    unit = getattr(r, "privacy_unit", "record") or "record"
    per = getattr(r, "records_per_user", None)
    name = ("gradient encoding, Nasr, Shokri & Houmansadr 2020, Alg. 1" if encoded else
            "DP-SGD (Abadi et al. 2016, Alg. 1)" if not (hist["cyclic"] or hist["banded"]) else
            _mf_name(acc, cfg))
    if unit == "user":
        name += f", user-level: each sampled user's gradient clipped as one (≤ {per} records)"
    sigma = None if encoded else float(r.noise_multiplier)
    return {"mechanism": name, "unit": unit, "neighboring": neighboring_of(acc, hist),
            "sampler": hist["sampler"], "accountant": registry_name(acc),
            "accountant_version": accountant_version(acc), "epsilon": eps,
            "delta": float(r.delta), "rho": hist["rho"], "steps": int(r.steps),
            "noise_multiplier": sigma, "sample_rate": float(r.sample_rate),
            "max_grad_norm": None if encoded else float(r.max_grad_norm),
            "seed_fixed": seed_fixed, "noise": noise,
            "covers": "every intermediate model and the final one (each step's noisy gradient)",
            "not_covered": not_covered,
            "filled_from": {"neighboring": "result.accountant.neighboring",
                            "sampler": "result.accountant.events", "epsilon":
                            "result.accountant.get_epsilon(result.delta)",
                            "seed_fixed": seed_from, "privacy_unit": "result.privacy_unit"
                            if hasattr(r, "privacy_unit") else "dplib trainers are record-level"}}


def _mf_name(acc: Accountant, cfg: object) -> str:
    ev = acc.events[0]
    sens = float(getattr(ev, "sensitivity", 1.0))
    return (f"DP-MF, noise_correlation={getattr(cfg, 'noise_correlation', '?')}: noise "
            f"correlated by the factorisation, whose sensitivity {sens:.4g} (under the run's "
            f"participations) leaves the noise multiplier σ/{sens:.4g} = "
            f"{ev.noise_multiplier / sens:.4g} (Denisov et al. 2022, Thm 2.1)")


def _from_batched(r: object, facts: dict) -> dict:
    """BatchedModels: it records σ, q, T, δ, ε but not the accountant's name; the accountant is
    the registered one whose ε for (σ, q, T) reproduces the result's ε."""
    run = dpsgd_event(r.noise_multiplier, r.sample_rate, r.steps)
    names = [n for n in accountant_names() if make_accountant(n).supports(run)
             and close(float(make_accountant(n).compose(run).get_epsilon(r.delta)),
                       float(r.epsilon))]
    if not names:
        raise ValueError(f"result_or_event: no registered accountant gives its epsilon "
                         f"{r.epsilon!r} for its (σ, q, T, δ): a field was changed after the run")
    acc = make_accountant(names[0]).compose(run)
    out = _from_dpsgd(_Shim(r, acc), facts)
    out["mechanism"] = f"DP-SGD, a stack of {r.num_models} models (one guarantee per model)"
    out["filled_from"]["accountant"] = "the registered accountant reproducing result.epsilon"
    return out


class _Shim:
    """A BatchedModels seen with an accountant (the one that reproduces its ε)."""

    def __init__(self, r: object, acc: Accountant) -> None:
        self._r, self.accountant = r, acc

    def __getattr__(self, name: str):
        return getattr(self._r, name)


def _from_sgld(r: object, facts: dict) -> dict:
    if r.accountant == "none" or not math.isfinite(r.epsilon):
        raise ValueError("result_or_event: a DP-SGLD run without noise (σ = 0) has no privacy "
                         "statement")
    full = r.accountant == "theorem_3_1" and r.proved     # proved only for m = n
    check_batches(facts, None)
    if facts.get("batches") == "poisson":
        raise ValueError("batches='poisson': DP-SGLD draws fixed-size batches of batch_size "
                         "records without replacement")
    warnings = []
    if not r.proved:
        warnings.append("ε rests on Theorem 3.1 of Ryffel et al. (2022) with batches smaller "
                        "than n, where it is unproved (dplib.langevin.counterexample)")
    acc = {"theorem_3_1": "Ryffel, Bach & Pointcheval 2022, Thm 3.1",
           "released_iterates": "released iterates: subsampled Gaussian without replacement "
                                "(Wang, Balle & Kasiviswanathan 2019), composed"}[r.accountant]
    seed_fixed, seed_from = seed_fixed_of(r)
    return {"mechanism": "DP-SGLD (Ryffel, Bach & Pointcheval 2022, Alg. 1)", "unit": "record",
            "neighboring": "replace_one",
            "sampler": ("full batch (every record in every step)" if full else
                        f"fixed-size batches of {r.batch_size} records drawn uniformly without "
                        "replacement, fresh every step"),
            "accountant": r.accountant, "accountant_version": accountant_version(None,
                                                                                 f", {acc}"),
            "epsilon": float(r.epsilon), "delta": float(r.delta), "rho": None,
            "steps": int(r.steps), "noise_multiplier": float(r.sigma), "sample_rate": None,
            "max_grad_norm": None, "seed_fixed": seed_fixed, "noise": "float (torch.randn)",
            "covers": ("the final iterate only" if r.accountant == "theorem_3_1" else
                       "every iterate (so also the final one)"),
            "not_covered": ["the data-set size n (public under replace-one)", HYPER_SEARCH,
                            PUBLIC_DATA, FLOAT_NOISE],
            "warnings": warnings,
            "filled_from": {"accountant": "result.accountant", "seed_fixed": seed_from}}


_NO_RNG = ("the run does not record its randomness (rng): whether it was fixed cannot be read "
           "from the result")


def _from_icl(r: object, facts: dict) -> dict:
    """DPICLResult: Q queries, each a (Poisson-subsampled) Gaussian on the vote histogram of ℓ2
    sensitivity √2 (:mod:`dplib.icl.accounting`), or a pure ε₀ report-noisy-max composed by the
    optimal composition theorem (Kairouz, Oh & Viswanath 2015, Thm 3.3)."""
    info = r.info
    if not math.isfinite(r.epsilon):
        raise ValueError("result_or_event: the non-private ensemble (epsilon = inf) has no "
                         "privacy statement")
    sampler, qn = info.get("sampler", "poisson"), int(info["num_queries"])
    rnm = info.get("aggregator") == "rnm"
    poisson = sampler == "poisson" and r.sample_rate < 1.0 and not rnm
    hist = {"poisson": poisson, "sampler": f"Poisson sampling at rate q = {r.sample_rate:.4g}",
            "leaves": []}
    check_batches(facts, hist)
    sigma, rho = None, None
    if rnm:
        acc = "optimal composition"
        version = accountant_version(None, f", Kairouz, Oh & Viswanath 2015, Thm 3.3 over {qn} "
                                           "report-noisy-max queries")
        rho = qn * info["epsilon_per_query"] ** 2 / 2.0
    else:
        acc = info.get("accountant", "rdp")
        sigma = float(r.noise_std) / math.sqrt(2.0)          # per unit of the √2 sensitivity
        accountant = make_accountant(acc).compose(dpsgd_event(sigma, r.sample_rate, qn))
        spent = float(accountant.get_epsilon(r.delta))
        if spent > r.epsilon * (1 + 1e-6) + 1e-12:
            raise ValueError(f"result_or_event: its noise gives epsilon {spent!r} > its stated "
                             f"{r.epsilon!r} under {acc!r}: a field was changed after the run")
        version = accountant_version(accountant)
        rho = history(accountant)["rho"]
    return {"mechanism": f"DP in-context learning (Wu et al. 2024), {info['num_subsets']} subsets"
                         f" of {info['shots']} exemplars, {info['aggregator']} aggregation",
            "unit": "record", "neighboring": "add_remove" if sampler == "poisson"
            else "replace_one",
            "sampler": (hist["sampler"] + ", each query" if sampler == "poisson" else
                        "one fixed partition reused by every query (n public)"),
            "accountant": acc, "accountant_version": version,
            "epsilon": float(r.epsilon), "delta": float(r.delta), "rho": rho, "steps": qn,
            "noise_multiplier": sigma, "sample_rate": float(r.sample_rate),
            "max_grad_norm": None, "seed_fixed": None, "noise": "float (numpy)",
            "covers": "the predictions (and the noisy histogram) of all num_queries queries",
            "not_covered": ["result.votes: the ensemble's raw votes, not private", HYPER_SEARCH,
                            "the pool size n when the default rate M·shots/n was used",
                            FLOAT_NOISE],
            "warnings": [_NO_RNG],
            "filled_from": {"accountant": "result.info['accountant']",
                            "sampler": "result.info['sampler']",
                            "epsilon": "result.epsilon, checked against its accountant"}}


def _from_svt(r: object, facts: dict) -> dict:
    check_batches(facts, None)
    warnings = [_NO_RNG]
    if not close(r.claimed_epsilon, r.actual_epsilon):
        warnings.append(f"variant {r.variant!r} claims ε = {r.claimed_epsilon:g} but is "
                        f"{r.actual_epsilon:g}-DP (Lyu, Su & Li 2017); the actual ε is reported")
    return one_shot(f"sparse vector technique, variant {r.variant}", float(r.actual_epsilon),
                     0.0, "one record changes every query answer by at most the sensitivity",
                     "SVT variant analysis", "Lyu, Su & Li 2017", None,
                     ["which queries were asked: they must be fixed without the private data"],
                     warnings)


def _from_ptr(r: object, facts: dict) -> dict:
    check_batches(facts, None)
    return one_shot("propose-test-release median (Dwork & Lei 2009)", float(r.epsilon_total),
                     float(r.delta), "replace_one", "PTR theorem",
                     "Dwork & Roth 2014, Sec. 7.3 (2ε, δ)", None,
                     ["the data-set size n (public under replace-one)", "the proposed bound "
                      "and the data range: chosen without the private data"], [_NO_RNG])


_PURE_TEXT = {
    "randomized_response": ("randomized response (Warner 1965)",
                            "local: any two answers of one person (each answers for themselves)"),
    "exponential": ("exponential mechanism (McSherry & Talwar 2007)",
                    "data sets on which every utility score differs by at most its sensitivity"),
    "report_noisy_max": ("report noisy max (Dwork & Roth 2014, Sec. 3.3)",
                         "data sets on which every score differs by at most its sensitivity")}


def _from_event(obj: object, facts: dict) -> dict:
    if isinstance(obj, PureDPEvent):
        if "delta" in facts:
            check_delta(facts["delta"])
        check_batches(facts, None)
        name, rel = _PURE_TEXT[obj.mechanism]
        return one_shot(name, obj.epsilon, 0.0, rel, "pure ε-DP",
                        "the mechanism's own theorem (δ = 0)", None, [PUBLIC_DATA], [])
    if "delta" not in facts:
        raise ValueError("delta: a report of an event or an accountant needs delta, got None")
    delta = check_delta(facts["delta"])
    acc_in = facts.get("accountant", "rdp")
    if isinstance(obj, Accountant):
        if "accountant" in facts or "neighboring" in facts:
            raise ValueError("accountant: an Accountant carries its own accountant and "
                             "neighbouring relation; they are read from it, not typed")
        acc = obj
    else:
        rel = check_choice("neighboring", facts.get("neighboring", "add_remove"),
                           ("add_remove", "replace_one"))
        if isinstance(acc_in, Accountant):
            if acc_in.history:
                raise ValueError("accountant: pass a fresh Accountant (or a name) with an event; "
                                 "this one has recorded steps already")
            acc = copy.deepcopy(acc_in)
            if "neighboring" in facts and acc.neighboring != rel:
                raise ValueError(f"neighboring={rel!r} differs from the given accountant's "
                                 f"{acc.neighboring!r}")
        else:
            acc = make_accountant(check_choice("accountant", acc_in, accountant_names()),
                                  neighboring=rel)
        acc.compose(obj)
    hist = history(acc)
    check_batches(facts, hist)
    leaves = hist["leaves"]
    eps = float(acc.get_epsilon(delta))
    one = leaves[0] if len(leaves) == 1 else None
    name = facts.get("mechanism")
    if name is None:
        name = " + ".join(dict.fromkeys(
            (leaf.mechanism.__name__ if leaf.curve is None else type(leaf.curve).__name__)
            .replace("Event", " mechanism") for leaf in leaves))
    elif not isinstance(name, str) or not name:
        raise ValueError(f"mechanism must be a non-empty string, got {shown(name)}")
    gauss_or_lap = one is not None and one.curve is None
    tuned = any(type(leaf.curve).__name__ == "TunedRuns" for leaf in leaves)
    return {"mechanism": str(name), "unit": "record", "neighboring": neighboring_of(acc, hist),
            "sampler": hist["sampler"], "accountant": registry_name(acc),
            "accountant_version": accountant_version(acc), "epsilon": eps, "delta": delta,
            "rho": hist["rho"], "steps": hist["steps"],
            "noise_multiplier": one.noise_multiplier if gauss_or_lap else None,
            "sample_rate": one.sample_rate if gauss_or_lap else None, "max_grad_norm": None,
            "seed_fixed": None, "noise": "as drawn by the caller",
            "covers": ("every release of the event" + (
                ", including the random search over runs (Papernot & Steinke 2022, Thms 2 and 6)"
                if tuned else "")),
            "not_covered": ([] if tuned else [HYPER_SEARCH]) + [
                PUBLIC_DATA, "floating-point noise, unless the noise was drawn by an exact "
                "sampler (dplib.mechanisms.discrete, secure_noise)"],
            "filled_from": {"neighboring": "accountant.neighboring",
                            "sampler": "the event's sampled wrappers"}}
