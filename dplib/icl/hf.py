"""A Hugging Face causal language model behind the interface of :mod:`dplib.icl.model`.

:class:`HFCausalLM` puts any Hugging Face causal LM (GPT-2, Llama, …) behind the interface of
:class:`~dplib.icl.model.OfflineICL` (``label_logprobs``, ``next_token_logprobs``,
``vocabulary``, ``encode``/``decode``) when ``transformers`` is installed and the weights can be
loaded (e.g. in Colab): it renders each prompt to text, runs the model, and scores the first
token of each label word. DP-ICL and private few-shot generation then run on it unchanged.

``transformers`` is not a dependency of dplib (:func:`transformers_available` says whether it is
there), and only the pinned hub commits of :data:`PINNED_REVISIONS`, or a commit the caller
names, are ever loaded.
"""
from __future__ import annotations

import inspect
import re
from typing import Sequence

import numpy as np
from scipy.special import logsumexp

from .._common_params import TEXT
from .._constraints import constrained, unconstrained
from .._validate import shown
from ._params import COUNT
from .prompts import PromptBatch

__all__ = ["HFCausalLM", "transformers_available", "PINNED_REVISIONS", "pinned_revision"]


def transformers_available() -> bool:
    """Whether ``transformers`` can be imported (it is not a dependency of dplib)."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


#: The Hugging Face models the book names, each pinned to one commit of its hub repository
#: (``openai-community/gpt2`` is the repository ``gpt2`` now redirects to).
PINNED_REVISIONS: dict[str, str] = {
    "gpt2": "607a30d783dfa663caf39e06633721c8d4cfcd7e",
    "openai-community/gpt2": "607a30d783dfa663caf39e06633721c8d4cfcd7e",
}
_COMMIT = re.compile(r"[0-9a-f]{40}")


@constrained(model_name=TEXT)
def pinned_revision(model_name: str, revision: str | None = None) -> str:
    """The hub commit to load ``model_name`` at: ``revision``, else the book's pin for that name.

    Refuses (``ValueError``) rather than warns when neither is there, and refuses any revision
    that is not a full 40-hex commit hash: a name alone, a branch (``"main"``) or a tag can be
    moved on the hub, so what ``from_pretrained`` loads — code in its tokenizer and config
    included — would change under the reader without a word. A warning in a notebook is easy to
    miss; an error names the fix.
    """
    if not isinstance(model_name, str) or not model_name:
        raise ValueError(f"model_name must be a non-empty string, got {shown(model_name)}")
    if revision is None:
        revision = PINNED_REVISIONS.get(model_name)
        if revision is None:
            raise ValueError(
                f"revision is required for model_name={shown(model_name)}: pass revision=<the "
                f"40-hex "
                f"commit of its Hugging Face repository> (pinned by default: "
                f"{sorted(PINNED_REVISIONS)})")
    if not isinstance(revision, str) or not _COMMIT.fullmatch(revision):
        raise ValueError(f"revision must be a 40-hex commit hash (not a branch or tag, which can "
                         f"move), got {shown(revision)}")
    return revision


class HFCausalLM:
    """A Hugging Face causal LM behind the interface of :class:`~dplib.icl.model.OfflineICL`.

    ``HFCausalLM("gpt2")`` loads the tokenizer and model with ``transformers`` (install it and be
    online, or have the weights cached) at the hub commit :data:`PINNED_REVISIONS` gives. Any
    other model is refused unless ``revision=<40-hex commit>`` is given: a name, branch or tag
    can be moved on the hub, changing what is loaded without a word, and an error names the fix
    where a warning is easily missed. Weights are read from safetensors only and no code from the
    hub is run (``use_safetensors=True``, ``trust_remote_code=False``): a pickled checkpoint can
    run code when loaded. ``model``/``tokenizer`` may instead be passed in directly (any objects
    with the same minimal API; the tests use a tiny fake). Prompts are rendered to text,
    left-truncated to ``max_length`` tokens and run in batches of ``batch_size`` with left
    padding; position ids follow the attention mask so padding does not shift positions.

    Classification scores the *first* token of " <label>" for each label and renormalises over
    the labels (the label words of the book's tasks are one GPT-2 token each).
    """

    @constrained(batch_size=COUNT, max_length=COUNT)
    def __init__(self, model_name: str = "gpt2", *, revision: str | None = None, model=None,
                 tokenizer=None, device=None, batch_size: int = 8, max_length: int = 1024,
                 local_files_only: bool = False):
        import torch

        from ..device import as_device

        if model is None or tokenizer is None:
            revision = pinned_revision(model_name, revision)   # before anything is imported
            if not transformers_available():
                raise ImportError("HFCausalLM needs the `transformers` package "
                                  "(pip install transformers) and the model weights; "
                                  "use dplib.icl.OfflineICL to run offline")
            from transformers import AutoModelForCausalLM, AutoTokenizer
            hub = dict(revision=revision, local_files_only=local_files_only,
                       trust_remote_code=False)
            tokenizer = AutoTokenizer.from_pretrained(model_name, **hub)
            model = AutoModelForCausalLM.from_pretrained(model_name, use_safetensors=True, **hub)
        self.torch = torch
        self.device = as_device(device)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        self.batch_size, self.max_length = batch_size, max_length
        self.eos_id = int(getattr(tokenizer, "eos_token_id", 0) or 0)
        params = inspect.signature(self.model.forward).parameters
        self._takes_positions = "position_ids" in params or any(
            p.kind == p.VAR_KEYWORD for p in params.values())

    @property
    def vocabulary(self) -> range:
        return range(self._vocab_size())

    def _vocab_size(self) -> int:
        cfg = getattr(self.model, "config", None)
        return int(getattr(cfg, "vocab_size", None) or len(self.tokenizer))

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def decode(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        if self.eos_id in ids:
            ids = ids[:ids.index(self.eos_id)]
        return self.tokenizer.decode(ids)

    def _last_logits(self, texts: list[str]) -> np.ndarray:
        torch = self.torch
        out = []
        for s in range(0, len(texts), self.batch_size):
            chunk = [self.encode(t)[-self.max_length:] or [self.eos_id]
                     for t in texts[s:s + self.batch_size]]
            width = max(len(c) for c in chunk)
            ids = torch.full((len(chunk), width), self.eos_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, c in enumerate(chunk):                     # left padding
                ids[r, width - len(c):] = torch.tensor(c)
                mask[r, width - len(c):] = 1
            kw = {"attention_mask": mask.to(self.device)}
            if self._takes_positions:
                kw["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(self.device)
            with torch.no_grad():
                logits = self.model(ids.to(self.device), **kw).logits[:, -1, :]
            out.append(torch.log_softmax(logits.float(), dim=-1).cpu().numpy())
        return np.concatenate(out).astype(float)

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm sentence embeddings from the model's last hidden layer, (len(texts), d).

        Each text is run alone through the model (no padding can leak between texts, so an
        embedding is a function of its own text only, as ESA's public candidates require) and
        the hidden states of its tokens are averaged (mean pooling; Reimers & Gurevych 2019,
        "Sentence-BERT", EMNLP, found mean pooling the best of their pooling choices), then
        scaled to norm 1.
        """
        torch = self.torch
        out = []
        for text in texts:
            ids = self.encode(str(text))[-self.max_length:] or [self.eos_id]
            x = torch.tensor([ids], dtype=torch.long, device=self.device)
            with torch.no_grad():
                h = self.model(x, output_hidden_states=True).hidden_states[-1][0]
            v = h.float().mean(dim=0).cpu().numpy().astype(float)
            out.append(v / max(np.linalg.norm(v), 1e-12))
        return np.stack(out) if out else np.zeros((0, self._hidden_size()))

    def _hidden_size(self) -> int:
        cfg = getattr(self.model, "config", None)
        return int(getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 1))

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def next_token_logprobs(self, batch: PromptBatch) -> np.ndarray:
        """log p(next token | rendered prompt), shape (B, vocabulary size)."""
        return self._last_logits([batch.render(b) for b in range(len(batch))])

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def label_logprobs(self, batch: PromptBatch) -> np.ndarray:
        """log p(label | rendered prompt) over the task's labels, shape (B, C)."""
        first = [self.encode(" " + lab)[0] for lab in batch.template.labels]
        if len(set(first)) < len(first):
            raise ValueError(f"the labels {batch.template.labels} share their first token; "
                             "rename them so that the first tokens differ")
        lp = self._last_logits([batch.render(b) for b in range(len(batch))])[:, first]
        return lp - logsumexp(lp, axis=1, keepdims=True)

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def predict(self, batch: PromptBatch) -> np.ndarray:
        return np.argmax(self.label_logprobs(batch), axis=1)
