"""Experiment drivers: the runs behind the book's stored tables, and their command lines.

A driver builds the data, the models and the runs of one chapter's experiment from the tested
library (:mod:`dplib.training`, :mod:`dplib.accounting`, ...) and returns plain numbers; a script
in ``benchmarks/`` runs it at full size and stores the result with its provenance
(:func:`dplib.provenance.run_provenance`), and the chapter loads and checks the stored table.
The topic packages hold the science; this package holds what runs it. Importing it loads
nothing heavy: each module imports torch (if it needs it) itself.

* :mod:`dplib.experiments.encoding` — chapter 8: DP-SGD against gradient encoding
  (:mod:`dplib.encoding`) at matched ε on the digits, the ℓ1-error-against-D₂ curves and the
  encoding throughput, behind the stored tables of ``benchmarks/encoding.py``.
* :mod:`dplib.experiments.langevin` — chapter 7: DP-SGLD against DP-GLD, DP-SGD and no DP on
  private logistic regression (:mod:`dplib.langevin` holds the samplers and bounds), behind the
  stored tables of ``benchmarks/sgld_table.py``.
* :mod:`dplib.experiments.dpsgd_tables` — chapter 5: the stored speed and accuracy-per-ε tables
  of ``benchmarks/dpsgd_speed.py`` and ``benchmarks/dpsgd_utility.py``.
* :mod:`dplib.experiments.distributed` — chapter 5: the book's DP-SGD recipe on W processes
  (:func:`dplib.training.distributed.train_distributed`) and its command line,
  ``torchrun --nproc_per_node=W -m dplib.experiments.distributed --data digits``.
* :mod:`dplib.experiments.mechanism_audits` — the catalogue of audits of every mechanism in
  :mod:`dplib.mechanisms`, and of deliberately broken ones
  (:class:`dplib.attacks.catalogue.MechanismAudit` each), run by tests/audit and
  ``benchmarks/audit_mechanisms.py``.
* :mod:`dplib.experiments.svt_audits`, :mod:`dplib.experiments.median_audits` — chapter 12:
  the audits that refute the broken sparse-vector variants and the local-sensitivity median
  (:mod:`dplib.selection` holds the algorithms).
* :mod:`dplib.experiments.membership` — chapter 9: the stored membership-inference runs
  (targets, shadows, attack scores as ranks, the widget's populations, the canary audits) of
  ``benchmarks/membership_runs.py`` and their loader; :mod:`dplib.experiments.attacks` — the
  experiment it stores: train targets and shadows
  (:func:`~dplib.experiments.attacks.train_population`), attack them
  (:func:`~dplib.experiments.attacks.run_attacks`), the canary audit
  (:func:`~dplib.experiments.attacks.canary_audit`); the attacks themselves are in
  :mod:`dplib.attacks`.
* :mod:`dplib.experiments.finetune` — chapter 13: fine-tuning a pretrained model privately
  (from scratch, last layer, bias terms, LoRA, all weights) on the digits;
  :mod:`dplib.experiments.finetune_text` — the same comparison for the tiny GPT-2 on private
  reviews; :mod:`dplib.experiments.finetune_hf` — LoRA on a real Hugging Face model (GPT-2 at a
  pinned commit, SST-2), the chapter's switch for Colab with a GPU.
* :mod:`dplib.experiments.icl` — chapter 10: DP in-context learning's tables (accuracy against
  ε, membership inference against a 1-shot prompt, private product summaries, derailment by
  per-token noise) of ``benchmarks/dpicl.py`` and ``benchmarks/icl_summaries.py``;
  :mod:`dplib.experiments.icl_report` — the same experiments on every language model, stored
  by ``benchmarks/icl_models.py`` (:mod:`dplib.icl` holds the mechanisms and the models).
* :mod:`dplib.experiments.user_level` — chapter 13: user-level against record-level DP-SGD on
  simulated writers, accuracy per cap on records per writer and per ε, with each run's ε for one
  writer (the stored sweep of ``benchmarks/user_level_utility.py``).
"""
