"""Bad-input specs (:class:`~dplib.testing.bad_inputs.Spec`) of the chapters' figures
(:mod:`dplib.figures`) and the small helpers they brought with them."""
from __future__ import annotations

import importlib

import numpy as np

from ._sweep import INF, NAN, Spec

__all__ = ["figures_specs", "figures_specs_more"]


def figures_specs() -> list[Spec]:
    """Chapters 1-5: probability tree, posteriors, neighbouring outputs, accountants, DP-SGD."""
    import matplotlib
    matplotlib.use("Agg")
    from dplib.figures import composition as FC
    from dplib.figures import dpsgd as FD
    from dplib.figures import mechanisms as FM
    from dplib.figures import randomized_response as FR
    from dplib.figures import subsampling as FS
    from matplotlib.figure import Figure
    RR = importlib.import_module("dplib.mechanisms.randomized_response")   # the module, not
    #                                                   the function of the same name
    norms = {"start": np.array([0.5, 2.0, 3.0])}
    return [
        Spec("dplib.mechanisms.randomized_response.rr_posterior", lambda: RR.rr_posterior,
             args=(0.1, 1.0), params=dict(report=[2, True, "yes", None, 1.5])),
        # dplib.figures: declared parameters (dplib._constraints); params are the extras
        Spec("dplib.figures.randomized_response.probability_tree", lambda: FR.probability_tree,
             params=dict(heads=[-0.2, 1.2])),
        Spec("dplib.figures.randomized_response.posterior_curves", lambda: FR.posterior_curves,
             params=dict(prior=[-0.2, 1.2])),
        Spec("dplib.figures.randomized_response.tradeoff_region", lambda: FR.tradeoff_region),
        Spec("dplib.figures.mechanisms.neighbour_outputs_figure",
             lambda: FM.neighbour_outputs_figure, args=(1.0,), kwargs=dict(delta=1e-5),
             params=dict(delta=[-0.1, 1.5, "1e-5", None])),     # None: gaussian needs δ
        Spec("dplib.figures.mechanisms.local_vs_central_errors",
             lambda: FM.local_vs_central_errors, args=(1.0, [100, 1000]),
             kwargs=dict(trials=20, rng=0)),
        Spec("dplib.figures.composition.privacy_loss_tail_figure",
             lambda: FC.privacy_loss_tail_figure,
             params=dict(mu=["1", 50.0], epsilon=["1"])),
        Spec("dplib.figures.composition.accountants_figure", lambda: FC.accountants_figure,
             args=(10, 2.0, 1e-5)),
        Spec("dplib.figures.subsampling.amplification_figure",
             lambda: FS.amplification_figure,
             params=dict(sample_rate=[-0.2, 1.2], epsilon_max=[0.5, -1.0, "10"])),
        Spec("dplib.figures.dpsgd.pipeline_figure", lambda: FD.pipeline_figure,
             kwargs=dict(noise_multiplier=1.0, max_grad_norm=1.0, sample_rate=0.01, n=1000),
             params=dict(noise_multiplier=["1"], max_grad_norm=["1"],
                         sample_rate=[-0.1, 1.5, "0.1"], n=[-3, 2.5])),
        Spec("dplib.figures.dpsgd.clipped_fraction", lambda: FD.clipped_fraction,
             args=([0.5, 2.0], 1.0)),
        Spec("dplib.figures.dpsgd.gradient_norm_histogram", lambda: FD.gradient_norm_histogram,
             args=(norms, 1.0)),
        # declared, so swept now that a bad value costs nothing: the drawing helpers
        Spec("dplib.figures.mechanisms.local_vs_central_figure",
             lambda: FM.local_vs_central_figure,
             args=(FM.local_vs_central_errors(1.0, [100, 1000], trials=20, rng=0),),
             kwargs=dict(epsilon=1.0)),
        Spec("dplib.figures.subsampling.draw_subsampled_pair", lambda: FS.draw_subsampled_pair,
             args=(Figure().subplots(),)),
        Spec("dplib.figures.subsampling.draw_amplification_curves",
             lambda: FS.draw_amplification_curves, args=(Figure().subplots(),)),
    ]


def figures_specs_more() -> list[Spec]:
    """Chapters 6-9: coupled diffusions, SGLD's utility bound, a gradient beside its clamp
    thresholds, an attack's operating point."""
    import matplotlib
    matplotlib.use("Agg")
    import torch

    from dplib.attacks import roc as AR
    from dplib.encoding import Codebook
    from dplib.encoding import codebook as EC
    from dplib.figures import encoding as FE
    book = Codebook(np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5]]))
    grad = torch.tensor([0.3, -0.1, 0.0, 2.0])
    from dplib.figures import langevin as FL
    from dplib.langevin import sgld as LS
    small = dict(n=50, K=20, paths=1, seed=1)
    return [
        # dplib.figures.langevin: every parameter declared (extras: none)
        Spec("dplib.figures.langevin.coupled_runs", lambda: FL.coupled_runs, kwargs=small),
        Spec("dplib.figures.langevin.coupled_runs_figure", lambda: FL.coupled_runs_figure,
             kwargs=small),
        Spec("dplib.langevin.sgld.sgld_utility_bound", lambda: LS.sgld_utility_bound,
             args=(2.0, 1.0, 1.0, 1.0, 2.0, 1000, 10),
             params=dict(alpha=[0.5, "2"])),
        # declared; grads of the wrong width for the code book is a relation
        Spec("dplib.encoding.codebook.clamp_thresholds", lambda: EC.clamp_thresholds,
             args=(grad, book), params=dict(grads=[torch.ones(3)], codebook=["x", 1.0])),
        # the figures also take a numpy gradient
        # codebook, window declared; grad's length is a relation with the codebook
        Spec("dplib.figures.encoding.clamp_data", lambda: FE.clamp_data, args=(grad, book),
             params=dict(grad=[None, "abc", torch.ones(3), [NAN, 0.0, 0.0, 1.0]])),
        Spec("dplib.figures.encoding.clamp_figure", lambda: FE.clamp_figure, args=(grad, book),
             kwargs=dict(window=2), params=dict(grad=[None, "abc", torch.ones(3)],
                                                window=[5])),
        Spec("dplib.figures.attacks.operating_points_figure",
             lambda: importlib.import_module("dplib.figures.attacks").operating_points_figure,
             args=({"non-private": {"loss": AR.operating_point([0.9, 0.1, 0.8, 0.3],
                                                                [1, 0, 1, 0], 0.5)}},),
             kwargs=dict(fpr=0.5)),                                      # declared
        Spec("dplib.attacks.roc.operating_point", lambda: AR.operating_point,
             args=([0.9, 0.1, 0.8, 0.3], [1, 0, 1, 0], 0.25),
             params=dict(scores=[[NAN, 0.1, 0.8, 0.3], [0.1], "abc", None],
                         labels=[[1, 0, 2, 0], "abc", None],
                         confidence=[-0.1, 1.5, NAN, "0.9", None])),
    ]
