"""Chapter 10's model switch: one name picks the language model and the data it is run on.

``"offline"`` is the stand-in :class:`~dplib.icl.model.OfflineICL` (anywhere, no extra
package); ``"tiny"`` the book's 2-layer GPT-2 (:func:`~dplib.icl.tiny_lm.load_tiny_lm`,
offline, needs ``transformers``); any other name is a Hugging Face causal LM loaded by
:class:`~dplib.icl.hf.HFCausalLM` at a pinned hub commit (``revision=`` for names the book does
not pin). The first two run on the book's sentiment and topic data; a hub model runs on SST-2
and AG News, downloaded once (:func:`dplib.icl.data.load_sst2`, :func:`~dplib.icl.data.load_agnews`).
The DP-ICL code that follows is the same for all of them.
"""
from __future__ import annotations

import os

from .._constraints import Custom, constrained
from .._validate import shown
from ._params import COUNT
from .data import TextDataset, load_agnews, load_book_data, load_sst2

__all__ = ["LOCAL_MODELS", "load_model", "load_datasets"]

#: The names that run offline on the book's own data.
LOCAL_MODELS = ("offline", "tiny")


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be 'offline', 'tiny' or a Hugging Face model name, "
                         f"got {shown(name)}")
    return name.strip()


#: A model's name: "offline", "tiny" or a Hugging Face hub name (surrounding spaces dropped).
_NAME = Custom(lambda name, value: _check_name(value),
               "'offline', 'tiny' or a Hugging Face model name", ["", "   ", None, 3, ["tiny"]])


@constrained(name=_NAME)
def load_model(name: str = "offline", *, revision: str | None = None, device=None):
    """The language model ``name`` names, behind the interface of :mod:`dplib.icl.model`."""
    if name == "offline":
        from .model import OfflineICL
        return OfflineICL()
    if name == "tiny":
        from .tiny_lm import load_tiny_lm
        return load_tiny_lm(device=device)
    from .hf import HFCausalLM
    return HFCausalLM(name, revision=revision, device=device)


@constrained(name=_NAME, n_pool=COUNT, n_test=COUNT)
def load_datasets(name: str = "offline", *, cache: str | os.PathLike | None = None,
                  n_pool: int = 2000, n_test: int = 1000) -> tuple[TextDataset, TextDataset]:
    """(sentiment, topic) data for model ``name``: the book's data sets for a local model,
    SST-2 and AG News (``n_pool`` exemplars, ``n_test`` queries, downloaded to ``cache``) for a
    hub model, whose tokenizer knows real English."""
    if name in LOCAL_MODELS:
        return load_book_data("sentiment"), load_book_data("topic")
    return (load_sst2(cache, n_pool=n_pool, n_test=n_test),
            load_agnews(cache, n_pool=n_pool, n_test=n_test))
