"""Experiment drivers: the runs behind the book's stored tables.

A driver builds the data, the models and the runs of one chapter's experiment from the tested
library (:mod:`dplib.training`, :mod:`dplib.accounting`, ...) and returns plain numbers; a script
in ``benchmarks/`` runs it at full size and stores the result with its provenance
(:func:`dplib.provenance.run_provenance`), and the chapter loads and checks the stored table.

* :mod:`dplib.experiments.finetune` — chapter 13: fine-tuning a pretrained model privately
  (from scratch, last layer, bias terms, LoRA, all weights).
"""
