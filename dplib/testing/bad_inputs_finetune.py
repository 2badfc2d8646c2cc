"""Bad-input table entries for the fine-tuning topic (see :mod:`dplib.testing.bad_inputs`):
:mod:`dplib.training.finetune` (which parameters of a pretrained model train privately)."""
from __future__ import annotations

from ._sweep import INF, NAN, Spec

__all__ = ["finetune_specs", "FINETUNE_EXCLUDED"]

_NOT_A_MODEL = [None, "model", 3, [1.0]]

#: This topic's public callables that are not swept, with the reason.
FINETUNE_EXCLUDED: dict[str, str] = {
    "dplib.training.ghost_layers.is_hf_conv1d": "a type test: any object is a valid input "
                                                "(False for all but transformers' Conv1D)",
}


#: A minimal rank sweep: LoRA of rank 4 at ε = 1, two seeds.
_RANK_TABLE = {"lora_ranks": [4], "rank_rows": [
    {"method": "lora", "rank": 4, "epsilon": 1.0, "accuracy": a, "seed": s}
    for s, a in enumerate((0.7, 0.8))]}


def _experiments():
    from ..experiments import finetune
    return finetune


def finetune_specs() -> list[Spec]:
    """One :class:`Spec` per public callable of :mod:`dplib.training.finetune`. The valid call
    of :func:`~dplib.training.finetune.prepare_finetune` uses ``mode="last_layer"``, which can
    be repeated on the same model (``"lora"`` would inject adapters again on every call)."""
    try:
        from torch import nn

        from ..icl.tiny_lm import TINY_LM_DIR
        from ..training import finetune as FT
    except ImportError:          # torch absent: nothing of this topic to sweep
        return []
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
    return [
        Spec("dplib.training.finetune.prepare_finetune", lambda: FT.prepare_finetune,
             args=(model, "last_layer"),
             params=dict(model=_NOT_A_MODEL, alpha=[0.0, -1.0, NAN, INF, "1.0", [1.0]],
                         target_modules=[[], [3], "", 5, ["0"]],
                         head=["no_such_module", [], [3], "", 5])),
        Spec("dplib.experiments.finetune.rank_accuracy", lambda: _experiments().rank_accuracy,
             args=(_RANK_TABLE, 4, 1.0),        # declared; extras: not in the table's sweep
             params=dict(table=[{"rows": []}], rank=[8], epsilon=[2.0]),
             names=dict(epsilon="epsilon", rank="rank")),
        Spec("dplib.experiments.finetune.calibrated_sigma",
             lambda: _experiments().calibrated_sigma, args=(3.0, 0.5, 2)),      # declared
        Spec("dplib.training.finetune.trainable_parameter_count",
             lambda: FT.trainable_parameter_count, args=(model,),
             params=dict(model=_NOT_A_MODEL)),
        Spec("dplib.training.finetune.LogitsOnly", lambda: FT.LogitsOnly, args=(model,),
             params=dict(model=_NOT_A_MODEL)),
        Spec("dplib.experiments.finetune_hf.finetune_hf", _finetune_hf,      # declared
             args=(str(TINY_LM_DIR),), kwargs=_finetune_hf_kwargs()),
        Spec("dplib.icl.hf.pinned_revision", _pinned_revision, args=("gpt2",),
             params=dict(model_name=["", None, 3, "no-such/model"],
                         revision=["main", "v1.0", "607a30d", 3, "G" * 40])),
    ]


def _finetune_hf_kwargs() -> dict:
    """A valid call that runs offline in about a second: the tiny GPT-2, 20 reviews, one step."""
    from transformers import PreTrainedTokenizerFast

    from ..icl.data import load_book_data
    from ..icl.tiny_lm import TINY_LM_DIR
    tok = PreTrainedTokenizerFast(tokenizer_file=str(TINY_LM_DIR / "tokenizer.json"),
                                  unk_token="<unk>", pad_token="<pad>", eos_token="\n")
    return dict(data=load_book_data("sentiment").subset(20, 10), tokenizer=tok, epochs=0.5,
                sample_rate=0.5, max_length=4, seed=1)


def _finetune_hf():
    from ..experiments.finetune_hf import finetune_hf
    return finetune_hf


def _pinned_revision():
    from ..icl.hf import pinned_revision
    return pinned_revision
