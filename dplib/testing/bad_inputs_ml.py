"""Bad-input specs (:class:`~dplib.testing.bad_inputs.Spec`) of Langevin dynamics, SGLD, DP-SGD
training, the membership-inference and canary attacks, public features and DP-ICL. Every import
is lazy: a module whose optional dependency is missing contributes nothing."""
from __future__ import annotations

import numpy as np

from ._sweep import INF, NAN, Spec

__all__ = ["ml_specs", "training_fixture"]


def _bn_model():
    import torch.nn as nn
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))


def training_fixture() -> tuple:
    """(x, y, lin, ce): six examples, a fresh logistic regression, cross-entropy — the valid
    call shared by the DP-SGD specs (torch imported here)."""
    import torch
    import dplib.training as TR
    x = torch.arange(24.0).reshape(6, 4) / 10
    y = torch.tensor([0, 1, 0, 1, 0, 1])

    def lin():
        return TR.make_logistic_regression(4, 2)

    def ce(o, t):
        return torch.nn.functional.cross_entropy(o, t)
    return x, y, lin, ce


def ml_specs() -> list[Spec]:
    """Langevin, SGLD, DP-SGD training, attacks' metrics, features, ICL accounting/aggregation.
    Every import is lazy: a module that is missing (optional dependency) contributes nothing."""
    out: list[Spec] = []
    try:
        import dplib.langevin as LG
        dyn = dict(alpha=2.0, sensitivity=4.0, sigma=0.02, eta=0.02, lam=1.0, n=5000, K=100)
        out += [
            Spec("dplib.langevin.dynamics.privacy_dynamics_rdp", lambda: LG.privacy_dynamics_rdp,
                 kwargs=dyn, params=dict(alpha=["2"])),
            Spec("dplib.langevin.dynamics.composition_rdp", lambda: LG.composition_rdp,
                 kwargs=dyn),
            Spec("dplib.langevin.dynamics.squared_loss_lower_bound",
                 lambda: LG.squared_loss_lower_bound,
                 kwargs={k: v for k, v in dyn.items() if k != "lam"}),
            Spec("dplib.langevin.dynamics.exact_gaussian_renyi", lambda: LG.exact_gaussian_renyi,
                 kwargs={k: v for k, v in dyn.items() if k != "lam"}),
            Spec("dplib.langevin.dynamics.squared_loss_moments", lambda: LG.squared_loss_moments,
                 kwargs=dict(x_mean=0.5, theta0=0.0, sigma=0.1, eta=0.1, K=10),
                 params=dict(x_mean=["a"], theta0=[INF])),
            Spec("dplib.langevin.dynamics.langevin_epsilon", lambda: LG.langevin_epsilon,
                 kwargs=dict(delta=1e-5, sensitivity=4.0, sigma=0.02, eta=0.02, lam=1.0,
                             n=5000, K=10)),
            Spec("dplib.langevin.dynamics.calibrate_sigma", lambda: LG.calibrate_sigma,
                 kwargs=dict(target_epsilon=1.0, delta=1e-5, sensitivity=2.0, eta=0.5,
                             lam=0.5, n=1000, K=30)),
            Spec("dplib.langevin.dynamics.excess_risk_bound", lambda: LG.excess_risk_bound,
                 args=(30, 1.0, 2.0, 10, 1.0, 0.5, 1000)),
            Spec("dplib.langevin.gradient_descent.squared_loss_gradient",
                 lambda: LG.squared_loss_gradient,
                 kwargs=dict(data=np.zeros((5, 2))),
                 params=dict(data=[[], [[NAN, 1.0]], "abc", None])),
            Spec("dplib.langevin.gradient_descent.noisy_gd", lambda: LG.noisy_gd,
                 args=(lambda t: t,), kwargs=dict(theta0=np.zeros(2), n=10, eta=0.5,
                                                  sigma=1.0, K=3, seed=0, device="cpu"),
                 params=dict(grad_fn=[3], theta0=[[NAN, 0.0], "ab", None])),
        ]
    except ImportError:
        pass
    try:
        import torch
        import dplib.training as TR
        x, y, lin, ce = training_fixture()
        grads = lambda: TR.per_example_grads(lin(), ce, x, y)   # noqa: E731
        bad_model = [_bn_model(), None, "model"]
        bad_x = [x[:3], x.numpy(), None]
        out += [
            Spec("dplib.training.models.make_mlp", lambda: TR.make_mlp,
                 kwargs=dict(in_features=4, num_classes=2, hidden=(8,)),
                 params=dict(num_classes=[1, 0, 2.5, None], seed=[-1, 2.5, "a"])),
            Spec("dplib.training.models.make_cnn", lambda: TR.make_cnn,
                 kwargs=dict(in_channels=1, num_classes=2, image_size=8, groups=2, width=4),
                 params=dict(num_classes=[1, 0, None], image_size=[0, -8, 2.5, None],
                             groups=[0, 3, 2.5], width=[0, 5, None])),
            Spec("dplib.training.models.make_logistic_regression",
                 lambda: TR.make_logistic_regression,
                 kwargs=dict(in_features=4, num_classes=2),
                 params=dict(num_classes=[1, 0, 2.5, None])),
            Spec("dplib.training.models.check_dp_compatible", lambda: TR.check_dp_compatible,
                 kwargs=dict(model=lin()), params=dict(model=bad_model),
                 names=dict(model="BatchNorm|model")),
            Spec("dplib.training.grads.per_example_grads", lambda: TR.per_example_grads,
                 args=(lin(), ce, x, y), params=dict(x=bad_x, y=[y[:2], None]),
                 names=dict(x="x", y="y")),
            Spec("dplib.training.grads.per_example_losses", lambda: TR.per_example_losses,
                 args=(lin(), ce, x, y), params=dict(x=bad_x, y=[y[:2], None])),
            Spec("dplib.training.grads.clip_per_example", lambda: TR.clip_per_example,
                 args=(grads(), 1.0),
                 params=dict(grads=[{}, None, {"a": torch.zeros(2, 3), "b": torch.zeros(3)}],
                             max_norm=[0.0, -1.0, NAN, "1", None]),
                 names=dict(max_norm="max_norm|max_grad_norm")),
            Spec("dplib.training.grads.clip_factors", lambda: TR.clip_factors,
                 args=(torch.ones(3), 1.0), params=dict(max_norm=[0.0, -1.0, NAN, None],
                                                       norms=[None, "abc"]),
                 names=dict(max_norm="max_norm|max_grad_norm")),
            Spec("dplib.training.grads.flat_norms", lambda: TR.grads.flat_norms,
                 args=(grads(),), params=dict(grads=[{}, None])),
            Spec("dplib.training.grads.check_max_grad_norm",
                 lambda: TR.grads.check_max_grad_norm, args=(1.0,),
                 params=dict(max_grad_norm=[0.0, -1.0, NAN, "1", None])),
            Spec("dplib.training.grads.clipped_grad_sum", lambda: TR.clipped_grad_sum,
                 args=(lin(), ce, x, y, 1.0),
                 params=dict(x=bad_x, max_norm=[0.0, -1.0, NAN, None],
                             chunk_size=[0, -1, 2.5]),
                 names=dict(max_norm="max_norm|max_grad_norm")),
            Spec("dplib.training.ghost.ghost_norms", lambda: TR.ghost_norms,
                 args=(lin(), ce, x, y), params=dict(x=bad_x, model=[_bn_model(), None]),
                 names=dict(model="model|BatchNorm1d")),
            Spec("dplib.training.ghost.ghost_clipped_grad_sum",
                 lambda: TR.ghost_clipped_grad_sum, args=(lin(), ce, x, y, 1.0),
                 params=dict(x=bad_x, max_norm=[0.0, -1.0, NAN, None]),
                 names=dict(max_norm="max_norm|max_grad_norm")),
            Spec("dplib.training.trainer.train", lambda: TR.train,
                 args=(lin(), (x, y)),
                 kwargs=dict(sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
                             device="cpu"),
                 params=dict(model=bad_model, train_data=[(x, y[:3]), (x,), None, "xy"],
                             sample_rate="rate", lr="pos", steps="int1",
                             noise_multiplier=[-1.0, NAN, INF, "1"],
                             max_grad_norm=[0.0, -1.0, NAN, "1"], delta="delta",
                             optimizer="choice", momentum=[-0.1, 1.5, NAN],
                             weight_decay=[-0.1, NAN], accountant="choice", seed="seed",
                             virtual_batch_size=[0, -1, 2.5], eval_every=[0, -1, 2.5],
                             expected_batch_size=[0.0, -1.0, NAN, INF, "1.0"],
                             ema_decay=[0.0, 1.0, -0.5, NAN, "0.9"]),
                 names=dict(model="BatchNorm|model")),
            Spec("dplib.training.trainer.noisy_gradient", lambda: TR.noisy_gradient,
                 args=(lin(), ce, x, y),
                 kwargs=dict(max_grad_norm=1.0, noise_multiplier=1.0,
                             expected_batch_size=3.0),
                 params=dict(expected_batch_size=[0.0, -3.0, NAN, None])),
            Spec("dplib.training.trainer.evaluate", lambda: TR.evaluate,
                 args=(lin(), x, y), kwargs=dict(device="cpu"),
                 params=dict(X=[x[:3], None, "abc"], y=[y[:2], None],
                             batch_size=[0, -1, 2.5])),
            Spec("dplib.training.trainer.predict_logits", lambda: TR.predict_logits,
                 args=(lin(), x), kwargs=dict(device="cpu"),
                 params=dict(X=[None, "abc"], batch_size=[0, -1, 2.5])),
            Spec("dplib.training.config.steps_for_epochs", lambda: TR.steps_for_epochs,
                 args=(2.0, 0.1)),
            Spec("dplib.training.trainer.make_accountant", lambda: TR.make_accountant,
                 args=("rdp",),
                 names=dict(kind="kind|accountant")),
            # one process, no process group: the checks every rank makes before training
            Spec("dplib.training.distributed.train_distributed", lambda: TR.train_distributed,
                 args=(lin(), (x, y)), kwargs=dict(sample_rate=0.5, lr=0.1, steps=2,
                                                   noise_multiplier=1.0, device="cpu"),
                 params=dict(model=bad_model, shard=[(x, y[:3]), (x,), None, (x[:0], y[:0])],
                             sample_rate="rate", lr="pos", steps="int1", delta="delta",
                             noise_multiplier=[-1.0, NAN, INF, "1"], seed="seed",
                             max_grad_norm=[0.0, NAN, "1"], optimizer="choice", ghost="bool",
                             sampling="choice", expected_batch_size=[0.0, NAN, INF]),
                 names=dict(model="BatchNorm|model")),
            Spec("dplib.training.distributed.train_models_distributed",
                 lambda: TR.train_models_distributed, args=([lin(), lin()], x, y, np.ones((2, 6))),
                 kwargs=dict(sample_rate=0.5, lr=0.1, steps=2, noise_multiplier=1.0,
                             seeds=[1, 2], device="cpu"),
                 params=dict(models=[[], None, lin()], masks=[np.ones((3, 6)), None],
                             seeds=[[1, -2], [1], "ab"])),
            Spec("dplib.training.distributed.BroadcastPrivatizer",
                 lambda: TR.BroadcastPrivatizer, args=(TR.GaussianPrivatizer(1.0, 1.0),),
                 params=dict(inner=[None, "noise", object()], src=[-1, 1, 2.5, "0", None])),
        ]
    except ImportError:
        pass
    try:
        from dplib.attacks import lira as LI
        from dplib.attacks import roc as R
        from dplib.attacks import scores as SC
        sc = np.array([0.1, 0.9, 0.4, 0.7])
        lab = np.array([0, 1, 0, 1])
        logits = np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        ylab = np.array([0, 1, 1])
        bad_scores = [[], [NAN, 1.0, 0.5, 0.2], "abcd", None, np.ones(3)]
        bad_labels = [[0, 2, 1, 0], [], None, np.ones(3, int), [0.5, 1, 0, 1]]
        sh_scores = np.random.default_rng(0).normal(size=(8, 4))
        sh_in = np.random.default_rng(1).random((8, 4)) < 0.5
        out += [
            Spec("dplib.attacks.roc.roc_curve", lambda: R.roc_curve, args=(sc, lab),
                 params=dict(scores=bad_scores, labels=bad_labels)),
            Spec("dplib.attacks.roc.roc_auc", lambda: R.roc_auc, args=(sc, lab),
                 params=dict(scores=bad_scores, labels=bad_labels)),
            Spec("dplib.attacks.roc.tpr_at_fpr", lambda: R.tpr_at_fpr, args=(sc, lab, 0.5),
                 params=dict(scores=bad_scores, labels=bad_labels,
                             fpr=[-0.1, 1.5, NAN, "a", None])),
            Spec("dplib.attacks.roc.attack_summary", lambda: R.attack_summary,
                 args=(sc, lab), params=dict(scores=bad_scores, labels=bad_labels,
                                             fprs=[(-0.1,), (1.5,), (NAN,), "a"])),
            Spec("dplib.attacks.roc.check_membership_labels",
                 lambda: R.check_membership_labels, args=(lab,),
                 params=dict(labels=bad_labels)),
            Spec("dplib.attacks.roc.check_scores", lambda: R.check_scores, args=(sc,),
                 params=dict(scores=bad_scores[:4], n=[0, -1, 2.5, 5]),
                 names=dict(n="n|label")),
            Spec("dplib.attacks.roc.dp_tpr_bound", lambda: R.dp_tpr_bound,
                 args=(0.1, 1.0), params=dict(fpr=[-0.1, 1.5, NAN, None], epsilon="nonneg")),
            Spec("dplib.attacks.scores.loss_scores", lambda: SC.loss_scores,
                 args=(logits, ylab), params=dict(logits=[[], [[NAN, 1.0]] * 3, None],
                                                  labels=[[0, 2, 1], [0, 1], None])),
            Spec("dplib.attacks.scores.confidence_scores", lambda: SC.confidence_scores,
                 args=(logits, ylab), params=dict(logits=[[], None],
                                                  labels=[[0, 5, 1], None])),
            Spec("dplib.attacks.scores.logit_scaled_confidence",
                 lambda: SC.logit_scaled_confidence, args=(logits, ylab),
                 params=dict(logits=[[], None], labels=[[0, 5, 1], None])),
            Spec("dplib.attacks.scores.score_examples", lambda: SC.score_examples,
                 args=(logits, ylab), params=dict(labels=[[-1, 0, 1]])),
            Spec("dplib.attacks.lira.fit_gaussians", lambda: LI.fit_gaussians,
                 args=(sh_scores, sh_in),
                 params=dict(shadow_scores=[None, sh_scores[:3], [[NAN] * 4] * 8],
                             shadow_in=[None, sh_in[:3], sh_in.astype(float) + 1])),
            Spec("dplib.attacks.lira.lira_online", lambda: LI.lira_online,
                 args=(sh_scores[0], sh_scores, sh_in),
                 params=dict(target_scores=[None, [NAN] * 4, sh_scores[0][:2]],
                             shadow_in=[None, sh_in[:3]])),
            Spec("dplib.attacks.lira.lira_offline", lambda: LI.lira_offline,
                 args=(sh_scores[0], sh_scores, sh_in),
                 params=dict(target_scores=[None, [NAN] * 4, sh_scores[0][:2]],
                             shadow_in=[None, sh_in[:3]])),
        ]
    except ImportError:
        pass
    try:
        from dplib import datasets as D
        from dplib import features as F
        out += [
            Spec("dplib.datasets.load_digits", lambda: D.load_digits, kwargs=dict(seed=0),
                 params=dict(val_fraction=[-0.2, 1.2], test_fraction=[-0.2, 1.2])),
            Spec("dplib.features.fit_public_feature_map", lambda: F.fit_public_feature_map,
                 args=(np.random.default_rng(0).normal(size=(50, 20)),),
                 kwargs=dict(dim=4),
                 params=dict(X_public=[[], [[NAN] * 20] * 50, "abc", None], dim=[-1],
                             bias=["a"])),
        ]
    except ImportError:
        pass
    try:
        from dplib.icl import accounting as IA
        from dplib.icl import aggregation as AG
        hist = np.array([[3.0, 1.0], [2.0, 2.0]])
        out += [
            # declared (dplib.icl._params): the params below are only what the declarations
            # do not state — relations (k > d, shapes) and a few earlier hand-picked values
            Spec("dplib.icl.accounting.gaussian_noise_std", lambda: IA.gaussian_noise_std,
                 args=(1.0, 1e-5, 10), params=dict(epsilon=["1"])),
            Spec("dplib.icl.accounting.vote_noise_std", lambda: IA.vote_noise_std,
                 args=(1.0, 1e-5, 10)),
            Spec("dplib.icl.accounting.gaussian_epsilon_spent",
                 lambda: IA.gaussian_epsilon_spent, args=(2.0, 1e-5, 10)),
            Spec("dplib.icl.accounting.per_query_epsilon", lambda: IA.per_query_epsilon,
                 args=(1.0, 1e-5, 10)),
            Spec("dplib.icl.aggregation.vote_histogram", lambda: AG.vote_histogram,
                 args=(np.array([[0, 1, 1]]), 2),
                 params=dict(votes=[[[0, 5]], [[0.5, 1]], None, "ab"], num_classes=[-1])),
            Spec("dplib.icl.aggregation.noisy_vote", lambda: AG.noisy_vote,
                 args=(hist, 1.0), kwargs=dict(rng=0), params=dict(noise_std=["1"])),
            Spec("dplib.icl.aggregation.rnm_vote", lambda: AG.rnm_vote,
                 args=(hist, 1.0), kwargs=dict(rng=0),
                 params=dict(histograms="array"), names=dict(histograms="scores")),
            Spec("dplib.icl.aggregation.esa", lambda: AG.esa,
                 args=(np.eye(3), np.eye(3), 0.3), kwargs=dict(rng=0),
                 params=dict(answer_embeddings=[[[NAN, 0, 0]], np.eye(2)],
                             candidate_embeddings=[np.eye(2)])),
            Spec("dplib.icl.aggregation.partition_exemplars", lambda: AG.partition_exemplars,
                 args=(100, 5, 3), kwargs=dict(shots=4, sampler="fixed", rng=2)),
        ]
    except ImportError:
        pass
    try:
        import dplib.langevin as SG
        P = dict(lipschitz=1.5, sigma=0.3, lam=0.01, n=2000)
        out += [
            Spec("dplib.langevin.sgld.decreasing_step_sizes", lambda: SG.decreasing_step_sizes,
                 args=(2.0, 0.01, 10)),
            Spec("dplib.langevin.sgld.sgld_rdp", lambda: SG.sgld_rdp, args=(30.0,),
                 kwargs=dict(P, step_sizes=0.01, K=100),
                 params=dict(step_sizes=[0.0, -0.1, NAN, None])),
            Spec("dplib.langevin.sgld.constant_step_rdp",
                 lambda: SG.constant_step_rdp, args=(30.0,),
                 kwargs=dict(P, eta=0.01, K=100)),
            Spec("dplib.langevin.sgld.decreasing_step_rdp", lambda: SG.decreasing_step_rdp,
                 args=(30.0,), kwargs=dict(P, beta=2.0, K=100)),
            Spec("dplib.langevin.sgld.sgld_rdp_limit", lambda: SG.sgld_rdp_limit, args=(30.0,),
                 kwargs=P),
            Spec("dplib.langevin.sgld.sgld_composition_rdp", lambda: SG.sgld_composition_rdp,
                 args=(30.0, 1.5, 0.3, 2000, 0.01), kwargs=dict(K=100),
                 params=dict(step_sizes=[0.0, -0.1, NAN])),
            Spec("dplib.langevin.sgld.sgld_epsilon", lambda: SG.sgld_epsilon,
                 args=(1e-5, 1.5, 0.3, 0.01, 2000, 0.01), kwargs=dict(K=100)),
            Spec("dplib.langevin.sgld.sgld_calibrate_sigma", lambda: SG.sgld_calibrate_sigma,
                 args=(1.0, 1e-5, 1.5, 0.01, 2000, 0.01), kwargs=dict(K=100)),
            Spec("dplib.langevin.sgld.released_iterates_epsilon",
                 lambda: SG.released_iterates_epsilon,
                 args=(1e-5, 1.5, 0.3, 2000, 100, 0.01), kwargs=dict(K=100),
                 params=dict(batch_size=[-1, 5000])),     # 5000 > n
            Spec("dplib.langevin.sgld.released_iterates_rdp", lambda: SG.released_iterates_rdp,
                 args=(1.5, 0.3, 2000, 100, 0.01), kwargs=dict(K=100),
                 params=dict(batch_size=[-1, 5000], step_sizes=[0.0, -0.1, NAN],
                             K=[-1, 2.5], max_groups="int1")),
            Spec("dplib.langevin.sgld.released_iterates_calibrate_sigma",
                 lambda: SG.released_iterates_calibrate_sigma,
                 args=(1.0, 1e-5, 1.5, 2000, 100, 0.01), kwargs=dict(K=20),
                 params=dict(batch_size=[-1, 5000], K=[-1, 2.5, "3"])),
            Spec("dplib.langevin.comparison.calibrate_noise_replace_one",
                 lambda: SG.calibrate_noise_replace_one, args=(1.0, 1e-5, 0.01, 100)),
            Spec("dplib.langevin.comparison.table4_diagnostics", lambda: SG.table4_diagnostics,
                 args=(2.0, 0.01, 1.0, 30.0, 2000, 10)),
        ]
    except ImportError:
        pass
    try:
        from dplib.training import erm as E
        out += [
            Spec("dplib.training.erm.dpgd_sigma", lambda: E.dpgd_sigma,
                 args=(0.5, 1e-5, 100, 1000),
                 params=dict(epsilon="pos")),
            Spec("dplib.training.erm.dpgd_bound", lambda: E.dpgd_bound,
                 args=(0.5, 1e-5, 100, 1000, 10, 1.0),
                 params=dict(epsilon="pos", delta="delta", n="int1")),
            Spec("dplib.training.erm.dpgd_steps", lambda: E.dpgd_steps,
                 args=(0.5, 1e-5, 1000, 10),
                 params=dict(epsilon="pos", delta="delta", n="int1", d="int1")),
            Spec("dplib.training.erm.synthetic_logistic", lambda: E.synthetic_logistic,
                 args=(50, 3), kwargs=dict(rng=0)),
            Spec("dplib.training.erm.perturbed_median", lambda: E.perturbed_median,
                 args=(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, 1.0])),
                 params=dict(x=[[], [NAN], None, "abc"], b=[[NAN, 0, 0], None])),
        ]
    except ImportError:
        pass
    try:
        from dplib.icl import aggregation as AG
        h = np.array([9.0, 7.0, 2.0, 2.0])
        out += [
            # declared (dplib.icl._params); params: k > d, and earlier hand-picked values
            Spec("dplib.icl.aggregation.topk_sequences", lambda: AG.topk_sequences,
                 args=(4, 2), params=dict(k=[-1, 5])),
            Spec("dplib.icl.aggregation.joint_em_utilities", lambda: AG.joint_em_utilities,
                 args=(h, 2), params=dict(counts=[[NAN, 1, 1, 1], [-1, 2, 3]], k=[-1, 5])),
            Spec("dplib.icl.aggregation.joint_exponential_topk",
                 lambda: AG.joint_exponential_topk, args=(h, 2, 1.5), kwargs=dict(rng=0),
                 params=dict(counts=[[NAN, 1, 1, 1]], k=[5])),
            Spec("dplib.icl.aggregation.joint_em_topk_probability",
                 lambda: AG.joint_em_topk_probability, args=(h, 2, 1.5), params=dict(k=[5])),
            Spec("dplib.icl.aggregation.ptr_distance", lambda: AG.ptr_distance, args=(h, 2),
                 params=dict(counts=[[NAN, 1, 1, 1]], k=[5])),
            Spec("dplib.icl.aggregation.ptr_release_probability",
                 lambda: AG.ptr_release_probability, args=(h, 2, 1.0, 1e-5),
                 params=dict(k=[5])),
            Spec("dplib.icl.aggregation.ptr_topk", lambda: AG.ptr_topk,
                 args=(h, 2, 1.0, 1e-5), kwargs=dict(rng=0), params=dict(k=[5])),
            Spec("dplib.icl.aggregation.keyword_histogram", lambda: AG.keyword_histogram,
                 args=(["a b", "b c"], ["a", "b"]), params=dict(keywords=["ab"])),
        ]
    except ImportError:
        pass
    try:
        from dplib.attacks import shadow as SH
        from dplib.attacks import canary as AU
        X = np.zeros((10, 2), np.float32)
        Y = np.array([0, 1] * 5)
        out += [
            Spec("dplib.attacks.shadow.membership_masks", lambda: SH.membership_masks,
                 args=(4, 10), kwargs=dict(rng=0),
                 params=dict(n_examples="int1")),
            Spec("dplib.attacks.canary.dpsgd_canary_runs", lambda: AU.dpsgd_canary_runs,
                 args=(X, Y), kwargs=dict(runs=2, steps=1, sample_rate=0.5,
                                          noise_multiplier=1.0, with_canary=True,
                                          device="cpu")),
            Spec("dplib.attacks.canary.dpsgd_canary_audit", lambda: AU.dpsgd_canary_audit,
                 args=(X, Y), kwargs=dict(runs=8, steps=1, sample_rate=0.5,
                                          noise_multiplier=1.0, device="cpu"),
                 params=dict(noise_multiplier=[0.0, -1.0, NAN, None])),
            Spec("dplib.attacks.canary.dpsgd_canary_train_runs",
                 lambda: AU.dpsgd_canary_train_runs, args=(X, Y),
                 kwargs=dict(runs=1, steps=1, sample_rate=0.5, noise_multiplier=1.0,
                             with_canary=False)),
            Spec("dplib.attacks.canary.canary_loss", lambda: AU.canary_loss,
                 args=(__import__("torch").zeros(2, 2),
                       __import__("torch").tensor([0, -1])),
                 params=dict(logits=[None, "ab"], targets=[None, "ab"])),
        ]
    except ImportError:
        pass
    try:
        from dplib.attacks import ladder as LD
        from dplib.attacks import one_run as OR
        X = np.zeros((10, 2), np.float32)
        Y = np.array([0, 1] * 5)
        run = dict(steps=1, sample_rate=0.5, noise_multiplier=1.0, device="cpu")
        out += [
            Spec("dplib.attacks.ladder.llr_statistic", lambda: LD.llr_statistic,
                 args=(np.zeros((3, 2)),), kwargs=dict(sample_rate=0.5, noise_multiplier=1.0),
                 params=dict(increments=[[], [[NAN]], "abc", None],
                             kappa=[-1.0, NAN, INF, "1", None])),
            Spec("dplib.attacks.ladder.ladder_runs", lambda: LD.ladder_runs, args=(X, Y),
                 kwargs=dict(canary="gradient", runs=2, with_canary=True, seed=0, **run),
                 params=dict(noise_scale=[-1.0, NAN, INF, None])),
            Spec("dplib.attacks.ladder.adversary_ladder", lambda: LD.adversary_ladder,
                 args=(X, Y), kwargs=dict(runs=8, seed=0, **run)),
            Spec("dplib.attacks.one_run.one_run_p_value", lambda: OR.one_run_p_value,
                 args=(100, 10, 8, 1.0), kwargs=dict(delta=1e-5),
                 params=dict(r=[0, 200, 2.5, None], v=[-1, 11, 2.5, None],
                             epsilon=[-1.0, NAN, "1", None])),
            Spec("dplib.attacks.one_run.one_run_epsilon_lower_bound",
                 lambda: OR.one_run_epsilon_lower_bound, args=(100, 10, 10),
                 params=dict(r=[0, 200, None], v=[-1, 11, None])),
            Spec("dplib.attacks.one_run.one_run_gradient_audit",
                 lambda: OR.one_run_gradient_audit, args=(X, Y),
                 kwargs=dict(canaries=20, guesses=4, seed=0, **run),
                 params=dict(guesses=[0, 21, 2.5, None])),
        ]
    except ImportError:
        pass
    return out
