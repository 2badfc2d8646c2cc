"""Chapter 8's experiments (gradient encoding, :mod:`dplib.encoding`), in one place for the
notebook and ``benchmarks/encoding.py``.

* :func:`compare_on_digits` — DP-SGD vs Algorithm 1 (Gaussian, Student-t(9); with and without
  KS denoising) on scikit-learn's digits at matched ε and a fixed number of epochs (the paper's
  Figure 2 protocol: "constant number of iterations", noise varied to reach each ε). Every method
  gets the same data, model initialisation and Poisson batches; the learning rate of each method
  is chosen on the validation split, then test accuracy is averaged over fresh seeds.
* :func:`l1_versus_d2` — the ℓ1 distance between privatised and original gradient against the
  per-step Rényi divergence D₂, per noise family (the paper's Figure 6).
* :func:`encoding_throughput` — encoded vectors per second.

Privacy bookkeeping: all ε are computed over the integer orders 2…64 (Lemma 4 needs integer α),
for DP-SGD too, so the comparison is like for like; dplib.training's own accountant (which also
uses fractional orders) reports a slightly smaller ε for DP-SGD. Choosing the learning rate on
validation data is not accounted for, in the paper or here.
"""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from .._constraints import InstanceOf, Integer, Options, constrained
from ..accounting._params import COUNT, DELTA, POSITIVE, SAMPLE_RATE
from ..encoding import (INTEGER_ORDERS, Codebook, NoiseDistribution, StudentTNoise,
                        build_codebook, calibrate_noise_scale, codebook_rdp, encode, make_noise,
                        privatization_error, train_encoded)
from ..encoding._params import CODEBOOK as _CODEBOOK
from ..encoding._params import NOISE as _NOISE
from ..encoding._params import OPTIONAL_CALLABLE as _LOG
from ..tables import format_table as tables_format

__all__ = ["METHODS", "gaussian_sigma_for_epsilon", "digits_problem", "method_noise",
           "run_method", "compare_on_digits", "same_lr_control", "format_table", "l1_versus_d2",
           "encoding_throughput"]

#: Method names of :func:`compare_on_digits`, in table order.
METHODS = ("dpsgd", "alg1_gaussian", "alg1_gaussian_denoise", "alg1_student_t",
           "alg1_student_t_denoise")

_METHOD = Options(*METHODS)
_SEED = Integer(min=0)
_PROBLEM = InstanceOf(dict, "the dict digits_problem returns", bad=(None, [], "digits"))
_RESULT = InstanceOf(dict, "the dict compare_on_digits returns", bad=(None, [], "table"))


@constrained(target_epsilon=POSITIVE, delta=DELTA, sample_rate=SAMPLE_RATE, num_steps=COUNT)
def gaussian_sigma_for_epsilon(target_epsilon: float, delta: float, sample_rate: float,
                               num_steps: int) -> float:
    """The smallest σ (relative precision 1e-8, on the safe side) such that T steps of the
    Poisson-subsampled Gaussian are (ε, δ)-DP over integer orders 2…64
    (:class:`dplib.accounting.RDPAccountant` with ``INTEGER_ORDERS``): DP-SGD's noise in the
    comparison with Algorithm 1, accounted on the same orders."""
    from ..accounting import RDPAccountant, calibrate, dpsgd_event
    eps = target_epsilon
    lo, hi = 0.2, 200.0
    try:
        sigma = calibrate(lambda s: dpsgd_event(s, sample_rate, num_steps), eps, delta,
                          accountant=lambda: RDPAccountant(orders=INTEGER_ORDERS), rtol=1e-8,
                          guess=(lo, hi), floor=lo, ceiling=hi)
    except ValueError as err:
        if "needs scale >" not in str(err):
            raise
        sigma = lo
    if sigma <= lo:
        raise ValueError(f"target_epsilon={eps:g} is not reached for noise multipliers in "
                         f"[{lo:g}, {hi:g}]")
    return sigma


@constrained(n_codes=COUNT, batch_size=COUNT, seed=_SEED)
def digits_problem(*, hidden: tuple = (32,), n_codes: int = 1000, batch_size: int = 64,
                   seed: int = 0) -> dict:
    """Data (digits, seeded split), the model factory, the code book (standard-Gaussian draws as
    in the paper, norm 1) and q = batch_size / n_train."""
    from ..datasets import load_digits
    from ..training import make_mlp
    data = load_digits(seed=seed)
    n = int(data["train"][0].shape[0])

    def model(s=0):
        return make_mlp(64, 10, hidden=tuple(hidden), seed=s)
    d = sum(p.numel() for p in model().parameters())
    cb = build_codebook(n_codes, d, rng=seed)
    return {"data": data, "model": model, "codebook": cb, "dim": d, "n": n,
            "sample_rate": batch_size / n}


@constrained(method=_METHOD, sigma=POSITIVE, epsilon=POSITIVE, delta=DELTA,
             sample_rate=SAMPLE_RATE, steps=COUNT, codebook=_CODEBOOK, df=POSITIVE)
def method_noise(method: str, sigma: float, epsilon: float, delta: float, sample_rate: float,
                 steps: int, codebook: Codebook, *, df: float = 9.0) -> NoiseDistribution:
    """The noise a method uses at this ε: N(0, σ²) for DP-SGD and Algorithm 1 with Gaussian
    noise (the same ε by construction: norm-1 code vectors), and for Student-t the scale that
    gives the same ε under the code-book accountant (:func:`calibrate_noise_scale`)."""
    if "student_t" in method:
        return calibrate_noise_scale(StudentTNoise(df, sigma), epsilon, delta, sample_rate,
                                     steps, codebook, orders=INTEGER_ORDERS)
    return make_noise("gaussian", sigma)


@constrained(method=_METHOD, problem=_PROBLEM, noise=_NOISE, epochs=POSITIVE, lr=POSITIVE,
             seed=_SEED, delta=DELTA)
def run_method(method: str, problem: dict, noise: NoiseDistribution, *, epochs: float,
               lr: float, seed: int, delta: float = 1e-5, device=None) -> dict:
    """Train one model; returns validation and test accuracy, ε (integer orders), the mean and
    coefficient of variation of the KS factor, the fraction of coordinates the encoding
    changed, and the wall-clock time."""
    from ..accounting import RDPAccountant
    from ..training import evaluate, train
    data, q = problem["data"], problem["sample_rate"]
    model = problem["model"](seed)
    t0 = time.perf_counter()
    if method == "dpsgd":
        res = train(model, data["train"], sample_rate=q, lr=lr, epochs=epochs,
                    noise_multiplier=noise.scale, max_grad_norm=1.0, delta=delta,
                    device=device, seed=seed)
        eps = RDPAccountant(orders=INTEGER_ORDERS).step(
            noise_multiplier=noise.scale, sample_rate=q, num_steps=res.steps).get_epsilon(delta)
        ks_mean = ks_cv = clamped = math.nan
    else:
        res = train_encoded(model, data["train"], codebook=problem["codebook"], noise=noise,
                            sample_rate=q, lr=lr, epochs=epochs,
                            denoise=method.endswith("denoise"), delta=delta, device=device,
                            seed=seed, orders=INTEGER_ORDERS)
        eps = res.epsilon
        ks_mean = float(res.ks_factors.mean())
        ks_cv = float(res.ks_factors.std() / res.ks_factors.mean())
        clamped = res.not_private.clamped_fraction   # a diagnostic, not covered by ε
    return {"method": method, "lr": lr, "seed": seed, "epsilon": float(eps),
            "val_accuracy": evaluate(model, *data["val"], device=device),
            "test_accuracy": evaluate(model, *data["test"], device=device),
            "ks_mean": ks_mean, "ks_cv": ks_cv, "clamped": clamped, "steps": res.steps,
            "seconds": time.perf_counter() - t0}


@constrained(epochs=POSITIVE, batch_size=COUNT, seeds=COUNT, n_codes=COUNT, delta=DELTA,
             log=_LOG)
def compare_on_digits(*, epsilons=(2.0, 4.0, 8.0), epochs: float = 10, batch_size: int = 64,
                      seeds: int = 20, tune_seeds=(0, 100), hidden: tuple = (32,),
                      n_codes: int = 1000, lr_grid=(0.1, 0.25, 0.6, 1.5),
                      denoise_lr_grid=(5.0, 12.0, 30.0, 75.0), methods=METHODS,
                      delta: float = 1e-5, device=None,
                      log: Callable[[str], None] | None = None) -> dict:
    """The accuracy/ε table. For each ε: σ from :func:`gaussian_sigma_for_epsilon`, the
    Student-t scale from the code-book accountant; for each method the learning rate with the
    best mean validation accuracy over ``tune_seeds`` on its grid (``denoise_lr_grid`` for the
    KS-denoised variants, whose steps are shrunk by KS ≈ 0.02: the same grid ×50), then test
    accuracy over seeds 1…``seeds``. Seeds fix the model initialisation, the Poisson batches and
    the noise generator, so seed s gives every method the same batches: differences between
    methods are reported paired by seed (``diff_vs_dpsgd``)."""
    from ..training import steps_for_epochs
    prob = digits_problem(hidden=hidden, n_codes=n_codes, batch_size=batch_size)
    q = prob["sample_rate"]
    steps = steps_for_epochs(epochs, q)
    rows = []
    for eps in epsilons:
        sigma = gaussian_sigma_for_epsilon(eps, delta, q, steps)
        noises: dict = {}
        for method in methods:
            fam = "student_t" if "student_t" in method else "gaussian"
            if fam not in noises:
                noises[fam] = method_noise(method, sigma, eps, delta, q, steps, prob["codebook"])
            noise = noises[fam]
            grid = denoise_lr_grid if method.endswith("denoise") else lr_grid
            tuning = []
            for lr in grid:
                runs = [run_method(method, prob, noise, epochs=epochs, lr=lr, seed=s,
                                   delta=delta, device=device) for s in tune_seeds]
                tuning.append((lr, float(np.mean([r["val_accuracy"] for r in runs]))))
            best_lr = max(tuning, key=lambda t: t[1])[0]
            finals = [run_method(method, prob, noise, epochs=epochs, lr=best_lr, seed=s,
                                 delta=delta, device=device) for s in range(1, seeds + 1)]
            acc = np.array([r["test_accuracy"] for r in finals])
            row = {"target_epsilon": eps, "method": method, "noise": repr(noise),
                   "noise_std": noise.std, "noise_scale": noise.scale, "lr": best_lr,
                   "tuning": tuning, "epsilon": finals[0]["epsilon"],
                   "test_accuracy": acc.tolist(), "mean": float(acc.mean()),
                   "std": float(acc.std(ddof=1)) if seeds > 1 else 0.0,
                   "ks_mean": float(np.mean([r["ks_mean"] for r in finals])),
                   "ks_cv": float(np.mean([r["ks_cv"] for r in finals])),
                   "clamped": float(np.mean([r["clamped"] for r in finals])),
                   "seconds_per_run": float(np.mean([r["seconds"] for r in finals]))}
            base = next((r for r in rows if r["method"] == "dpsgd"
                         and r["target_epsilon"] == eps), None)
            if base is not None and seeds > 1:
                diff = acc - np.array(base["test_accuracy"])
                row["diff_vs_dpsgd"] = float(diff.mean())
                row["diff_se"] = float(diff.std(ddof=1) / math.sqrt(seeds))
            rows.append(row)
            if log is not None:
                extra = (f", vs DP-SGD {100 * row['diff_vs_dpsgd']:+.1f} ± "
                         f"{100 * row['diff_se']:.1f}" if "diff_vs_dpsgd" in row else "")
                log(f"eps={eps:g} {method:24s} lr={row['lr']:<6g} test acc "
                    f"{100 * row['mean']:.1f} ± {100 * row['std']:.1f}%{extra}  (eps "
                    f"{row['epsilon']:.3f}, noise std {row['noise_std']:.3f})")
    return {"config": {"epsilons": list(epsilons), "epochs": epochs, "batch_size": batch_size,
                       "sample_rate": q, "steps": steps, "seeds": seeds,
                       "tune_seeds": list(tune_seeds), "hidden": list(hidden),
                       "n_codes": n_codes, "dim": prob["dim"], "n_train": prob["n"],
                       "delta": delta, "lr_grid": list(lr_grid),
                       "denoise_lr_grid": list(denoise_lr_grid)},
            "rows": rows}


@constrained(result=_RESULT, method=_METHOD, log=_LOG)
def same_lr_control(result: dict, *, method: str = "alg1_gaussian", device=None,
                    log: Callable[[str], None] | None = None) -> list[dict]:
    """DP-SGD re-run at the learning rate ``method`` was tuned to, on the same seeds: the paired
    difference isolates the encoding (same σ, batches, initialisation and, for Gaussian noise,
    the same noise draws), free of the noise in the learning-rate selection."""
    cfg = result["config"]
    prob = digits_problem(hidden=tuple(cfg["hidden"]), n_codes=cfg["n_codes"],
                          batch_size=cfg["batch_size"])
    out = []
    for eps in cfg["epsilons"]:
        row = next(r for r in result["rows"] if r["method"] == method
                   and r["target_epsilon"] == eps)
        sigma = gaussian_sigma_for_epsilon(eps, cfg["delta"], cfg["sample_rate"], cfg["steps"])
        base = np.array([run_method("dpsgd", prob, make_noise("gaussian", sigma),
                                    epochs=cfg["epochs"], lr=row["lr"], seed=s,
                                    delta=cfg["delta"], device=device)["test_accuracy"]
                         for s in range(1, cfg["seeds"] + 1)])
        diff = np.array(row["test_accuracy"]) - base
        rec = {"target_epsilon": eps, "method": method, "lr": row["lr"],
               "dpsgd_mean": float(base.mean()), "diff": float(diff.mean()),
               "diff_se": float(diff.std(ddof=1) / math.sqrt(diff.size))}
        out.append(rec)
        if log is not None:
            log(f"eps={eps:g} DP-SGD at lr {row['lr']:g}: {100 * base.mean():.1f}%; {method} "
                f"minus DP-SGD {100 * rec['diff']:+.2f} ± {100 * rec['diff_se']:.2f}")
    return out


@constrained(codebook=_CODEBOOK, sample_rate=SAMPLE_RATE, num_draws=COUNT)
def l1_versus_d2(codebook: Codebook, grads, d2_values, *, families=("gaussian", "laplace",
                 "student_t"), sample_rate: float = 1.0, num_draws: int = 20,
                 seed: int | None = None) -> list[dict]:
    """For each family and target D₂ (the per-step Rényi divergence of order 2 of Algorithm 1
    with this code book, Lemma 5), the noise scale reaching it and the ℓ1 error of the privatised
    sum of ``grads`` ([B, d] per-example gradients) — the paper's Figure 6 form. ℓ1 is reported
    per coordinate (divided by d). ``seed`` draws the noise: None (default) 63 fresh bits of OS
    entropy, recorded in every row; an integer reproduces the figure (experiments only)."""
    import torch
    from scipy.optimize import brentq

    from ..device import release_seed
    seed = release_seed(seed)
    d = grads.shape[1]
    gen = torch.Generator().manual_seed(seed)
    out = []
    for fam in families:
        for target in d2_values:
            def f(log_s, fam=fam, target=target):
                nz = make_noise(fam, math.exp(log_s))
                return codebook_rdp([2], sample_rate, codebook, nz)[0] - target
            s = math.exp(brentq(f, math.log(0.2), math.log(50.0), rtol=1e-7))
            nz = make_noise(fam, s)
            err = privatization_error(grads, codebook, nz, num_draws=num_draws, generator=gen)
            out.append({"family": fam, "d2": float(target), "scale": s, "std": nz.std,
                        "l1_per_coord": err["l1"] / d, "noise_l1_per_coord": nz.mean_abs,
                        "encoding_l1_per_coord": err["encoding_l1"] / d, "seed": seed})
    return out


@constrained(n_codes=COUNT, batch=COUNT, repeats=COUNT, seed=_SEED)
def encoding_throughput(*, dims=(2442, 100_000), n_codes: int = 1000, batch: int = 256,
                        device=None, repeats: int = 5, seed: int = 0) -> list[dict]:
    """Encoded vectors per second (best of ``repeats``) for each model size d."""
    import torch
    from ..device import as_device
    dev = as_device(device)
    out = []
    for d in dims:
        cb = build_codebook(n_codes, d, rng=seed)
        g = torch.randn(batch, d, generator=torch.Generator().manual_seed(seed)).to(dev) / d**0.5
        encode(g, cb)                                  # warm-up (moves the code book)
        best = math.inf
        for _ in range(repeats):
            if dev.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            encode(g, cb)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        out.append({"device": str(dev), "dim": d, "n_codes": n_codes, "batch": batch,
                    "seconds": best, "vectors_per_second": batch / best})
    return out


@constrained(result=_RESULT)
def format_table(result: dict) -> str:
    """The accuracy/ε table of :func:`compare_on_digits` as text (one row per ε)."""
    rows = result["rows"]
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]

    def cell(eps: float, m: str) -> str:
        r = next(r for r in rows if r["method"] == m and r["target_epsilon"] == eps)
        return f"{100 * r['mean']:5.1f} ± {100 * r['std']:3.1f} (lr {r['lr']:g})"
    table = [{"eps": eps, **{m: cell(eps, m) for m in methods}}
             for eps in result["config"]["epsilons"]]
    return tables_format(table, ["eps", *methods], formats={"eps": "g"}, sep=" | ",
                         align=dict.fromkeys(["eps", *methods], ">"),
                         widths={"eps": 5, **dict.fromkeys(methods, 24)})
