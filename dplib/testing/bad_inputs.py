"""The bad-input sweep: every public function of dplib must refuse bad values by name.

Every public function and class of dplib is found by walking the package with ``inspect``
(:func:`public_callables`); each must either have an entry in the table (:func:`all_specs`: a
valid call plus the kind of every parameter that can be given a bad value; the entries live in
:mod:`dplib.testing.bad_inputs_core`, :mod:`dplib.testing.bad_inputs_ml` and
:mod:`dplib.testing.bad_inputs_models`) or be in :data:`EXCLUDED` with the reason. :func:`cases`
turns the table into concrete calls: one parameter replaced by one bad value (NaN, inf, a
negative, out of range, a wrong type, an empty or mismatched array, a BatchNorm model, …). The
contract checked on each (:func:`check_case`): a ``ValueError`` or ``TypeError`` whose message
names the parameter; never a returned number.

Run by tests/audit/test_bad_inputs.py and benchmarks/bad_inputs.py.
"""
from __future__ import annotations

from .bad_inputs_core import core_specs, event_specs, support_specs
from .bad_inputs_ml import ml_specs
from .bad_inputs_figures import figures_specs, figures_specs_more
from .bad_inputs_models import (encoding_specs, icl_model_specs, models_erm_specs,
                                private_run_specs, transformer_specs)
from .bad_inputs_correlated import correlated_specs
from .bad_inputs_selection import selection_specs
from .bad_inputs_plotting import plotting_specs
from .bad_inputs_synthetic import synthetic_specs
from .bad_inputs_zcdp import zcdp_specs
from .bad_inputs_reporting import reporting_specs
from .bad_inputs_finetune import finetune_specs
from .bad_inputs_user_level import user_level_specs
from .bad_inputs_experiments import experiments_specs
from .bad_inputs_correlated import CORRELATED_EXCLUDED
from .bad_inputs_experiments import EXPERIMENTS_EXCLUDED
from .bad_inputs_finetune import FINETUNE_EXCLUDED
from .bad_inputs_membership import MEMBERSHIP_EXCLUDED, membership_specs
from .bad_inputs_reporting import REPORTING_EXCLUDED
from .bad_inputs_selection import SELECTION_EXCLUDED
from .bad_inputs_synthetic import SYNTHETIC_EXCLUDED
from .bad_inputs_user_level import USER_LEVEL_EXCLUDED
from .bad_inputs_zcdp import ZCDP_EXCLUDED
from .bad_inputs_els import ELS_EXCLUDED, els_specs
from .bad_inputs_user_level_utility import (USER_LEVEL_UTILITY_EXCLUDED,
                                               user_level_utility_specs)
from ._sweep import (BAD, INF, NAN, Case, Spec, call_spec, cases, check_case,  # noqa: F401
                     public_callables)

__all__ = ["BAD", "INF", "NAN", "Case", "Spec", "call_spec", "cases", "check_case",
           "public_callables", "EXCLUDED", "KNOWN_GAPS", "all_specs"]


#: Public callables deliberately not in the sweep, with the reason.
_BASE_EXCLUDED: dict[str, str] = {
    **{name: "a step of PLDAccountant shared between its modules, called only with the "
             "accountant's validated grids" for name in (
        "dplib.accounting.pld_fft.composition_window", "dplib.accounting.pld_fft.delta_curve",
        "dplib.accounting.pld_grid.loss_range",
        "dplib.accounting.pld_grid.variance_over_mean_abs")},
    "dplib.accounting.events.DpEvent": "abstract base class of the events (each is swept)",
    "dplib.accounting.events.SampledEvent": "base class of the two sampled events (swept)",
    "dplib.accounting.events.RDPCurveEvent": "abstract base: subclasses state their own curve",
    "dplib.accounting.events.Step": "record built by flatten (swept) from validated events",
    "dplib.accounting.registry.accountant_names": "no parameters",
    "dplib.encoding.train.encoded_sum": "the private-sum part of encoded_noisy_gradient and "
                                        "train_encoded: needs a model and data (its code book, "
                                        "loss and chunk size are declared)",
    "dplib.training.engine.Privatizer": "a typing.Protocol, no code",
    "dplib.training.engine.EpsilonTracker": "built by train/train_encoded from validated "
                                            "settings (swept)",
    "dplib.training.engine.dpsgd_loop": "the loop of train/train_encoded/the batched trainer "
                                        "(all swept); its parts are validated there",
    "dplib.training.engine.batch_sizes": "diagnostic of poisson_batches' output (swept)",
    **{name: "a per-layer step of ghost_clipped_grad_sum/ghost_plan (swept), called with the "
             "layers and tensors they recorded and checked" for name in (
        "dplib.training.ghost_layers.layer_path", "dplib.training.ghost_layers.prepare_layer",
        "dplib.training.ghost_layers.ClipFactors",
        "dplib.training.ghost_layers.layer_clipped_sum")},
    **{name: "a validator: raising ValueError on bad input is all it does (used by swept "
             "functions)" for name in (
        "dplib.encoding.moments.check_noise", "dplib.encoding.moments.check_orders_int",
        "dplib.training.grads.check_batch",
        "dplib.training.preflight.as_tensors", "dplib.training.batched.check_masks",
        "dplib.training.ghost.check_ghost_supported",
        "dplib.training.preflight.check_model_and_data",
        "dplib.training.preflight.check_ghost_on_probe")},
    "dplib.accounting.calibrate.pld_warm_start": "the PLD accountant's calibration shortcut, "
                                                 "called by calibrate (swept) with its "
                                                 "validated arguments",
    "dplib.training.preflight.preflight": "the pre-flight of train/train_distributed/"
                                          "train_models_batched (all swept), given their "
                                          "validated RunConfig; its checks are swept one by one",
    **{name: "a stage builder the trainers call with their validated RunConfig (swept via "
             "train)" for name in ("dplib.training.trainer.make_optimizer",
                                   "dplib.training.trainer.make_privatizer")},
    "dplib.training.clipped_sum.StateSnapshot": "internal record of a model's state, taken "
                                                "and restored by the clipped-sum stage (swept)",
    "dplib.training.not_private.NotPrivate": "result record of the not-covered diagnostics",
    "dplib.training.release.all_field_kinds": "no parameters (the classification table)",
    "dplib.accounting.pld_grid.DiscretePLD": "data container built by subsampled_gaussian_pld/compose",
    "dplib.attacks.audit_stats.AuditResult": "result record returned by audit_from_samples",
    "dplib.attacks.catalogue.MechanismAudit": "record built by mechanism_audits (its run() is "
                                              "swept)",
    "dplib.device.Setup": "result record returned by setup()",
    "dplib.device.quick_mode": "no parameters (reads DPBOOK_QUICK)",
    "dplib.widget_controls.format_value": "formats any value for display (numbers with "
                                          "separators, dropdown options as their text): no "
                                          "bad input",
    "dplib.widget_frames.frames_enabled": "no parameters (reads DPBOOK_WIDGET_FRAMES)",
    "dplib.widget_frames.FrameGrid": "result record returned by frame_grid/plan_grid (swept)",
    "dplib.widget_frames.live_control_html": "the body of FigurePanel.static_html, called with "
                                             "a panel's validated controls and its frame_grid/"
                                             "plan_grid grid (swept); its missing-frames check "
                                             "is tested in tests/unit",
    "dplib.datasets.default_root": "no parameters (reads DPBOOK_DATA)",
    "dplib.plotting.use_book_style": "no parameters",
    "dplib.widget_controls.Control": "record built by slider/int_slider/log_slider/dropdown "
                                     "(swept)",
    "dplib.widgets.FigurePanel": "built by interactive_figure (swept)",
    # result records (dataclasses returned by swept functions)
    **{name: "result record returned by a library function" for name in (
        "dplib.attacks.canary.CanaryAuditResult", "dplib.experiments.attacks.CanaryAudit",
        "dplib.attacks.ladder.LadderResult", "dplib.attacks.one_run.OneRunAudit",
        "dplib.experiments.attacks.Population", "dplib.attacks.extraction.ExtractionResult",
        "dplib.attacks.extraction.InversionResult", "dplib.attacks.lira.GaussianFits",
        "dplib.training.batched.BatchedModels", "dplib.features.PublicFeatureMap",
        "dplib.icl.aggregation.Votes", "dplib.icl.data.TextDataset",
        "dplib.icl.classify.DPICLResult", "dplib.icl.prompts.PromptBatch",
        "dplib.langevin.logistic.LogisticConstants", "dplib.langevin.sampler.SGLDResult",
        "dplib.training.trainer.TrainResult")},
    # experiment drivers: minutes of training each; their inputs reach the swept functions
    **{name: "experiment driver (minutes per call); validated by the swept functions it calls"
       for name in (
        "dplib.experiments.attacks.canary_audit", "dplib.experiments.attacks.digits_pool",
        "dplib.experiments.attacks.mia_model",
        "dplib.attacks.roc.population_epsilon_lower_bound",
        "dplib.experiments.attacks.run_attacks", "dplib.experiments.attacks.train_population",
        "dplib.attacks.shadow.ShadowModelAttack", "dplib.training.batched.train_models_batched",
        "dplib.training.batched.train_models_sequential",
        "dplib.training.distributed.launch", "dplib.experiments.distributed.digits_recipe",
        "dplib.experiments.distributed.main",
        "dplib.attacks.extraction.extract_logistic_regression",
        "dplib.attacks.extraction.invert_model", "dplib.attacks.extraction.prediction_api",
        "dplib.features.digits_features", "dplib.features.synthetic_features",
        "dplib.icl.aggregation.ensemble_votes", "dplib.experiments.icl.accuracy_table",
        "dplib.experiments.icl.derailment", "dplib.icl.classify.dp_icl_classify",
        "dplib.experiments.icl.mia_one_shot", "dplib.icl.classify.single_prompt_predict",
        "dplib.experiments.icl.summarise_products", "dplib.icl.classify.zero_shot_predict",
        "dplib.icl.fewshot.generate_demonstrations", "dplib.icl.fewshot.private_next_tokens",
        "dplib.icl.fewshot.synthetic_demonstrations",
        "dplib.icl.fewshot.synthetic_demos_prompts",
        "dplib.experiments.langevin.compare_methods",
        "dplib.experiments.langevin.compare_on_digits",
        "dplib.experiments.langevin.scaling_study",
        )},
    # data I/O, text utilities and language-model adapters (no privacy parameter; their files
    # and downloads are tested in tests/unit)
    **{name: "data I/O / text utility / model adapter: no numeric privacy input" for name in (
        "dplib.datasets.is_online", "dplib.datasets.load_cifar10", "dplib.datasets.load_mnist",
        "dplib.icl.data.download", "dplib.icl.data.load_agnews", "dplib.icl.data.load_book_data",
        "dplib.icl.data.load_sst2", "dplib.icl.data.make_book_data",
        "dplib.icl.data.product_reference", "dplib.icl.data.public_corpus",
        "dplib.icl.data.tokenize",
        "dplib.icl.data.vocabulary", "dplib.icl.data.write_book_data",
        "dplib.experiments.icl.format_table", "dplib.experiments.icl.unigram_f1",
        "dplib.icl.hf.HFCausalLM", "dplib.icl.hf.transformers_available",
        "dplib.icl.model.HashingEmbedder", "dplib.icl.model.OfflineICL",
        "dplib.icl.model.WordVectors", "dplib.icl.model.generate",
        "dplib.icl.prompts.PromptTemplate",
        "dplib.icl.prompts.template_for", "dplib.experiments.langevin.format_comparison",
        "dplib.icl.tiny_lm.build_tokenizer", "dplib.icl.tiny_lm.save_tiny_lm",
        "dplib.icl.tiny_lm.load_tiny_lm", "dplib.experiments.icl_report.load_model_table",
        "dplib.experiments.icl_report.format_model_table")},
    "dplib.attacks.roc.plot_roc": "draws on a matplotlib axis; its inputs go through roc_curve",
    "dplib.figures.attacks.shadow_count_figure": "draws a ShadowCountCurve of "
                                                 "lira_by_shadow_count",
    "dplib.experiments.attacks.ShadowCountCurve": "result record of lira_by_shadow_count",
    "dplib.experiments.attacks.lira_by_shadow_count": "experiment driver of chapter 9 over a "
                                                     "trained population (train_population); "
                                                     "tested in tests/unit/test_figures_attacks.py",
    "dplib.figures.dpsgd.training_run_figure": "draws a TrainResult of dplib.training.train, "
                                               "whose inputs are swept there",
    # chapter 8: what _specs_encoding does not call, with the reason
    "dplib.encoding.noise.NoiseDistribution": "abstract base class; its subclasses are swept",
    "dplib.encoding.noise.ScipyNoise": "wraps a scipy distribution object (refuses skewed ones;"
                                       " tested in tests/unit/test_encoding.py)",
    "dplib.encoding.moments.MomentTable": "data container built by moment_table",
    **{f"dplib.{name}": "training loop or experiment driver of chapter 8; its inputs "
                        "go through the swept functions and dplib.training"
       for name in (
        "encoding.codebook.gradient_values", "encoding.train.EncodedTrainResult",
        "encoding.train.encoded_noisy_gradient", "encoding.train.flat_grads",
        "encoding.train.privatization_error", "encoding.train.train_encoded",
        "experiments.encoding.compare_on_digits", "experiments.encoding.digits_problem",
        "experiments.encoding.encoding_throughput", "experiments.encoding.format_table",
        "experiments.encoding.gaussian_sigma_for_epsilon", "experiments.encoding.l1_versus_d2",
        "experiments.encoding.method_noise", "experiments.encoding.run_method",
        "experiments.encoding.same_lr_control")},
}


#: Every exclusion: the ones above and each table's own.
EXCLUDED: dict[str, str] = {**_BASE_EXCLUDED, **CORRELATED_EXCLUDED, **EXPERIMENTS_EXCLUDED,
                            **FINETUNE_EXCLUDED, **MEMBERSHIP_EXCLUDED, **REPORTING_EXCLUDED,
                            **SELECTION_EXCLUDED, **SYNTHETIC_EXCLUDED, **USER_LEVEL_EXCLUDED,
                            **ZCDP_EXCLUDED, **ELS_EXCLUDED,
                            **USER_LEVEL_UTILITY_EXCLUDED}


def all_specs() -> list[Spec]:
    """Every entry of the table: one :class:`Spec` per swept public callable."""
    return (core_specs() + support_specs() + event_specs() + ml_specs() + encoding_specs()
            + models_erm_specs() + icl_model_specs() + transformer_specs() + figures_specs()
            + figures_specs_more() + private_run_specs() + correlated_specs() + selection_specs()
            + plotting_specs() + synthetic_specs() + zcdp_specs() + finetune_specs()
            + reporting_specs() + user_level_specs() + experiments_specs()
            + membership_specs() + els_specs() + user_level_utility_specs())


#: Cases known to fail, in modules this sweep's author may not edit; reported to their owners.
#: The sweep checks that they still fail, so a fix is noticed and the entry removed.
KNOWN_GAPS: dict[str, str] = {}
