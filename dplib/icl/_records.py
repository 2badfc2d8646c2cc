"""The declarations of the DP-ICL records a function takes: a prompt template, a data set.

Apart from :mod:`dplib.icl._params` because they need the classes: this module imports
:mod:`dplib.icl.data` and :mod:`dplib.icl.prompts`, which declare their own parameters with
``_params`` (``data.py`` and ``prompts.py`` state the data-set check themselves, one line each).
"""
from __future__ import annotations

from .._constraints import InstanceOf
from .data import TextDataset
from .prompts import PromptTemplate

__all__ = ["TEMPLATE", "DATASET"]

#: The prompt template of a task (:func:`~dplib.icl.prompts.template_for`).
TEMPLATE = InstanceOf(PromptTemplate, "a PromptTemplate (dplib.icl.template_for(dataset))",
                      bad=(None, "x", ("negative", "positive")))
#: A data set of the chapter (:func:`~dplib.icl.data.load_book_data`, ``load_sst2``, ...).
DATASET = InstanceOf(TextDataset, "a TextDataset (dplib.icl.load_book_data(task))",
                     bad=(None, "sentiment", ["the lamp is bright"]))
