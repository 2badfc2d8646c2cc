"""Bad-input specs (:class:`~dplib.testing.bad_inputs.Spec`) of dplib's NumPy core:
accounting, auditing and linkage, the mechanisms, the samplers, data sets, devices, widgets,
plotting and tables."""
from __future__ import annotations

import functools

import numpy as np

from ._sweep import INF, NAN, Spec

__all__ = ["core_specs", "support_specs", "event_specs"]


@functools.lru_cache(maxsize=1)
def _rr_audit():
    from dplib.experiments import mechanism_audits as MA
    return MA.mechanism_audits(1.0, include_broken=False)[0]


def core_specs() -> list[Spec]:
    """Accounting, auditing and linkage, the mechanisms and the samplers."""
    from dplib import accounting as A
    from dplib import mechanisms as M
    from dplib import samplers as S
    from dplib.accounting import composition as C
    from dplib.accounting import pld as P
    from dplib.attacks import audit_stats as AU
    from dplib.experiments import mechanism_audits as MA
    from dplib.attacks import linkage as L

    def acc_with_history(cls, **kw):
        return lambda: cls(**kw).step(noise_multiplier=1.0, sample_rate=0.01, num_steps=10)

    orders = [2.0, 4.0, 8.0]
    return [
        # -- accounting: parameters declared (dplib._constraints), so each entry gives the valid
        # call and only the hostile values a declaration cannot state ------------------------
        Spec("dplib.accounting.calibrate.calibrate_noise", lambda: A.calibrate_noise,
             kwargs=dict(target_epsilon=1.0, delta=1e-5, sample_rate=0.01, num_steps=100),
             params=dict(accountant="choice")),       # the registry grows at run time
        Spec("dplib.accounting.composition.basic_composition", lambda: C.basic_composition,
             kwargs=dict(epsilons=[0.1, 0.2], deltas=[0.0, 1e-6], k=2),
             params=dict(deltas=[[0.0, 0.0, 0.0]])),   # three δ for two ε
        Spec("dplib.accounting.composition.advanced_composition",
             lambda: C.advanced_composition,
             kwargs=dict(epsilon=0.1, delta=1e-6, k=10, delta_slack=1e-6)),
        Spec("dplib.accounting.composition.group_privacy", lambda: C.group_privacy,
             kwargs=dict(epsilon=0.5, delta=1e-6, k=2), params=dict(epsilon=["0.1"])),
        Spec("dplib.accounting.composition.optimal_composition_delta",
             lambda: C.optimal_composition_delta,
             kwargs=dict(epsilon=0.1, delta=0.0, k=10, target_epsilon=1.0)),
        Spec("dplib.accounting.composition.optimal_composition_epsilon",
             lambda: C.optimal_composition_epsilon,
             kwargs=dict(epsilon=0.1, delta=0.0, k=10, target_delta=1e-5)),
        Spec("dplib.accounting.gdp.clt_mu", lambda: A.clt_mu,
             kwargs=dict(sample_rate=0.01, noise_multiplier=1.0, num_steps=100)),
        Spec("dplib.accounting.gdp.gdp_epsilon", lambda: A.gdp_epsilon,
             kwargs=dict(mu=1.0, delta=1e-5)),
        Spec("dplib.accounting.pld.PLDAccountant", lambda: A.PLDAccountant, kwargs=dict(),
             # sampling without replacement needs replace-one adjacency (the default add/remove)
             params=dict(sampling=["without_replacement"])),
        Spec("dplib.accounting.pld.PLDAccountant.step", lambda: A.PLDAccountant().step,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.01, num_steps=10)),
        Spec("dplib.accounting.pld.PLDAccountant.get_epsilon",
             lambda: acc_with_history(A.PLDAccountant)().get_epsilon, kwargs=dict(delta=1e-5)),
        Spec("dplib.accounting.pld.PLDAccountant.get_delta",
             lambda: acc_with_history(A.PLDAccountant)().get_delta, kwargs=dict(epsilon=1.0)),
        Spec("dplib.accounting.pld_fft.compose", lambda: P.compose,
             kwargs=dict(plds=[P.subsampled_gaussian_pld(1.0, 0.1)], counts=[3]),
             params=dict(counts=[[], [1, 2]])),         # not one count per PLD
        Spec("dplib.accounting.pld_grid.loss_scale", lambda: P.loss_scale,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.1, direction="remove")),
        Spec("dplib.accounting.pld_grid.subsampled_gaussian_pld", lambda: P.subsampled_gaussian_pld,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.1)),
        Spec("dplib.accounting.rdp.RDPAccountant", lambda: A.RDPAccountant, kwargs=dict(),
             params=dict(sampling=["without_replacement"])),
        Spec("dplib.accounting.rdp.RDPAccountant.step", lambda: A.RDPAccountant().step,
             kwargs=dict(noise_multiplier=1.0, sample_rate=0.01, num_steps=10)),
        Spec("dplib.accounting.rdp.RDPAccountant.get_epsilon",
             lambda: acc_with_history(A.RDPAccountant)().get_epsilon, kwargs=dict(delta=1e-5)),
        Spec("dplib.accounting.rdp.RDPAccountant.get_delta",
             lambda: acc_with_history(A.RDPAccountant)().get_delta, kwargs=dict(epsilon=1.0)),
        Spec("dplib.accounting.rdp.gaussian_rdp", lambda: A.gaussian_rdp,
             kwargs=dict(orders=orders, noise_multiplier=1.0)),
        Spec("dplib.accounting.rdp.subsampled_gaussian_rdp", lambda: A.subsampled_gaussian_rdp,
             kwargs=dict(orders=orders, noise_multiplier=1.0, sample_rate=0.01)),
        Spec("dplib.accounting.rdp.rdp_to_epsilon", lambda: A.rdp_to_epsilon,
             kwargs=dict(orders=orders, rdp=[0.1, 0.2, 0.4], delta=1e-5),
             params=dict(rdp=[[0.1, 0.2], []])),        # not one value per order
        Spec("dplib.accounting.rdp.rdp_to_delta", lambda: A.rdp_to_delta,
             kwargs=dict(orders=orders, rdp=[0.1, 0.2, 0.4], epsilon=1.0),
             params=dict(rdp=[[0.1, 0.2], []])),
        Spec("dplib.accounting.subsampling.amplified_advanced_composition",
             lambda: A.amplified_advanced_composition,
             kwargs=dict(noise_multiplier=2.0, sample_rate=0.01, num_steps=100, delta=1e-5),
             # sample_rate = 1e-9 is a rate, but δ/(2Tq) = 50 is no per-step δ0 (δ < 2Tq needed)
             params=dict(sample_rate=[1e-9])),
        Spec("dplib.accounting.subsampling.amplified_delta", lambda: A.amplified_delta,
             kwargs=dict(delta=1e-5, sample_rate=0.1)),
        Spec("dplib.accounting.subsampling.amplified_epsilon", lambda: A.amplified_epsilon,
             kwargs=dict(epsilon=1.0, sample_rate=0.1)),
        Spec("dplib.accounting.subsampling.amplified_epsilon_bound",
             lambda: A.amplified_epsilon_bound, kwargs=dict(epsilon=0.5, sample_rate=0.1)),
        Spec("dplib.accounting.subsampling.amplify", lambda: A.amplify,
             kwargs=dict(epsilon=1.0, delta=1e-5, sample_rate=0.1)),
        Spec("dplib.accounting.subsampling.wor_gaussian_rdp", lambda: A.wor_gaussian_rdp,
             kwargs=dict(orders=orders, noise_multiplier=1.0, sample_rate=0.01)),
        # -- attacks: auditing, linkage -------------------------------------------------------
        Spec("dplib.attacks.audit_stats.clopper_pearson", lambda: AU.clopper_pearson,
             kwargs=dict(k=3, n=10),
             params=dict(k=[-1, 11, 1.5, NAN, "3", None, []], n="int1")),
        Spec("dplib.attacks.audit_stats.epsilon_lower_bound", lambda: AU.epsilon_lower_bound,
             kwargs=dict(tpr=0.5, fpr=0.1, n=10),
             params=dict(tpr=[-0.1, 1.5, NAN, 0.55, "0.5", None, []],
                         fpr=[-0.1, 1.5, NAN, "0.5", None], n=[0, -1, 2.5, (10,), None, "10"])),
        Spec("dplib.attacks.audit_stats.epsilon_lower_bound_from_counts",
             lambda: AU.epsilon_lower_bound_from_counts,
             kwargs=dict(k_pos=5, n_pos=10, k_neg=1, n_neg=10),
             params=dict(k_pos=[-1, 11, 2.5, None], n_pos="int1", k_neg=[-1, 11, NAN],
                         n_neg="int1")),
        Spec("dplib.attacks.audit_stats.audit_from_samples", lambda: AU.audit_from_samples,
             kwargs=dict(samples_d=np.arange(20.0), samples_d_prime=np.arange(20.0) + 1),
             params=dict(samples_d=[[], [1.0, 2.0], np.ones((4, 2)), [NAN] * 8, "abcd", None],
                         samples_d_prime=[[], np.ones((4, 2)), [NAN] * 8, None],
                         max_thresholds=[1, 0, 2.5, None])),
        Spec("dplib.attacks.audit_stats.max_certifiable_epsilon",
             lambda: AU.max_certifiable_epsilon,
             kwargs=dict(n=1000), params=dict(n="int1")),
        Spec("dplib.experiments.mechanism_audits.mechanism_audits", lambda: MA.mechanism_audits,
             kwargs=dict(epsilon=1.0), params=dict(epsilon=["1", 25.0])),     # declared
        Spec("dplib.attacks.catalogue.MechanismAudit.run", lambda: _rr_audit().run,
             kwargs=dict(n=100, rng=0), params=dict(n=[0, 3, 2.5, None, "10"])),
        Spec("dplib.attacks.audit_stats.AuditResult.refutes",
             lambda: AU.audit_from_samples(np.arange(20.0), np.arange(20.0)).refutes,
             kwargs=dict(epsilon=1.0)),
        Spec("dplib.attacks.linkage.combined_key", lambda: L.combined_key,
             kwargs=dict(columns=[np.array([1, 2, 3]), np.array([4, 5, 6])]),
             params=dict(columns=[[], [np.array([1, 2]), np.array([1, 2, 3])], None, "abc"])),
        Spec("dplib.attacks.linkage.uniqueness_rate", lambda: L.uniqueness_rate,
             kwargs=dict(columns=[np.array([1, 2, 3]), np.array([4, 5, 6])]),
             params=dict(columns=[[], [np.array([1, 2]), np.array([1, 2, 3])], None])),
        Spec("dplib.attacks.linkage.link_records", lambda: L.link_records,
             kwargs=dict(release=[np.array([1, 2, 3])], public=[np.array([3, 2, 1])]),
             params=dict(release=[[], None, [np.array([1, 2]), np.array([1, 2, 3])]],
                         public=[[], None, [np.array([1]), np.array([2])]])),
        # -- mechanisms ----------------------------------------------------------------------
        Spec("dplib.mechanisms.discrete.bernoulli_exp", lambda: M.bernoulli_exp,
             kwargs=dict(gamma=0.5, size=10, rng=0)),
        Spec("dplib.mechanisms.discrete.discrete_gaussian", lambda: M.discrete_gaussian,
             kwargs=dict(sigma_squared=2.0, size=10, rng=0)),
        Spec("dplib.mechanisms.discrete.discrete_laplace", lambda: M.discrete_laplace,
             kwargs=dict(scale=2.0, size=10, rng=0)),
        Spec("dplib.mechanisms.discrete.discrete_gaussian_delta",
             lambda: M.discrete_gaussian_delta,
             kwargs=dict(sigma_squared=4.0, epsilon=1.0)),
        Spec("dplib.mechanisms.discrete.discrete_gaussian_pmf", lambda: M.discrete_gaussian_pmf,
             kwargs=dict(k=[0, 1, 2], sigma_squared=4.0),
             params=dict(k=[[NAN], [0.5], "abc", None])),
        Spec("dplib.mechanisms.discrete.discrete_laplace_pmf", lambda: M.discrete_laplace_pmf,
             kwargs=dict(k=[0, 1, 2], scale=2.0),
             params=dict(k=[[NAN], [0.5], "abc", None])),
        Spec("dplib.mechanisms.discrete.discrete_gaussian_mechanism",
             lambda: M.discrete_gaussian_mechanism,
             kwargs=dict(value=[1, 2, 3], sigma_squared=2.0, rng=0),
             params=dict(value=[[1.5], [NAN], "abc", None, [True]])),
        Spec("dplib.mechanisms.discrete.discrete_laplace_mechanism",
             lambda: M.discrete_laplace_mechanism,
             kwargs=dict(value=[1, 2, 3], epsilon=1.0, rng=0),
             params=dict(value=[[1.5], [NAN], "abc", None])),
        Spec("dplib.mechanisms.exponential.exponential_mechanism",
             lambda: M.exponential_mechanism,
             kwargs=dict(utilities=[1.0, 2.0, 3.0], epsilon=1.0, rng=0)),
        Spec("dplib.mechanisms.exponential.exponential_mechanism_probabilities",
             lambda: M.exponential_mechanism_probabilities,
             kwargs=dict(utilities=[1.0, 2.0, 3.0], epsilon=1.0)),
        Spec("dplib.mechanisms.exponential.report_noisy_max", lambda: M.report_noisy_max,
             kwargs=dict(scores=[1.0, 2.0, 3.0], epsilon=1.0, rng=0)),
        Spec("dplib.mechanisms.gaussian.gaussian_delta", lambda: M.gaussian_delta,
             kwargs=dict(sigma=1.0, epsilon=1.0),
             params=dict(epsilon="nonneg")),
        Spec("dplib.mechanisms.gaussian.gaussian_log_delta", lambda: M.gaussian_log_delta,
             kwargs=dict(mu=1.0, epsilon=1.0),
             params=dict(mu=[-1.0, NAN, None, "abc"], epsilon=[-1.0, NAN, None, "abc"])),
        Spec("dplib.mechanisms.gaussian.gaussian_epsilon", lambda: M.gaussian_epsilon,
             kwargs=dict(sigma=1.0, delta=1e-5)),
        Spec("dplib.mechanisms.gaussian.gaussian_sigma", lambda: M.gaussian_sigma,
             kwargs=dict(epsilon=0.5, delta=1e-5),
             params=dict(epsilon="pos")),
        Spec("dplib.mechanisms.gaussian.gaussian_mechanism", lambda: M.gaussian_mechanism,
             kwargs=dict(value=[1.0, 2.0], epsilon=0.5, delta=1e-5, rng=0)),
        Spec("dplib.mechanisms.gaussian.gaussian_privacy_loss", lambda: M.gaussian_privacy_loss,
             kwargs=dict(output=[0.5], sigma=1.0)),
        Spec("dplib.mechanisms.laplace.float_laplace_reachable",
             lambda: M.float_laplace_reachable,
             kwargs=dict(output=[0.5], value=0.0, scale=1.0)),
        Spec("dplib.mechanisms.laplace.laplace_mechanism", lambda: M.laplace_mechanism,
             kwargs=dict(value=[1.0, 2.0], epsilon=1.0, rng=0)),
        Spec("dplib.mechanisms.laplace.laplace_privacy_loss", lambda: M.laplace_privacy_loss,
             kwargs=dict(output=[0.5], scale=1.0)),
        Spec("dplib.mechanisms.laplace.laplace_scale", lambda: M.laplace_scale,
             kwargs=dict(epsilon=1.0)),
        Spec("dplib.mechanisms.laplace.mean_sensitivity", lambda: M.mean_sensitivity,
             kwargs=dict(n=100, bound=1.0)),
        Spec("dplib.mechanisms.laplace.textbook_float_laplace",
             lambda: M.textbook_float_laplace,
             kwargs=dict(value=0.0, scale=1.0, size=5, rng=0)),
        Spec("dplib.mechanisms.randomized_response.coin_flip_p_truth",
             lambda: M.coin_flip_p_truth, kwargs=dict(heads=0.5)),
        Spec("dplib.mechanisms.randomized_response.randomized_response",
             lambda: M.randomized_response,
             kwargs=dict(answers=[0, 1, 1], epsilon=1.0, rng=0)),
        Spec("dplib.mechanisms.randomized_response.rr_epsilon", lambda: M.rr_epsilon,
             kwargs=dict(p_truth=0.75), params=dict(p_truth=[0.5, 1.0, 0.2, NAN, "0.7",
                                                             None])),
        Spec("dplib.mechanisms.randomized_response.rr_estimate", lambda: M.rr_estimate,
             kwargs=dict(reports=[0, 1, 1], epsilon=1.0),
             params=dict(axis=[5, 1.5, "x"])),
        Spec("dplib.mechanisms.randomized_response.rr_estimator_variance",
             lambda: M.rr_estimator_variance,
             kwargs=dict(proportion=0.3, n=100, epsilon=1.0)),
        Spec("dplib.mechanisms.randomized_response.rr_p_truth", lambda: M.rr_p_truth,
             kwargs=dict(epsilon=1.0)),
        Spec("dplib.mechanisms.randomized_response.rr_simulate_estimates",
             lambda: M.rr_simulate_estimates,
             kwargs=dict(n=100, proportion=0.3, epsilon=1.0, trials=10, rng=0)),
        # -- samplers ------------------------------------------------------------------------
        Spec("dplib.samplers.poisson_batches", lambda: S.poisson_batches,
             kwargs=dict(n=100, sample_rate=0.1, num_steps=5, rng=0)),
        Spec("dplib.samplers.fixed_size_batches", lambda: S.fixed_size_batches,
             kwargs=dict(n=100, batch_size=10, num_steps=5, rng=0),
             params=dict(batch_size=[101])),          # m > n
        Spec("dplib.samplers.shuffled_epochs", lambda: S.shuffled_epochs,
             kwargs=dict(n=100, batch_size=10, epochs=2, rng=0),
             params=dict(batch_size=[101])),          # m > n
    ]


def support_specs() -> list[Spec]:
    """Data sets, devices, widgets, plotting and the table formatter."""
    from dplib import datasets as D
    from dplib import device as DV
    from dplib import tables as TB
    from dplib import widget_frames as WF
    from dplib import widgets as W

    def plot(x=1.0):   # a trivial figure function for widgets
        import matplotlib.pyplot as plt
        return plt.figure()

    return [
        # datasets, device, widgets, plotting, tables: declared parameters
        # (dplib._constraints); the params below are the extras a declaration cannot state
        Spec("dplib.datasets.synthetic_survey", lambda: D.synthetic_survey,
             kwargs=dict(n=100, proportion=0.3, rng=0)),
        Spec("dplib.datasets.synthetic_health_records", lambda: D.synthetic_health_records,
             kwargs=dict(n=100, rng=0)),
        Spec("dplib.device.get_device", lambda: DV.get_device, kwargs=dict(prefer="cpu")),
        Spec("dplib.device.as_device", lambda: DV.as_device, kwargs=dict(device="cpu"),
             params=dict(device=["tpu", 3, "", NAN, "cudaz"])),
        Spec("dplib.device.seed_everything", lambda: DV.seed_everything, kwargs=dict(seed=0)),
        Spec("dplib.device.setup", lambda: DV.setup, kwargs=dict(seed=0, verbose=False)),
        Spec("dplib.widget_controls.slider", lambda: W.slider,
             kwargs=dict(min=0.0, max=1.0, value=0.5),   # extras: min >= max, value outside
             params=dict(min=["0", 2.0], max=["1", -1.0], value=[1.5, -0.5])),
        Spec("dplib.widget_controls.int_slider", lambda: W.int_slider,
             kwargs=dict(min=0, max=10, value=5),
             params=dict(min=[0.5, "0", 11], max=["10", -1], value=[11, -1])),
        Spec("dplib.widget_controls.log_slider", lambda: W.log_slider,
             kwargs=dict(min=0.1, max=10.0, value=1.0),
             params=dict(min=["0.1"], max=[0.05], value=[20.0, 0.01])),
        Spec("dplib.widget_frames.frame_grid", lambda: WF.frame_grid,
             args=({"x": W.slider(0.0, 1.0, 0.5)}, 3),
             params=dict(points=[0], max_product=[-1])),
        Spec("dplib.widget_frames.plan_grid", lambda: WF.plan_grid,
             args=({"x": W.slider(0.0, 1.0, 0.5)}, 10), params=dict(frames=[-1])),
        Spec("dplib.plotting.compact_png", lambda: __import__(
            "dplib.plotting", fromlist=["x"]).compact_png,
             args=(__import__("matplotlib.figure", fromlist=["x"]).Figure(),),
             params=dict(colors=[300])),
        Spec("dplib.widget_controls.dropdown", lambda: W.dropdown,
             kwargs=dict(options=["a", "b"], value="a"),
             params=dict(value=["c", None, 0])),              # value not among the options
        Spec("dplib.widgets.interactive_figure", lambda: W.interactive_figure,
             args=(plot,), kwargs=dict(show=False, x=W.slider(0.0, 2.0, 1.0)),
             params=dict(plot=[3, "plot"])),
        Spec("dplib.tables.format_table", lambda: TB.format_table,
             args=([{"a": 1, "b": 2.5}],),     # extras: keys not among the columns, bad cells
             params=dict(columns=[[]], formats=[{"zzz": ".2f"}, {"a": 3}],
                         headers=[{"zzz": "x"}], align=[{"a": "left"}],
                         widths=[{"a": -1}, {"a": 2.5}], sep=[["a", "b"]], style=["html"])),
    ]


def event_specs() -> list[Spec]:
    """Accounting events, the accountant registry, generic calibration and the DP-SGD engine."""
    import torch

    from dplib import accounting as A
    from dplib.accounting import events as E
    from dplib.accounting import registry as R
    from dplib.training import engine as G
    from dplib.mechanisms import secure_noise as SN

    gauss = A.GaussianEvent(1.0)
    return [
        # accounting: declared parameters (dplib._constraints); hostile extras only
        Spec("dplib.accounting.events.GaussianEvent", lambda: A.GaussianEvent, args=(1.0,)),
        Spec("dplib.accounting.events.LaplaceEvent", lambda: A.LaplaceEvent, args=(1.0,)),
        Spec("dplib.accounting.events.PoissonSampledEvent", lambda: A.PoissonSampledEvent,
             args=(0.1, gauss), params=dict(event=[A.ZCDPEvent(0.5)])),   # no amplification
        Spec("dplib.accounting.events.SampledWithoutReplacementEvent",
             lambda: A.SampledWithoutReplacementEvent, args=(0.1, gauss),
             params=dict(event=[A.ZCDPEvent(0.5)])),
        Spec("dplib.accounting.events.SelfComposedEvent", lambda: A.SelfComposedEvent,
             args=(gauss, 3)),
        Spec("dplib.accounting.events.ComposedEvent", lambda: A.ComposedEvent, args=([gauss],)),
        Spec("dplib.accounting.events.dpsgd_event", lambda: A.dpsgd_event, args=(1.0, 0.01, 10)),
        Spec("dplib.accounting.events.flatten", lambda: E.flatten, args=(gauss,)),
        Spec("dplib.accounting.events.check_noise_multiplier", lambda: E.check_noise_multiplier,
             args=(1.0,), params=dict(value=[0.0, -1.0, NAN, INF, "1", None, 1e200]),
             names=dict(value="noise_multiplier")),
        *[Spec(f"dplib.accounting.{mod}.{cls.__name__}.compose", (lambda c=cls: c().compose),
               args=(gauss,)) for mod, cls in (("rdp", A.RDPAccountant), ("pld", A.PLDAccountant))],
        Spec("dplib.accounting.rdp.laplace_rdp", lambda: A.laplace_rdp, args=([2.0, 4.0], 1.0)),
        Spec("dplib.accounting.registry.make_accountant", lambda: R.make_accountant,
             args=("rdp",), names=dict(name="accountant")),
        Spec("dplib.accounting.registry.accountant_class", lambda: R.accountant_class,
             args=("pld",), names=dict(name="accountant")),
        Spec("dplib.accounting.registry.register_accountant", lambda: R.register_accountant,
             args=("rdp",)),
        Spec("dplib.accounting.calibrate.calibrate", lambda: A.calibrate,
             args=(lambda s: A.SelfComposedEvent(A.GaussianEvent(s), 10), 1.0, 1e-5),
             params=dict(accountant=["moments", None, 3])),   # a name or a factory: run time
        Spec("dplib.training.engine.GaussianPrivatizer", lambda: G.GaussianPrivatizer,
             args=(1.0, 1.0)),
        Spec("dplib.mechanisms.secure_noise.secure_grid", lambda: SN.secure_grid,
             kwargs=dict(std=1.0)),
        Spec("dplib.mechanisms.secure_noise.secure_sensitivity", lambda: SN.secure_sensitivity,
             kwargs=dict(sensitivity=1.0, numel=10, std=1.0)),
        Spec("dplib.mechanisms.secure_noise.secure_noise_multiplier",
             lambda: SN.secure_noise_multiplier,
             kwargs=dict(noise_multiplier=1.0, max_grad_norm=1.0, numel=10)),
        Spec("dplib.mechanisms.secure_noise.secure_gaussian", lambda: SN.secure_gaussian,
             args=((2, 3),), kwargs=dict(std=1.0, generator=torch.Generator().manual_seed(1)),
             params=dict(shape=[(-1,), (2.5,), None, "ab"],
                         generator=[-1, "seed", 1.5, torch.Generator()],
                         dtype=[torch.int64, "float32", 3], device=["gpu", 3])),
        Spec("dplib.mechanisms.secure_noise.secure_add_noise", lambda: SN.secure_add_noise,
             args=(torch.zeros(2, 3),),
             kwargs=dict(std=1.0, generator=torch.Generator().manual_seed(1)),
             params=dict(total=[np.zeros(3), torch.zeros(3, dtype=torch.int64), None,
                                {"w": [0.0]}], generator=[-1, "seed", 1.5, torch.Generator(),
                                    [torch.Generator().manual_seed(1)]])),
        Spec("dplib.training.engine.gaussian_noise", lambda: G.gaussian_noise,
             args=((2, 3), [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)],
                   torch.float32, "cpu"),
             params=dict(generator=[[torch.Generator().manual_seed(1)],
                                    [torch.Generator().manual_seed(1), torch.Generator()]])),
    ]
