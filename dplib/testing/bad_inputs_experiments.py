"""Bad-input table entries for the experiment drivers (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.experiments.finetune` (chapter 13)."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["EXPERIMENTS_EXCLUDED", "experiments_specs"]

_DRIVER = ("experiment driver (trains models for minutes); validates its arguments with the "
           "checks the swept functions use; tested in tests/unit/test_experiments_finetune.py")
_TEXT_DRIVER = ("experiment driver (trains the tiny GPT-2 for tens of seconds per row); validates "
                "its arguments with the checks the swept functions use; tested in "
                "tests/unit/test_experiments_finetune_text.py")
#: This topic's public callables that are not swept, with the reason; merged into
#: :data:`~dplib.testing.bad_inputs.EXCLUDED` when this module is imported (by ``all_specs``).
EXPERIMENTS_EXCLUDED: dict[str, str] = {
    "dplib.experiments.finetune.DigitsTransfer": "data record built by digits_transfer (swept)",
    "dplib.experiments.finetune.pretrain_digits": _DRIVER,
    "dplib.experiments.finetune.finetune_digits": _DRIVER,
    "dplib.experiments.finetune.utility_table": _DRIVER,
    "dplib.experiments.finetune_text.finetune_text": _TEXT_DRIVER,
    "dplib.experiments.finetune_text.text_utility_table": _TEXT_DRIVER,
    "dplib.experiments.finetune.text_classifier": "loads the stored tiny GPT-2 (seconds); "
                                                  "validated by its own checks, tested in "
                                                  "tests/unit/test_experiments_finetune.py",
    "dplib.experiments.finetune.encode_texts": "needs the tiny GPT-2's tokenizer; validated by "
                                               "its own checks, tested in "
                                               "tests/unit/test_experiments_finetune.py",
}


def experiments_specs() -> list[Spec]:
    """One :class:`Spec` per swept public callable of :mod:`dplib.experiments`."""
    from ..experiments import finetune as FT
    from ..training import make_mlp

    base = make_mlp(64, 5, (128, 128), seed=0)
    table = {"rows": [{"method": "full", "epsilon": 1.0, "accuracy": 0.5}]}
    return [
        Spec("dplib.experiments.finetune.noise_norm", lambda: FT.noise_norm,
             args=(10, 1.0, 1.0, 5.0),               # declared (dplib._constraints); extras:
             params=dict(noise_multiplier=["1"])),
        Spec("dplib.experiments.finetune.digits_transfer", lambda: FT.digits_transfer,
             kwargs=dict(n_private=100, seed=0), params=dict(n_private=[0, 2.5, "3"])),
        Spec("dplib.experiments.finetune.digits_model", lambda: FT.digits_model,
             args=("lora", base), kwargs=dict(rank=2, seed=0),
             params=dict(pretrained=[make_mlp(64, 5, (8,))])),
        Spec("dplib.experiments.finetune.table_accuracy", lambda: FT.table_accuracy,
             args=(table, "full", 1.0),
             params=dict(table=[[1.0], "table"], epsilon=[2.0])),    # 2.0: not in the table
        Spec("dplib.experiments.finetune.load_finetune_table", lambda: FT.load_finetune_table,
             params=dict(path=["/no/such/file.json", "."])),
    ]
