"""Milliseconds per training step of DP-SGD implementations, measured side by side in one run.

Run:  python benchmarks/dpsgd_speed.py [--model mlp|cnn|transformer|all] [--batch 256] [--steps 10]
                                       [--rounds 5] [--device cpu|cuda] [--threads N]
                                       [--no-memory] [--json FILE] [--save]

Every method takes one complete optimisation step on the SAME model (same initial weights) and
the SAME batch: forward, backward, per-example clipping to C = 1, Gaussian noise with σ = 1,
division by the batch size, SGD update. Methods:

* ``non-private``        plain ``loss.backward()`` + SGD (the floor).
* ``dplib vmap``         :func:`dplib.training.noisy_gradient` (``torch.func`` vmap(grad)).
* ``dplib ghost``        the same with ``ghost=True`` (norms without per-example gradients).
* ``vmap baseline``      the whole-model ``vmap(grad)`` recipe of the PyTorch per-sample-gradient
                         tutorial, written out here (no dplib).
* ``opacus hooks``       Opacus ``GradSampleModule`` + ``DPOptimizer``.
* ``opacus ghost``       Opacus ``GradSampleModuleFastGradientClipping`` (ghost clipping) +
                         ``DPOptimizerFastGradientClipping`` + ``DPLossFastGradientClipping``.

``--before CHECKOUT`` adds ``before vmap`` and ``before ghost``: the same two steps of the
``dplib`` of another checkout (an older commit, say), loaded under another package name and timed
in the same rounds, with the ratio of this checkout's step to it — how a change moved each step's
speed, measured side by side so that a loaded machine slows both alike.

Timing: the methods are interleaved round by round (``--rounds`` rounds of ``--steps`` steps
each, after warm-up) and the median round is reported, so a machine shared with other jobs slows
all methods alike. Ratios are to ``non-private`` and to ``opacus hooks``. Peak memory: on CUDA
``torch.cuda.max_memory_allocated`` during the steps (minus what was allocated before); on CPU
each method is re-run in a fresh subprocess (one thread, glibc told to return every block of
64 KiB or more to the OS when it is freed) and its peak resident set size during steps 2–4 is
reported above the resident set before its first step — so memory a method keeps between
steps (Opacus' per-sample gradients, optimizer state) counts (Linux: the peak counter VmHWM is
reset through /proc/self/clear_refs; coarse, a few MB of noise).
Speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from _timing import import_checkout, sync, time_methods      # benchmarks/_timing.py
from dplib.provenance import run_provenance
from dplib.experiments.dpsgd_tables import SPEED_TABLE as STORE
from dplib.training import ghost_plan, make_cnn, make_mlp, make_transformer, noisy_gradient

ROOT = Path(__file__).resolve().parents[1]

SIGMA, C = 1.0, 1.0
VOCAB, SEQ = 1000, 32          # the transformer's vocabulary and sequence length
KINDS = ["mlp", "cnn", "transformer"]
METHODS = ["non-private", "dplib vmap", "dplib ghost", "vmap baseline", "opacus hooks",
           "opacus ghost"]


def make_problem(kind: str, batch: int, device):
    g = torch.Generator().manual_seed(0)
    if kind == "mlp":
        model = make_mlp(784, 10, (512, 256), seed=0)
        x = torch.randn(batch, 784, generator=g)
    elif kind == "cnn":
        model = make_cnn(1, 10, 28, groups=4, width=32, seed=0)
        x = torch.randn(batch, 1, 28, 28, generator=g)
    elif kind == "transformer":
        model = make_transformer(VOCAB, 10, SEQ, dim=64, heads=4, layers=2, seed=0)
        x = torch.randint(0, VOCAB, (batch, SEQ), generator=g)
    else:
        raise ValueError(f"model must be 'mlp', 'cnn' or 'transformer', got {kind!r}")
    y = torch.randint(0, 10, (batch,), generator=g)
    return model.to(device), x.to(device), y.to(device)


BEFORE = {}          # "before vmap"/"before ghost" → that checkout's noisy_gradient


def load_before(checkout: str) -> None:
    """Import ``checkout``/dplib as the package ``dplib_before``
    (:func:`_timing.import_checkout`), for the ``before`` methods."""
    BEFORE["noisy_gradient"] = import_checkout(checkout).noisy_gradient


def build(method: str, base: nn.Module, x, y, lr: float = 0.01):
    """A closure taking one full step of ``method`` on a private copy of ``base``."""
    model = copy.deepcopy(base)
    b = x.shape[0]
    gen = torch.Generator(device=x.device).manual_seed(1)
    if method in ("before vmap", "before ghost"):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        params = dict(model.named_parameters())
        step_of = BEFORE["noisy_gradient"]

        def step():
            grads, _, _ = step_of(model, F.cross_entropy, x, y, max_grad_norm=C,
                                  noise_multiplier=SIGMA, expected_batch_size=b,
                                  generator=gen, ghost=method == "before ghost")
            for k, p in params.items():
                p.grad = grads[k]
            opt.step()
        return step
    if method == "non-private":
        opt = torch.optim.SGD(model.parameters(), lr=lr)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        return step
    if method in ("dplib vmap", "dplib ghost"):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        params = dict(model.named_parameters())
        ghost = method == "dplib ghost"

        def step():
            grads, _, _ = noisy_gradient(model, F.cross_entropy, x, y, max_grad_norm=C,
                                         noise_multiplier=SIGMA, expected_batch_size=b,
                                         generator=gen, ghost=ghost)
            for k, p in params.items():
                p.grad = grads[k]
            opt.step()
        return step
    if method == "vmap baseline":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        named = dict(model.named_parameters())

        def loss_one(p, xi, yi):
            return F.cross_entropy(functional_call(model, p, (xi.unsqueeze(0),)),
                                   yi.unsqueeze(0))
        per_example = vmap(grad(loss_one), in_dims=(None, 0, 0))

        def step():
            g = per_example({k: v.detach() for k, v in named.items()}, x, y)
            norms = torch.stack([v.flatten(1).norm(dim=1) for v in g.values()]).norm(dim=0)
            f = (C / (norms + 1e-6)).clamp(max=1.0)
            for k, p in named.items():
                s = torch.einsum("i,i...->...", f, g[k])
                p.grad = (s + SIGMA * C * torch.randn(s.shape, generator=gen,
                                                      device=s.device)) / b
            opt.step()
        return step
    if method == "opacus hooks":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
        gm = GradSampleModule(model)
        opt = DPOptimizer(torch.optim.SGD(gm.parameters(), lr=lr), noise_multiplier=SIGMA,
                          max_grad_norm=C, expected_batch_size=b, generator=gen)

        def step():
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(gm(x), y).backward()
            opt.step()
        return step
    if method == "opacus ghost":
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
        gm = GradSampleModuleFastGradientClipping(model, max_grad_norm=C,
                                                  use_ghost_clipping=True)
        opt = DPOptimizerFastGradientClipping(torch.optim.SGD(gm.parameters(), lr=lr),
                                              noise_multiplier=SIGMA, max_grad_norm=C,
                                              expected_batch_size=b, generator=gen)
        crit = DPLossFastGradientClipping(gm, opt, nn.CrossEntropyLoss(), "mean")

        def step():
            opt.zero_grad(set_to_none=True)
            crit(gm(x), y).backward()
            opt.step()
        return step
    raise ValueError(f"unknown method {method!r}")


def peak_memory_mb(method: str, kind: str, batch: int, device, steps: int = 3) -> float:
    """Extra peak memory of ``method``'s steps, in MB (see the module docstring)."""
    if device.type == "cuda":
        model, x, y = make_problem(kind, batch, device)
        fn = build(method, model, x, y)
        fn()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    # glibc: every block ≥ 64 KiB is its own mmap, returned to the OS when freed, so the
    # resident set follows the live tensors instead of the allocator's cache
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}
    out = subprocess.run([sys.executable, __file__, "--memory-child", method, "--model", kind,
                          "--batch", str(batch), "--device", "cpu"],
                         capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def _memory_child(method: str, kind: str, batch: int) -> None:
    torch.set_num_threads(1)
    model, x, y = make_problem(kind, batch, torch.device("cpu"))
    fn = build(method, model, x, y)
    base = _reset_peak_rss()           # model, data and the method's wrappers, before any step
    fn()                               # the first step (lazily created state, one-off costs)
    _reset_peak_rss()
    for _ in range(3):
        fn()
    print((_peak_rss() - base) / 1024)


def _vm(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])        # KiB
    raise KeyError(key)


def _reset_peak_rss() -> int:
    """Reset the kernel's peak-RSS counter (Linux: write 5 to /proc/self/clear_refs) and return
    the current RSS in KiB; elsewhere fall back to ru_maxrss (then the number is a lower bound)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _vm("VmRSS:")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _peak_rss() -> int:
    try:
        return _vm("VmHWM:")
    except (OSError, KeyError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="all", choices=KINDS + ["all"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--device", default=None, choices=[None, "cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--save", action="store_true",
                    help=f"store the table, with its provenance, in {STORE.relative_to(ROOT)} "
                         "(the DP-SGD chapter quotes it)")
    ap.add_argument("--before", default=None, metavar="CHECKOUT",
                    help="also time the dplib of this checkout (same rounds) and print ratios")
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.memory_child:
        _memory_child(args.memory_child, args.model, args.batch)
        return
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.threads:
        torch.set_num_threads(args.threads)
    import opacus
    print(f"torch {torch.__version__}, opacus {opacus.__version__}, python "
          f"{platform.python_version()}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else
             f" ({torch.get_num_threads()} threads)")
          + f", batch {args.batch}, σ = {SIGMA}, C = {C}")
    results = {}
    methods = list(METHODS)
    if args.before:
        load_before(args.before)
        methods += ["before vmap", "before ghost"]
    for kind in (KINDS if args.model == "all" else [args.model]):
        model, x, y = make_problem(kind, args.batch, device)
        nparams = sum(p.numel() for p in model.parameters())
        fns = {m: build(m, model, x, y) for m in methods}
        ms = time_methods(fns, device, args.steps, args.rounds, args.warmup)
        mem = {} if args.no_memory else {m: peak_memory_mb(m, kind, args.batch, device)
                                         for m in METHODS}
        print(f"\n{kind}: {nparams:,} parameters, input {tuple(x.shape[1:])}")
        print(f"{'method':<15}{'ms/step':>10}{'× non-private':>15}{'× opacus hooks':>16}"
              f"{'peak MB':>10}")
        for m in methods:
            mb = f"{mem[m]:10.1f}" if m in mem else f"{'-':>10}"
            print(f"{m:<15}{ms[m]:10.2f}{ms[m] / ms['non-private']:15.2f}"
                  f"{ms[m] / ms['opacus hooks']:16.2f}{mb}")
        if args.before:
            print(f"this checkout ÷ before: vmap {ms['dplib vmap'] / ms['before vmap']:.3f}, "
                  f"ghost {ms['dplib ghost'] / ms['before ghost']:.3f}")
        noise = noise_ms(model, device, args.steps * args.rounds)
        plan = ghost_plan(copy.deepcopy(model), F.cross_entropy, x, y)
        paths = {p: sum(v == p for v in plan.values()) for p in sorted(set(plan.values()))}
        print(f"drawing the noise alone: {noise:.2f} ms ({noise / ms['non-private']:.2f}× "
              f"non-private); dplib ghost's layers: {paths}")
        results[kind] = {"ms_per_step": ms, "peak_mb": mem, "parameters": nparams,
                         "noise_ms": noise, "ghost_plan": plan,
                         "input_shape": list(x.shape[1:])}
    table = {"device": str(device) + (f" ({torch.cuda.get_device_name()})"
                                      if device.type == "cuda" else ""),
             "threads": torch.get_num_threads(), "batch": args.batch, "results": results,
             "provenance": provenance(args)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    if args.save:
        STORE.write_text(json.dumps(table, indent=1) + "\n")
        print(f"stored in {STORE.relative_to(ROOT)}")


def noise_ms(model: nn.Module, device, reps: int) -> float:
    """Milliseconds to draw N(0, σ²C²) for every parameter: a floor under any DP-SGD step."""
    gen = torch.Generator(device=device).manual_seed(2)
    shapes = [p.shape for p in model.parameters()]
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        for sh in shapes:
            torch.randn(sh, generator=gen, device=device)
    sync(device)
    return (time.perf_counter() - t0) / reps * 1e3


def provenance(args) -> dict:
    """The command, commit and versions a stored table came from."""
    import opacus
    return {**run_provenance("python benchmarks/dpsgd_speed.py " + shlex.join(sys.argv[1:]), ROOT),
            "opacus": opacus.__version__}


if __name__ == "__main__":
    main()
