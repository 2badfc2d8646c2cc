"""Train the tiny GPT-2 of chapter 10 and store it in dplib/data/tiny_lm/ with its provenance.

    python tools/train_tiny_lm.py [--steps 1500] [--seed 0] [--out dplib/data/tiny_lm]

Every training text is public (dplib.icl.tiny_lm.training_texts). A few CPU minutes; the
provenance file records the command, the commit, the library versions, the time and the loss.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> dict:
    import tokenizers
    import torch
    import transformers

    from dplib.icl.tiny_lm import TINY_LM_DIR, save_tiny_lm, train_tiny_lm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(TINY_LM_DIR))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    model, tok = train_tiny_lm(steps=args.steps, batch_size=args.batch_size, rng=args.seed,
                               log_every=100)
    seconds = time.perf_counter() - t0
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "dplib", "tools",
                            ":!dplib/data/tiny_lm"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    record = save_tiny_lm(model, tok, args.out, provenance={
        "command": "python tools/train_tiny_lm.py " + " ".join(argv or sys.argv[1:]),
        "steps": args.steps, "batch_size": args.batch_size, "seed": args.seed,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": round(seconds, 1), "threads": args.threads,
        "commit": commit, "uncommitted_changes": bool(dirty),
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__, "python": platform.python_version(),
        "machine": platform.machine(),
        "training_data": "dplib.icl.tiny_lm.training_texts: public corpus and prompts drawn "
                         "from make_book_data(task, seed=PUBLIC_SEED); no private pool",
    })
    print(f"trained {record['parameters']} parameters in {seconds:.0f} s -> {args.out}")
    return record


if __name__ == "__main__":
    main()
