"""Accountant speed and ε: dplib vs Opacus (RDP, PRV) and dp-accounting (RDP, PLD), side by side.

Run:  python benchmarks/accounting.py          (about a minute on 2 CPU cores)

Cases: (q, σ, T) = (256/60000, 1.1, 14062), (0.01, 1.0, 1000), (0.1, 0.5, 1000), δ = 1e-5.
Each timing is the best of ``REPEATS`` fresh runs (new accountant each time, nothing cached), so
it measures a full ε computation. Ratios are other-library time / dplib time (> 1: dplib faster).
Speed is measured here, never asserted in tests.
"""
from __future__ import annotations

import logging
import importlib.metadata
import sys
import time
import warnings

DELTA = 1e-5
CASES = [(256 / 60000, 1.1, 14062), (0.01, 1.0, 1000), (0.1, 0.5, 1000)]
REPEATS = 3


def best_time(fn, repeats=REPEATS):
    best, value = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t0)
    return best, value


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import dp_accounting
    import opacus
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant
    from opacus.accountants import PRVAccountant
    from opacus.accountants import RDPAccountant as OpacusRDP

    from dplib.accounting import OPACUS_ORDERS, PLDAccountant, RDPAccountant, calibrate_noise

    print(f"python {sys.version.split()[0]}, opacus {opacus.__version__}, "
          f"dp-accounting {importlib.metadata.version('dp-accounting')}; δ = {DELTA:g}")
    for q, s, T in CASES:
        print(f"\n== q={q:.6g}, σ={s}, T={T} ==")
        rows = []

        def o_rdp():
            a = OpacusRDP()
            a.history = [(s, q, T)]
            return a.get_epsilon(DELTA)

        def o_prv():
            a = PRVAccountant()
            a.history = [(s, q, T)]
            return a.get_epsilon(DELTA, eps_error=0.01)

        def g_rdp():
            a = rdp_privacy_accountant.RdpAccountant()
            a.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), T)
            return a.get_epsilon(DELTA)

        def g_pld():
            a = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
            a.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), T)
            return a.get_epsilon(DELTA)

        d_rdp = lambda: RDPAccountant().step(noise_multiplier=s, sample_rate=q,  # noqa: E731
                                             num_steps=T).get_epsilon(DELTA)
        d_rdp_o = lambda: RDPAccountant(orders=OPACUS_ORDERS).step(  # noqa: E731
            noise_multiplier=s, sample_rate=q, num_steps=T).get_epsilon(DELTA)
        d_pld = lambda: PLDAccountant().step(noise_multiplier=s, sample_rate=q,  # noqa: E731
                                             num_steps=T).get_epsilon(DELTA)

        t_drdp, e_drdp = best_time(d_rdp)
        t_drdpo, e_drdpo = best_time(d_rdp_o)
        t_ordp, e_ordp = best_time(o_rdp)
        t_grdp, e_grdp = best_time(g_rdp)
        t_dpld, e_dpld = best_time(d_pld)
        t_gpld, e_gpld = best_time(g_pld, repeats=1)
        t_oprv, e_oprv = best_time(o_prv, repeats=1)
        rows = [
            ("dplib RDP (Opacus orders)", t_drdpo, e_drdpo, None, None),
            ("Opacus RDP", t_ordp, e_ordp, t_ordp / t_drdpo, e_ordp / e_drdpo),
            ("dp-accounting RDP", t_grdp, e_grdp, t_grdp / t_drdpo, e_grdp / e_drdpo),
            ("dplib RDP (default orders)", t_drdp, e_drdp, None, None),
            ("dplib PLD (h≤1e-3)", t_dpld, e_dpld, None, None),
            ("dp-accounting PLD (h=1e-4)", t_gpld, e_gpld, t_gpld / t_dpld, e_gpld / e_dpld),
            ("Opacus PRV (eps_error=0.01)", t_oprv, e_oprv, t_oprv / t_dpld, e_oprv / e_dpld),
        ]
        print(f"{'accountant':30s} {'time [s]':>9s} {'ε':>12s} {'time ratio':>11s} {'ε ratio':>9s}")
        for name, t, e, tr, er in rows:
            extra = "" if tr is None else f" {tr:10.1f}x {er:9.5f}"
            print(f"{name:30s} {t:9.4f} {e:12.6f}{extra}")
        for kind in ("rdp", "pld"):
            target = e_drdp if kind == "rdp" else e_dpld
            t_cal, sig = best_time(lambda: calibrate_noise(target, DELTA, q, T, accountant=kind),
                                   repeats=1)
            print(f"calibrate_noise({kind}) to ε={target:.4f}: σ={sig:.6f} "
                  f"(rel. err {sig / s - 1:+.1e}) in {t_cal:.3f} s")


if __name__ == "__main__":
    main()
