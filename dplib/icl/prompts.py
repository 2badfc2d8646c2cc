"""Prompts for in-context learning: a template, and a batch of prompts that share a pool.

An ICL prompt is an instruction, k demonstrations (input, label) and a query. DP-ICL builds
*many* prompts — one per disjoint subset of the private exemplars and per query — so the batch
stores them compactly: the exemplar pool once, and for each prompt the indices of its
demonstrations (``-1`` = empty slot) and its query text. Models read the batch directly (the
offline learner) or render each prompt to plain text (the Hugging Face adapter)::

    Classify the sentiment of each review. negative: bad awful terrible poor. positive: ...

    Review: the lamp was very bright
    Sentiment: positive

    Review: the kettle is leaky and slow
    Sentiment:

For generation the demonstrations are unlabelled texts and the "query" is the prefix of the text
being written; the rendered prompt then ends with ``Review: <prefix>``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._constraints import InstanceOf, constrained, unconstrained
from .data import TextDataset

__all__ = ["PromptTemplate", "PromptBatch", "template_for"]


@unconstrained("a record of public strings; its one check, one description per label, relates "
               "two fields and stays in __post_init__")
@dataclass(frozen=True)
class PromptTemplate:
    """How prompts of one task look: label names, their public descriptions, field names.

    ``descriptions`` (one short public text per label, or empty) is what a zero-shot prompt tells
    the model about each label; it contains no private data.
    """
    labels: tuple[str, ...]
    descriptions: tuple[str, ...] = ()
    input_name: str = "Input"
    output_name: str = "Label"
    instruction: str = ""

    def __post_init__(self):
        if self.descriptions and len(self.descriptions) != len(self.labels):
            raise ValueError(f"descriptions must have one entry per label ({len(self.labels)}), "
                             f"got {len(self.descriptions)}")

    def header(self) -> str:
        desc = " ".join(f"{lab}: {d}." for lab, d in zip(self.labels, self.descriptions))
        head = self.instruction or (f"Classify the {self.output_name.lower()} of each "
                                    f"{self.input_name.lower()}.")
        return f"{head} {desc}".strip()

    @unconstrained("renders the demonstrations PromptBatch.render picked from its checked "
                   "batch")
    def render(self, demos: Sequence[tuple[str, int | None]], query: str, *,
               generation: bool = False) -> str:
        """The prompt as text: header, one block per demonstration, then the query."""
        parts = [self.header()] if not generation else []
        for text, label in demos:
            block = f"{self.input_name}: {text}"
            if label is not None and not generation:
                block += f"\n{self.output_name}: {self.labels[int(label)]}"
            parts.append(block)
        if generation:
            parts.append(f"{self.input_name}: {query}".rstrip())
            return "\n\n".join(parts)
        parts.append(f"{self.input_name}: {query}\n{self.output_name}:")
        return "\n\n".join(parts)


@constrained(dataset=InstanceOf(TextDataset, "a TextDataset (dplib.icl.load_book_data(task))",
                                bad=(None, "sentiment", ["the lamp is bright"])))
def template_for(dataset) -> PromptTemplate:
    """The template of a :class:`dplib.icl.data.TextDataset`."""
    return PromptTemplate(tuple(dataset.labels), tuple(dataset.descriptions),
                          dataset.input_name, dataset.output_name)


@unconstrained("its checks relate its fields (demos against the pool size, one query per "
               "prompt, one label per pool text) and stay in __post_init__")
@dataclass(frozen=True)
class PromptBatch:
    """B prompts over one exemplar pool.

    ``demos[b]`` holds the pool indices of prompt b's demonstrations (``-1`` pads), ``queries[b]``
    its query (classification) or prefix (generation). ``pool_labels`` is ``None`` for
    unlabelled demonstrations (generation).
    """
    template: PromptTemplate
    pool_texts: Sequence[str]
    pool_labels: np.ndarray | None
    demos: np.ndarray
    queries: Sequence[str]
    generation: bool = False
    _checked: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        d = np.asarray(self.demos)
        if d.ndim != 2 or not np.issubdtype(d.dtype, np.integer):
            raise ValueError(f"demos must be a 2-D integer array (prompts x slots), got shape "
                             f"{d.shape} and dtype {d.dtype}")
        n = len(self.pool_texts)
        if d.size and (d.min() < -1 or d.max() >= n):
            raise ValueError(f"demos must hold pool indices in [-1, {n - 1}] (-1 = empty slot), "
                             f"got values in [{d.min()}, {d.max()}]")
        if len(self.queries) != d.shape[0]:
            raise ValueError(f"queries must have one entry per prompt ({d.shape[0]}), "
                             f"got {len(self.queries)}")
        if self.pool_labels is not None and len(self.pool_labels) != n:
            raise ValueError(f"pool_labels must have one label per pool text ({n}), "
                             f"got {len(self.pool_labels)}")
        object.__setattr__(self, "demos", d.astype(np.int64, copy=False))

    def __len__(self) -> int:
        return self.demos.shape[0]

    @unconstrained("called by the models for b in range(len(batch))")
    def render(self, b: int) -> str:
        """Prompt ``b`` as plain text (what a language model reads)."""
        idx = self.demos[b][self.demos[b] >= 0]
        labels = (None,) * idx.size if self.pool_labels is None else self.pool_labels[idx]
        demos = [(self.pool_texts[i], None if y is None else int(y)) for i, y in zip(idx, labels)]
        return self.template.render(demos, self.queries[b], generation=self.generation)
