"""Milliseconds per LoRA fine-tuning step of the tiny GPT-2, private and not, in one run.

Run:  OMP_NUM_THREADS=1 python benchmarks/lora_step.py [--batch 8,32] [--seq 64] [--rank 8]
                               [--steps 5] [--rounds 5] [--repeats 3] [--device cpu|cuda]
                               [--no-memory] [--profile] [--json FILE]
                               [--before CHECKOUT]

The model: the book's tiny GPT-2 (``dplib/data/tiny_lm``, 2 layers, 64-dimensional states)
with LoRA adapters of rank r on every attention ``c_attn`` (peft, via
:func:`dplib.training.finetune.prepare_finetune`; Hu et al. 2022), behind
:class:`~dplib.training.finetune.LogitsOnly`. The task: next-token cross-entropy on random
token sequences of ``--seq`` tokens (a sequence is one record). Every method takes one complete
step on the SAME model (same weights) and the SAME batch: forward, backward, and for the private
ones per-example clipping to C = 1, Gaussian noise with σ = 1, division by the batch size; then
an SGD update of the adapters. Methods:

* ``non-private``   plain ``loss.backward()`` + SGD (the floor; same batch size).
* ``dplib ghost``   :func:`dplib.training.noisy_gradient` with ``ghost=True``, the public
                    one-step function (its per-call checks included, and a model-state snapshot
                    taken afresh at every call).
* ``dplib kept``    ``noisy_gradient`` with ``ghost=True`` and ``snapshot=``: one model-state
                    snapshot kept by the caller across the calls (refreshed at each).
* ``dplib train``   the step of :func:`dplib.training.train`'s loop with ``ghost=True``:
                    :func:`~dplib.training.clipped_sum.private_clipped_sum` with ONE model-state
                    snapshot for the run (refreshed each step), Gaussian noise
                    (:class:`~dplib.training.engine.GaussianPrivatizer`), SGD.
* ``dplib vmap``    ``noisy_gradient`` with ``ghost=False`` (``torch.func`` per-example
                    gradients).
* ``before ghost``, ``before train``  with ``--before CHECKOUT``: ``dplib ghost`` and
                    ``dplib train`` of that checkout's ``dplib`` (an older version), timed in the
                    same rounds.
* ``opacus hooks``  Opacus ``GradSampleModule`` + ``DPOptimizer`` on the same peft model.
* ``opacus ghost``  Opacus ``GradSampleModuleFastGradientClipping`` (ghost clipping) +
                    ``DPOptimizerFastGradientClipping`` + ``DPLossFastGradientClipping``.

An Opacus method that refuses the model is reported with its error instead of a time.

Timing (``benchmarks/_timing.py``, shared with ``dpsgd_speed.py``): methods interleaved round by
round (``--rounds`` rounds of ``--steps`` steps after warm-up), the median round taken, so a
machine shared with other jobs slows all alike; that is repeated ``--repeats`` times and each
time and ratio printed as median [min–max] over the repeats, with the 1-minute load average seen
around them, by two clocks read in the same rounds: wall time, and this process's CPU time
(``time.process_time``: on a machine shared with other jobs it leaves out the time spent waiting
for a core, though not the slowdown of shared caches; with one thread it is the step's work). Every batch size of ``--batch`` (default 8 and 32) is measured in the same run.
Ratios are to ``non-private`` and to each Opacus method. Peak memory: on CUDA
``torch.cuda.max_memory_allocated`` during the steps, above what was allocated before; on CPU
the peak of Python-visible allocations by ``tracemalloc`` does not see torch's allocator, so the
torch CPU profiler's memory accounting is used instead (``profile_memory=True``: the largest
total of live tensor bytes allocated during three steps, found by replaying each operator's
own allocations minus frees in time order: a peak inside one operator is netted out). ``--profile`` prints where the ghost step's time goes (torch profiler, by
operator, and Python's cProfile, by function). Speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from _timing import import_checkout, time_rounds      # benchmarks/_timing.py
from dplib.training.finetune import LogitsOnly, prepare_finetune, trainable_parameter_count

SIGMA, C = 1.0, 1.0
METHODS = ["non-private", "dplib ghost", "dplib kept", "dplib train", "dplib vmap", "opacus hooks",
           "opacus ghost"]
BEFORE = {}          # --before: that checkout's dplib.training, for "before ghost"/"before train"


def lm_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy, the mean over the batch's predicted tokens (one sequence =
    one record: on a batch of one, that sequence's mean)."""
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def make_problem(batch: int, seq: int, rank: int, device: torch.device):
    from dplib.icl.tiny_lm import load_tiny_lm
    base = load_tiny_lm().model
    model = LogitsOnly(prepare_finetune(base, "lora", rank=rank, seed=0)).to(device).train()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():                 # B ≠ 0, as after some training
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
    x = torch.randint(3, base.config.vocab_size, (batch, seq), generator=gen).to(device)
    return model, x


def build(method: str, model: nn.Module, x: torch.Tensor):
    """A closure taking one step of ``method`` on a fresh copy of ``model``."""
    model = copy.deepcopy(model)
    b, lr = x.shape[0], 0.01
    gen = torch.Generator(device=x.device).manual_seed(1)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if method == "non-private":
        opt = torch.optim.SGD(params.values(), lr=lr)

        def step():
            opt.zero_grad(set_to_none=True)
            lm_loss(model(x), x).backward()
            opt.step()
        return step
    if method.split()[0] in ("dplib", "before"):    # this checkout's dplib, or --before's
        import importlib
        lib = importlib.import_module("dplib.training") if method.startswith("dplib") \
            else BEFORE["training"]
        opt = torch.optim.SGD(params.values(), lr=lr)
        if method.endswith("train"):
            cs = importlib.import_module(f"{lib.__name__}.clipped_sum")
            privatizer = importlib.import_module(f"{lib.__name__}.engine").GaussianPrivatizer(
                SIGMA, C)
            snap = cs.StateSnapshot(model)

            def step():               # what train's loop does: one snapshot for the run
                total, _, _ = cs.private_clipped_sum(model, lm_loss, x, x, C, ghost=True,
                                                     snapshot=snap)
                noisy, _ = privatizer.add_noise(total, gen)
                for k, p in params.items():
                    p.grad = noisy[k].div_(b)
                opt.step()
            return step
        ghost = method.endswith(("ghost", "kept"))
        kw = {}
        if method.endswith("kept"):      # one snapshot kept across the calls, as train keeps
            kw["snapshot"] = importlib.import_module(
                f"{lib.__name__}.clipped_sum").StateSnapshot(model)

        def step():
            grads, _, _ = lib.noisy_gradient(model, lm_loss, x, x, max_grad_norm=C,
                                             noise_multiplier=SIGMA, expected_batch_size=b,
                                             generator=gen, ghost=ghost, **kw)
            for k, p in params.items():
                p.grad = grads[k]
            opt.step()
        return step
    if method == "opacus hooks":
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer
        gm = GradSampleModule(model)
        opt = DPOptimizer(torch.optim.SGD(params.values(), lr=lr), noise_multiplier=SIGMA,
                          max_grad_norm=C, expected_batch_size=b, generator=gen)

        def step():
            opt.zero_grad(set_to_none=True)
            lm_loss(gm(x), x).backward()
            opt.step()
        return step
    if method == "opacus ghost":
        from opacus.grad_sample import GradSampleModuleFastGradientClipping
        from opacus.optimizers import DPOptimizerFastGradientClipping
        from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
        gm = GradSampleModuleFastGradientClipping(model, max_grad_norm=C,
                                                  use_ghost_clipping=True)
        opt = DPOptimizerFastGradientClipping(torch.optim.SGD(params.values(), lr=lr),
                                              noise_multiplier=SIGMA, max_grad_norm=C,
                                              expected_batch_size=b, generator=gen)
        crit = DPLossFastGradientClipping(gm, opt, nn.CrossEntropyLoss(), "mean")

        def step():
            opt.zero_grad(set_to_none=True)
            logits = gm(x)[:, :-1]
            crit(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                 shape=logits.shape[:2]).backward()
            opt.step()
        return step
    raise ValueError(f"unknown method {method!r}")


def peak_memory_mb(fn, device, steps: int = 3) -> float:
    """Peak extra memory of ``steps`` calls of ``fn`` in MB (module docstring)."""
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        for _ in range(steps):
            fn()
    deltas = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()
                    if e.self_cpu_memory_usage)
    live = peak = 0
    for _, d in deltas:         # allocations (+) and frees (−) in time order
        live += d
        peak = max(peak, live)
    return peak / 2**20


def profile_ghost(fn) -> None:
    """Where the ghost step's time goes: torch operators, then Python functions."""
    import cProfile
    import pstats
    from torch.profiler import ProfilerActivity, profile
    fn()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            fn()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3):
        fn()
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


def _spread(values: list[float]) -> str:
    """median [min–max] of the repeats."""
    return f"{statistics.median(values):.2f} [{min(values):.2f}–{max(values):.2f}]"


def run_batch(batch: int, args, device) -> dict:
    """Every method at one batch size: ``--repeats`` timings (each a median of rounds), then
    peak memory; returns the numbers and prints the table."""
    model, x = make_problem(batch, args.seq, args.rank, device)
    print(f"\nbatch {batch} × {args.seq} tokens; tiny GPT-2 + LoRA r={args.rank} on c_attn: "
          f"{trainable_parameter_count(model)} trainable of "
          f"{sum(p.numel() for p in model.parameters())} weights")
    fns, refused = {}, {}
    for m in args.methods.split(","):
        try:
            fns[m] = build(m, model, x)
            fns[m]()                              # a first step: refusals show here
        except Exception as exc:                  # noqa: BLE001 - reported, not hidden
            refused[m] = f"{type(exc).__name__}: {str(exc)[:300]}"
    runs = []
    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    for _ in range(args.repeats):
        load = os.getloadavg()[0]
        per = time_rounds(fns, device, args.steps, args.rounds, args.warmup, clocks)
        runs.append({c: {m: statistics.median(v) for m, v in per[c].items()} for c in clocks}
                    | {"load_before": load, "load_after": os.getloadavg()[0]})
    mem = {} if args.no_memory else {m: peak_memory_mb(fn, device) for m, fn in fns.items()}
    refs = [r for r in ("non-private", "opacus hooks", "opacus ghost") if r in fns]
    ratio = {c: {m: {r: [run[c][m] / run[c][r] for run in runs] for r in refs} for m in fns}
             for c in clocks}
    for c in clocks:
        print(f"{c} clock" + (" (this process's CPU time: not the time spent waiting for a "
                              "core)" if c == "cpu" else ""))
        head = f"{'method':<14}{'ms/step':>24}" + "".join(f"{'× ' + r:>24}" for r in refs)
        print(head + ("" if args.no_memory else f"{'peak MB':>10}"))
        for m in fns:
            line = f"{m:<14}{_spread([run[c][m] for run in runs]):>24}"
            line += "".join(f"{_spread(ratio[c][m][r]):>24}" for r in refs)
            print(line + ("" if args.no_memory else f"{mem[m]:10.1f}"))
    for m, why in refused.items():
        print(f"{m:<14} refused: {why}")
    loads = [v for r in runs for v in (r["load_before"], r["load_after"])]
    print(f"(median [min–max] of {args.repeats} repeats, each the median of {args.rounds} rounds "
          f"of {args.steps} steps; 1-min load average {min(loads):.1f}–{max(loads):.1f} on "
          f"{os.cpu_count()} CPUs)")
    if args.profile and "dplib ghost" in fns:
        profile_ghost(fns["dplib ghost"])
    return {"runs": runs, "ratios": ratio, "peak_mb": mem, "refused": refused}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", default="8,32", help="batch sizes, comma-separated")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default=None, choices=[None, "cpu", "cuda"])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None, metavar="CHECKOUT",
                    help="also time that checkout's dplib: methods 'before ghost', 'before train'")
    args = ap.parse_args()
    if args.before:
        BEFORE["training"] = import_checkout(args.before)
        args.methods += ",before ghost,before train"
    warnings.filterwarnings("ignore")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    import opacus
    import peft
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft "
          f"{peft.__version__}, opacus {opacus.__version__}, python "
          f"{platform.python_version()}, {device}, {torch.get_num_threads()} thread(s), "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, {os.cpu_count()} CPUs")
    out = {b: run_batch(b, args, device) for b in (int(v) for v in args.batch.split(","))}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batches": out, "seq": args.seq, "rank": args.rank,
                       "device": str(device), "threads": torch.get_num_threads(),
                       "argv": sys.argv}, f, indent=1)


if __name__ == "__main__":
    main()
