"""Differentially private in-context learning (chapter 10).

In-context learning answers a query from demonstrations placed in the prompt; when the
demonstrations are private records, the answer can leak them. This package holds the chapter's
machinery, all of it tested:

* :mod:`.model` — the model interface and :class:`OfflineICL`, a small in-context learner that
  runs offline on a CPU (a documented stand-in for an LLM);
* :mod:`.hf` — :class:`HFCausalLM`, the same interface over Hugging Face causal LMs (when
  ``transformers`` is there), loaded only at pinned hub commits;
* :mod:`.tiny_lm` — a 2-layer GPT-2 and word-level tokenizer trained on the book's public
  corpus, stored in ``dplib/data/tiny_lm`` (a real transformer that runs offline);
* :mod:`.loader` — the chapter's model switch: ``load_model("offline" | "tiny" | hub name)``
  and the data each runs on;
* :mod:`.prompts` — prompt templates and batches of prompts over one exemplar pool;
* :mod:`.aggregation` — disjoint partitions, noisy vote aggregation and report-noisy-max
  (Wu et al. 2024), embedding- and keyword-space aggregation (ESA, KSA: joint exponential
  mechanism, propose-test-release);
* :mod:`.fewshot` — private few-shot generation of demonstrations (Tang et al. 2024);
* :mod:`.accounting` — (ε, δ) over many queries through :mod:`dplib.accounting`;
* :mod:`.classify` — DP-ICL classification of a batch of queries and its two baselines
  (zero-shot, one non-private prompt);
* :mod:`.data` — the book's small sentiment and topic data sets and the SST-2 / AG News loaders.

The chapter's experiments built on them (accuracy against ε, membership inference, summaries,
the table over every model) are :mod:`dplib.experiments.icl` and
:mod:`dplib.experiments.icl_report`.
"""
from .accounting import (EMBEDDING_SENSITIVITY, VOTE_SENSITIVITY, gaussian_epsilon_spent,
                         gaussian_noise_std, per_query_epsilon, vote_noise_std)
from .aggregation import (Votes, ensemble_votes, esa, joint_em_topk_probability,
                          joint_em_utilities, joint_exponential_topk, keyword_histogram,
                          noisy_vote, partition_exemplars, ptr_distance, ptr_release_probability,
                          ptr_topk, rnm_vote, topk_sequences, vote_histogram)
from .classify import DPICLResult, dp_icl_classify, single_prompt_predict, zero_shot_predict
from .data import (TASKS, TextDataset, load_agnews, load_book_data, load_sst2, make_book_data,
                   product_reference, public_corpus, tokenize, write_book_data)
from .fewshot import (generate_demonstrations, private_next_tokens, synthetic_demonstrations,
                      synthetic_demos_prompts)
from .hf import HFCausalLM, transformers_available
from .loader import LOCAL_MODELS, load_datasets, load_model
from .model import HashingEmbedder, OfflineICL, WordVectors, generate
from .prompts import PromptBatch, PromptTemplate, template_for
from .tiny_lm import load_tiny_lm

__all__ = [
    "OfflineICL", "HFCausalLM", "HashingEmbedder", "WordVectors", "generate",
    "transformers_available", "PromptTemplate", "PromptBatch", "template_for",
    "partition_exemplars", "ensemble_votes", "vote_histogram", "Votes", "noisy_vote",
    "rnm_vote", "esa", "keyword_histogram", "topk_sequences", "joint_em_utilities",
    "joint_exponential_topk", "ptr_distance", "ptr_topk", "ptr_release_probability",
    "joint_em_topk_probability",
    "private_next_tokens", "generate_demonstrations", "synthetic_demonstrations",
    "synthetic_demos_prompts",
    "VOTE_SENSITIVITY", "EMBEDDING_SENSITIVITY", "gaussian_noise_std", "vote_noise_std",
    "gaussian_epsilon_spent", "per_query_epsilon",
    "TASKS", "TextDataset", "load_book_data", "make_book_data", "write_book_data",
    "public_corpus", "product_reference", "tokenize", "load_sst2", "load_agnews",
    "DPICLResult", "dp_icl_classify", "zero_shot_predict", "single_prompt_predict",
    "LOCAL_MODELS", "load_model", "load_datasets", "load_tiny_lm",
]
