"""Bad-input specs (:class:`~dplib.testing.bad_inputs.Spec`) of gradient encoding (chapter 8),
convex ERM, DP-SGLD's logistic regression, the model builders and the gradient helpers."""
from __future__ import annotations

import numpy as np

from ._sweep import BAD, INF, NAN, Spec

__all__ = ["encoding_specs", "models_erm_specs", "transformer_specs", "icl_model_specs",
           "private_run_specs"]


def encoding_specs() -> list[Spec]:
    """Chapter 8: noise families, numerical Rényi moments, the code-book accounting, encoding."""
    import torch

    from dplib import encoding as E
    from dplib.encoding import accounting as EA
    from dplib.encoding import moments as EM
    from dplib.encoding import train as ET
    g = E.GaussianNoise(1.0)
    vectors = np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, 0.8], [0.5, 0.5, 0.5, 0.5]])
    book = E.Codebook(vectors)        # sorted ascending, norm 1, as Algorithm 2 needs
    grads = torch.ones(2, 4)
    orders = [2, 3]
    return [
        # parameters declared (dplib.encoding._params): the entries give the valid call and
        # what a declaration cannot state (a value that is bad only with the others)
        Spec("dplib.encoding.noise.GaussianNoise", lambda: E.GaussianNoise, args=(1.0,)),
        Spec("dplib.encoding.noise.LaplaceNoise", lambda: E.LaplaceNoise, args=(1.0,)),
        Spec("dplib.encoding.noise.StudentTNoise", lambda: E.StudentTNoise, args=(9.0, 1.0)),
        Spec("dplib.encoding.noise.make_noise", lambda: E.make_noise, args=("student_t", 1.0)),
        Spec("dplib.encoding.moments.gaussian_log_moments", lambda: EM.gaussian_log_moments,
             args=([0.5], orders, 1.0)),
        Spec("dplib.encoding.moments.laplace_log_moments", lambda: EM.laplace_log_moments,
             args=([0.5], orders, 1.0)),
        Spec("dplib.encoding.moments.log_moments", lambda: EM.log_moments,
             args=(g, [0.5], orders)),
        Spec("dplib.encoding.moments.small_shift_constant", lambda: EM.small_shift_constant,
             args=(g, orders)),
        Spec("dplib.encoding.moments.mixture_renyi_1d", lambda: EM.mixture_renyi_1d,
             args=(g.logpdf, 0.5, 0.1, 2.0), params=dict(alpha=[0.5, "2"])),
        Spec("dplib.encoding.accounting.lemma4_rdp", lambda: E.lemma4_rdp,
             args=(orders, 0.1, [0.0, 0.0, 0.0, 1.0], g)),
        Spec("dplib.encoding.accounting.codebook_rdp", lambda: E.codebook_rdp,
             args=(orders, 0.1, book, g)),
        Spec("dplib.encoding.accounting.encoding_epsilon", lambda: E.encoding_epsilon,
             args=(book, g, 0.1, 10, 1e-5)),
        Spec("dplib.encoding.accounting.calibrate_noise_scale",
             lambda: E.calibrate_noise_scale, args=(g, 1.0, 1e-5, 0.1, 10, book)),
        Spec("dplib.encoding.accounting.EncodedStepEvent", lambda: EA.EncodedStepEvent,
             args=(book, g, 0.1)),
        Spec("dplib.encoding.accounting.EncodingAccountant", lambda: E.EncodingAccountant,
             args=(book,)),
        Spec("dplib.encoding.train.EncodingPrivatizer", lambda: ET.EncodingPrivatizer,
             args=(book, g)),
        Spec("dplib.encoding.codebook.Codebook", lambda: E.Codebook, args=(vectors,)),
        Spec("dplib.encoding.codebook.build_codebook", lambda: E.build_codebook,
             args=(5, 4), kwargs=dict(rng=0), params=dict(rng="rng")),
        # grads of the wrong width for the code book; NaN gradients (a tensor)
        Spec("dplib.encoding.codebook.encode", lambda: E.encode, args=(grads, book),
             params=dict(grads=[torch.ones(2, 5), torch.full((2, 4), NAN)])),
        Spec("dplib.encoding.denoise.ks_distance", lambda: E.ks_distance,
             args=(torch.zeros(5), g)),
        Spec("dplib.encoding.denoise.ks_denoise", lambda: E.ks_denoise,
             args=(torch.zeros(5), g)),
    ]


def models_erm_specs() -> list[Spec]:
    """Convex ERM (dplib.training.erm), DP-SGLD's logistic regression and its counterexample
    (dplib.langevin), make_mnist_cnn, and the public steps of chapter 8's code-book accounting.
    Tiny data (20 rows × 3 features), so even the private mechanisms run in milliseconds."""
    out: list[Spec] = []
    try:
        from dplib.training import erm as E
        Xe, ye, _ = E.synthetic_logistic(20, 3, rng=0)
        w = np.full(3, 0.1)
        bad_X = [Xe[:5], Xe[0], np.full((20, 3), NAN), "abc", None, []]
        bad_Xb = bad_X + [Xe * 10]                 # rows of norm > 1: the loss is not 1-Lipschitz
        bad_y = [ye[:5], ye + 2, np.full(20, 0.5), [NAN] * 20, None, "abc"]
        bad_w = [[NAN] * 3, [0.1, 0.2], "abc", None, np.zeros((3, 1))]
        lam0 = [-1e-9, -1.0, NAN, INF, "0.1", None]
        out += [
            Spec("dplib.training.erm.logistic_loss", lambda: E.logistic_loss, args=(w, Xe, ye),
                 params=dict(w=bad_w, X=bad_X, y=bad_y)),
            Spec("dplib.training.erm.logistic_grad", lambda: E.logistic_grad, args=(w, Xe, ye),
                 params=dict(w=bad_w, X=bad_X, y=bad_y)),
            Spec("dplib.training.erm.fit_logistic", lambda: E.fit_logistic, args=(Xe, ye),
                 kwargs=dict(lam=0.1, steps=50),
                 params=dict(X=bad_Xb, y=bad_y,
                             linear_term=[[NAN] * 3, [1.0, 2.0], "abc", np.zeros((3, 3))])),
            Spec("dplib.training.erm.dp_gd_logistic", lambda: E.dp_gd_logistic, args=(Xe, ye),
                 kwargs=dict(epsilon=0.5, delta=1e-5, steps=5, radius=1.0, rng=0),
                 params=dict(X=bad_Xb, y=bad_y, epsilon=BAD["pos"] + [1.5], delta="delta")),
            Spec("dplib.training.erm.output_perturbation_logistic",
                 lambda: E.output_perturbation_logistic, args=(Xe, ye),
                 kwargs=dict(lam=0.1, epsilon=1.0, delta=1e-5, rng=0),
                 params=dict(X=bad_Xb, y=bad_y, delta="delta")),
            Spec("dplib.training.erm.objective_perturbation_logistic",
                 lambda: E.objective_perturbation_logistic, args=(Xe, ye),
                 kwargs=dict(lam=0.1, epsilon=1.0, rng=0),
                 params=dict(X=bad_Xb, y=bad_y)),
            Spec("dplib.training.erm.balanced_lambda", lambda: E.balanced_lambda,
                 args=("output", 1.0, 1e-5, 100, 3, 2.0),
                 params=dict(delta="delta")),
        ]
    except ImportError:
        pass
    try:
        import dplib.langevin as SG
        rng = np.random.default_rng(0)
        Xs = rng.normal(size=(20, 3)) / 2
        ys = np.arange(20) % 2
        theta = np.zeros((2, 6))
        bad_X = [Xs[:5], Xs[0], np.full((20, 3), NAN), "abc", None, []]
        bad_y = [ys[:5], ys + 5, np.full(20, 0.5), None, "abc", -ys]
        bad_theta = [np.full((2, 6), NAN), np.zeros((2, 5)), "abc", None, np.zeros((2, 3, 6))]
        grad = lambda: SG.logistic_regression_grad(Xs, ys, 0.1, 2, device="cpu")  # noqa: E731
        out += [
            Spec("dplib.langevin.logistic.logistic_regression_constants",
                 lambda: SG.logistic_regression_constants, args=(Xs, 0.1),
                 kwargs=dict(num_classes=2),
                 params=dict(X=bad_X[1:], num_classes=[0, "2"],
                             feature_bound=[0.01])),     # 0.01 < max ||x_i||
            Spec("dplib.langevin.logistic.logistic_regression_grad",
                 lambda: SG.logistic_regression_grad,
                 args=(Xs, ys, 0.1, 2), kwargs=dict(device="cpu"),
                 params=dict(X=bad_X, y=bad_y, num_classes=[0, "2"], device=["tpu", 3])),
            Spec("dplib.langevin.logistic.logistic_regression_loss",
                 lambda: SG.logistic_regression_loss,
                 args=(theta, Xs, ys, 0.1, 2),
                 params=dict(theta=bad_theta, X=bad_X, y=bad_y, num_classes=[0, "2"])),
            Spec("dplib.langevin.logistic.logistic_regression_accuracy",
                 lambda: SG.logistic_regression_accuracy, args=(theta, Xs, ys, 2),
                 params=dict(theta=bad_theta, X=bad_X, y=bad_y, num_classes=[0, "2"])),
            Spec("dplib.langevin.counterexample.one_step_delta_lower_bound",
                 lambda: SG.one_step_delta_lower_bound,
                 args=(1.0,),
                 kwargs=dict(lipschitz=1.0, sigma=0.5, lam=0.5, eta=0.5, n=10, batch_size=1,
                             radius=1.0, num_thresholds=101),
                 # the relations: L > λr, η < 1/λ, m <= n
                 params=dict(epsilon=["1"], lipschitz=[0.25], eta=[2.0], batch_size=[-1, 11],
                             num_thresholds=[2.5, "101"])),
            Spec("dplib.langevin.counterexample.theorem_3_1_refutation",
                 lambda: SG.theorem_3_1_refutation, args=(1.0,),
                 kwargs=dict(lipschitz=1.0, sigma=0.5, lam=0.5, n=10, batch_size=1,
                             step_sizes=[0.5, 0.25], radius=1.0),
                 params=dict(epsilon=["1"], lipschitz=[0.25], batch_size=[-1, 11],
                             step_sizes=[[], [NAN], [0.5, -0.1], "abc", None])),
            Spec("dplib.langevin.sampler.dp_sgld", lambda: SG.dp_sgld, args=(grad(),),
                 kwargs=dict(n=20, batch_size=5, step_sizes=0.01, K=10, sigma=0.1, seed=0,
                             lam=0.1, shape=(2, 6), device="cpu"),
                 params=dict(grad_fn=[3, "grad"],
                             theta0=[np.full((2, 6), NAN), "ab", np.zeros(6)],
                             batch_size=[-1, 21],
                             step_sizes=[0.0, -0.1, NAN, INF, "0.1", None, [0.01, -0.01]],
                             K=[2.5, "3"], radius=["1"],
                             lam=[None, [1.0, 2.0]],      # None: theta0=None needs lam
                             shape=[(2,), (0, 6), (2.5, 6), None, "ab"],
                             beta=[1000.0], device=["tpu", 3])),      # 1000: eta >= 1/beta
            Spec("dplib.langevin.sampler.train_dp_sgld_logistic", lambda: SG.train_dp_sgld_logistic,
                 args=(Xs, ys),
                 kwargs=dict(num_classes=2, lam=0.1, epochs=1.0, batch_size=5, device="cpu"),
                 params=dict(X=bad_X, y=bad_y, num_classes=[0, "2"], batch_size=[-1, 21],
                             feature_bound=["1", 0.01], chains=[-1, "2"],
                             eval_data=[(Xs,), (Xs, ys[:5]), "ab", (Xs, ys + 5)],
                             device=["tpu", 3])),
        ]
    except ImportError:
        pass
    try:
        from dplib.training import models as MO
        out.append(Spec("dplib.training.models.make_mnist_cnn", lambda: MO.make_mnist_cnn,
                        kwargs=dict(seed=0)))
        import torch
        import dplib.training.grads as GR
        import dplib.training.trainer as TT
        from dplib import device as DV2
        from dplib.accounting import without_replacement as WOR
        lin = MO.make_logistic_regression(4, 2)
        out += [
            # accounting: declared parameters (dplib._constraints); extras only
            Spec("dplib.accounting.without_replacement.wor_gaussian_pld",
                 lambda: WOR.wor_gaussian_pld, args=(1.0, 0.01),
                 params=dict(value_discretization_interval=[-1e-3, "x"])),
            Spec("dplib.accounting.without_replacement.wor_gaussian_epsilon",
                 lambda: WOR.wor_gaussian_epsilon, args=(1.0, 0.01, 10, 1e-5),
                 params=dict(value_discretization_interval=[-1e-3])),
            Spec("dplib.datasets.load_cached_result", lambda: __import__(
                "dplib.datasets", fromlist=["x"]).load_cached_result,
                 args=("encoding_digits",)),                  # name declared
            Spec("dplib.accounting.calibrate.safe_log_root",
                 lambda: __import__("dplib.accounting.calibrate",
                                    fromlist=["x"]).safe_log_root,
                 args=(lambda s: 1.0 / s - 1.0, 0.5, 2.0), kwargs=dict(rtol=1e-6),
                 params=dict(lo=[3.0], hi=[0.25])),      # declared; extras: lo > hi
            Spec("dplib.device.release_seed", lambda: DV2.release_seed, kwargs=dict(seed=3),
                 params=dict(seed="seed")),     # bits declared; seed checked under its name
            Spec("dplib.device.release_generator", lambda: DV2.release_generator,
                 kwargs=dict(generator=None, device="cpu"),
                 params=dict(generator=["abc", 3, [], [None], torch.Generator(),
                                        [torch.Generator().manual_seed(1), torch.Generator()]]
                             )),                # device declared
            Spec("dplib.training.grads.row_norms", lambda: GR.row_norms,
                 args=(torch.ones(3, 2),), params=dict(rows=[torch.ones(3), None, "abc"])),
            Spec("dplib.training.grads.zero_dead", lambda: GR.zero_dead,
                 args=(torch.ones(3, 2), torch.ones(3)), params=dict(t=[None, "abc"],
                                                                    f=[None, "abc"])),
            Spec("dplib.training.grads.weighted_example_sum", lambda: GR.weighted_example_sum,
                 args=(torch.ones(3), torch.ones(3, 2)),
                 params=dict(f=[torch.ones(2), torch.ones(3, 1), None],
                             g=[torch.ones(2, 2), None, "abc"])),
            Spec("dplib.training.models.check_examples_independent",
                 lambda: MO.check_examples_independent, args=(lin, torch.ones(3, 4)),
                 params=dict(like=[None, torch.tensor(1.0)])),
            Spec("dplib.training.models.forward_must_not_mutate",
                 lambda: (lambda model: MO.forward_must_not_mutate(model).__enter__()),
                 args=(lin,), params=dict(model=[None, "model"])),
            Spec("dplib.training.preflight.narrowest_dtype", lambda: TT.narrowest_dtype,
                 args=(lin,)),
            Spec("dplib.training.preflight.check_every_record_runs",
                 lambda: TT.check_every_record_runs,
                 args=(lin, torch.nn.functional.cross_entropy, torch.ones(3, 4),
                       torch.zeros(3, dtype=torch.long)),
                 params=dict(x=[None, "abc"], y=[None, torch.zeros(2, dtype=torch.long)])),
            Spec("dplib.training.preflight.check_sum_range", lambda: TT.check_sum_range,
                 args=(1.0, 1.0, 10)),
        ]
    except ImportError:
        pass
    try:
        from dplib import encoding as EN
        from dplib.encoding import accounting as EA
        from dplib.encoding import moments as EM
        g = EN.GaussianNoise(1.0)
        st = EN.StudentTNoise(9.0, 1.0)     # check_monotone returns at once for Gaussian/Laplace
        book = EN.Codebook(np.array([[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.6, 0.8],
                                     [0.5, 0.5, 0.5, 0.5]]))
        out += [
            # declared (dplib.encoding._params): valid calls, and a tolerance given as text
            Spec("dplib.encoding.moments.moment_table", lambda: EM.moment_table,
                 args=(g, 3, 1.0)),
            Spec("dplib.encoding.moments.check_monotone", lambda: EM.check_monotone,
                 args=(st, 3, 1.0), params=dict(tol=["x"])),
            Spec("dplib.encoding.accounting.code_log_moments", lambda: EA.code_log_moments,
                 args=(book, g, [2, 3])),
        ]
    except ImportError:
        pass
    return out


def transformer_specs() -> list[Spec]:
    """The small transformer of the speed benchmark, the ghost path's plan and mixed rule, the
    stored speed table, the CPU chunk size of the vmap path, and the accuracy recipes."""
    try:
        import torch

        from dplib import training as TR
        from dplib.experiments import dpsgd_tables as DT
    except ImportError:
        return []
    lin = torch.nn.Linear(4, 2)
    x, y = torch.randn(5, 4), torch.randint(0, 2, (5,))
    ce = torch.nn.functional.cross_entropy
    return [
        Spec("dplib.training.models.make_transformer", lambda: TR.make_transformer,
             args=(20, 3, 8), kwargs=dict(dim=8, heads=2, layers=1),
             params=dict(vocab_size=[1, 0, 2.5, None], num_classes=[1, 0, None], dim=[0, 7, 2.5],
                         heads=[0, -1, None], seed=[-1, 2.5, "a"]),
             names=dict(dim="dim|heads")),
        Spec("dplib.training.models.TokenClassifier", lambda: TR.TokenClassifier,
             args=(20, 3, 8, 8, 2, 1),
             params=dict(vocab_size=[0, -1], dim=[7])),
        Spec("dplib.training.ghost_layers.use_gram", lambda: TR.use_gram, args=(4, 8, 5),
             params=dict(positions="int1", fan_in="int1", fan_out="int1")),
        Spec("dplib.training.ghost.ghost_plan", lambda: TR.ghost_plan, args=(lin, ce, x, y),
             params=dict(x=[x[:3], x.numpy(), None], model=[None, "model"])),
        Spec("dplib.experiments.dpsgd_tables.load_speed_table", lambda: DT.load_speed_table,
             args=(DT.SPEED_TABLE,), params=dict(path=["/nonexistent/s.json"])),
        Spec("dplib.experiments.dpsgd_tables.load_utility_table",
             lambda: DT.load_utility_table, args=(DT.UTILITY_TABLE,),
             params=dict(path=["/nonexistent/u.json"])),
        Spec("dplib.experiments.dpsgd_tables.utility_accuracy", lambda: DT.utility_accuracy,
             args=({"results": [{"recipe": "baseline", "epsilon": 1.0, "test_accuracy_mean": 0.9,
                                 "test_accuracy_std": 0.01}]}, "baseline", 1.0),
             params=dict(recipe=["nope"], epsilon=[2.0, "1"])),     # declared; extras
        Spec("dplib.provenance.run_provenance", lambda: __import__("dplib.provenance",
                                                                  fromlist=["x"]).run_provenance,
             args=("python x.py", "."), params=dict(root=["/nonexistent/dir"])),
        Spec("dplib.experiments.dpsgd_tables.speed_ratios", lambda: DT.speed_ratios,
             args=({"results": {"mlp": {"ms_per_step": {"non-private": 1.0}}}}, "mlp"),
             params=dict(model=["gpt"])),                      # declared; not in the table
        Spec("dplib.experiments.dpsgd_tables.format_speed_table", lambda: DT.format_speed_table,
             args=({"results": {}},)),
        Spec("dplib.training.recipes.shift_copies", lambda: TR.shift_copies,
             args=(torch.zeros(3, 64), (8, 8)),
             params=dict(x=[torch.zeros(3, 10), None, [1.0]], image_shape=[(0, 8), (8,), None],
                         copies=[0, 4, 2.5], fill=[NAN, "a"])),
        Spec("dplib.training.recipes.AugMult", lambda: TR.AugMult,
             args=(torch.nn.Linear(64, 2), (8, 8)),
             params=dict(model=[None, "m"], image_shape=[(0, 8), None], copies=[0, 3])),
        Spec("dplib.training.recipes.augmult_cross_entropy", lambda: TR.augmult_cross_entropy,
             args=(torch.zeros(3, 5, 2), torch.zeros(3, dtype=torch.long)),
             params=dict(logits=[None, torch.zeros(3)], targets=[None, torch.zeros(2)])),
        Spec("dplib.training.recipes.ExponentialAverage", lambda: TR.ExponentialAverage,
             args=(dict(lin.named_parameters()), 0.9),
             params=dict(params=[None, {}, {"w": 1.0}], decay=[0.0, 1.0, -0.5, NAN, None])),
        Spec("dplib.training.recipes.PublicPCA", lambda: TR.PublicPCA,
             args=(torch.randn(10, 4), 2),
             params=dict(x_public=[None, torch.randn(1, 4), torch.full((10, 4), NAN)],
                         components=[0, 10, 2.5])),
        Spec("dplib.training.recipes.PublicKernelFeatures", lambda: TR.PublicKernelFeatures,
             args=(torch.randn(10, 4), 0.5),
             params=dict(x_public=[None, torch.zeros(0, 4), torch.full((10, 4), NAN),
                                   torch.zeros(10, 4, dtype=torch.long)],
                         gamma=[0.0, -1.0, INF, NAN, "a", None])),
        Spec("dplib.training.grads.cpu_chunk_size", lambda: TR.grads.cpu_chunk_size,
             args=(dict(lin.named_parameters()),), params=dict(params=[None, [1.0], {"w": 1}])),
    ]


def icl_model_specs() -> list[Spec]:
    """Chapter 10's model switch, the tiny GPT-2 and the stored model table."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return []
    from dplib.icl import loader as IL
    from dplib.experiments import icl_report as IR
    from dplib.icl import tiny_lm as TL
    return [
        # declared (dplib.icl._params): params only keep earlier hand-picked values
        Spec("dplib.icl.tiny_lm.tiny_config", lambda: TL.tiny_config, args=(192,),
             params=dict(vocab_size=[-1, 2.5, "192"])),
        Spec("dplib.icl.tiny_lm.training_texts", lambda: TL.training_texts, args=(2,),
             kwargs=dict(rng=0)),
        Spec("dplib.icl.tiny_lm.train_tiny_lm", lambda: TL.train_tiny_lm,
             kwargs=dict(steps=1, batch_size=2, rng=0)),
        Spec("dplib.experiments.icl_report.model_report", lambda: IR.model_report,
             args=(IL.load_model("offline"), *IL.load_datasets("offline")),
             kwargs=dict(rng=0, num_runs=1, num_queries=2, mia_trials=12),
             params=dict(mia_trials=[0, -1, 2.5, "600"])),
        Spec("dplib.icl.loader.load_model", lambda: IL.load_model, args=("offline",)),
        Spec("dplib.icl.loader.load_datasets", lambda: IL.load_datasets, args=("offline",)),
    ]


def private_run_specs() -> list[Spec]:
    """The stages of one private run: its configuration, the clipped-sum stage, the release
    classification."""
    try:
        import dplib.training as TR
        from .bad_inputs_ml import training_fixture
    except ImportError:
        return []
    x, y, lin, ce = training_fixture()
    return [
        Spec("dplib.training.config.RunConfig", lambda: TR.RunConfig,
             kwargs=dict(sample_rate=0.1, lr=0.1, steps=10, noise_multiplier=1.0),
             params=dict(weight_decay=[-0.1, NAN, None], steps="int1", epochs=[2.0],
                         noise_multiplier=[-1.0, NAN, INF, "1"], target_epsilon=[1.0],
                         betas=[(0.9,), (1.0, 0.9), None, "ab"], virtual_batch_size=[0, -1, 2.5])),
        Spec("dplib.training.clipped_sum.private_clipped_sum",
             lambda: TR.private_clipped_sum, args=(lin(), ce, x, y, 1.0),
             params=dict(x=[x[:3], None, "x"], y=[y[:3], None], max_norm=[0.0, -1.0, NAN],
                         ghost=[1, "yes"]),
             names=dict(max_norm="max_norm|max_grad_norm")),
        Spec("dplib.training.clipped_sum.exact_clipped_sum", lambda: TR.exact_clipped_sum,
             args=(lin(), ce, x, y, 1.0),
             params=dict(x=[x[:3], None, "x"], y=[y[:3], None], max_norm=[0.0, -1.0, NAN]),
             names=dict(max_norm="max_norm|max_grad_norm")),
        Spec("dplib.training.clipped_sum.private_per_example_grads",
             lambda: TR.clipped_sum.private_per_example_grads, args=(lin(), ce, x, y),
             params=dict(x=[x[:3], None, "x"], y=[y[:3], None])),
        Spec("dplib.training.release.field_kinds", lambda: TR.release.field_kinds,
             args=(TR.TrainResult,), params=dict(result=[None, "result", 3])),
        Spec("dplib.training.release.publishable", lambda: TR.publishable,
             args=(TR.TrainResult(model=lin(), noise_multiplier=1.0, sample_rate=0.1,
                                  steps=1, delta=1e-5, epsilon=1.0),),
             params=dict(result=[None, "result", 3])),
    ]
