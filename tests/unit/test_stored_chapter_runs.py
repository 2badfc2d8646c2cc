"""The stored runs of chapters 9 and 10 come from their drivers: the drivers reproduce stored
entries, and what the chapters compute from the stored form equals what the raw scores give."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from dplib.attacks import attack_summary, population_epsilon_lower_bound
from dplib.datasets import load_cached_result
from dplib.experiments.membership import (SETTINGS, WIDGET_SHADOWS, load_membership_runs,
                                          score_ranks, setting_key, widget_population)

ROOT = Path(__file__).resolve().parents[2]


def test_ranks_keep_every_roc_quantity():
    rng = np.random.default_rng(7)
    member = rng.random(3000) < 0.5
    scores = rng.normal(size=3000) + 0.3 * member
    scores[:40] = scores[40:80]                       # ties must stay ties
    ranks = score_ranks(scores)
    assert ranks.dtype == np.uint16 and ranks.min() == 0
    assert np.array_equal(np.argsort(scores, kind="stable"), np.argsort(ranks, kind="stable"))
    a, b = attack_summary(scores, member), attack_summary(ranks.astype(float), member)
    assert all(a[k] == pytest.approx(b[k], abs=1e-12) for k in a)
    la = population_epsilon_lower_bound(scores, member, rng=3).epsilon_lower
    lb = population_epsilon_lower_bound(ranks.astype(float), member, rng=3).epsilon_lower
    assert la == pytest.approx(lb, abs=1e-12)


def test_score_ranks_rejects_bad_scores():
    for bad in ([], [np.nan, 1.0], "x", np.arange(70_000.0)):
        with pytest.raises(ValueError, match="scores"):
            score_ranks(bad)


def test_stored_membership_runs_are_consistent():
    runs = load_membership_runs()
    assert runs["provenance"]["command"].startswith("python benchmarks/membership_runs.py")
    n = 1797
    for eps in SETTINGS:
        p, sc, m = runs["pops"][eps], runs["scores"][eps], runs["member"][eps]
        T = p.n_targets
        assert p.masks.shape == (T + runs["setting"]["n_shadows"], n)
        assert np.array_equal(m, p.masks[:T].reshape(-1))
        assert np.all(p.masks[T:].sum(0) == p.n_shadows // 2)      # balanced shadows
        assert set(sc) == set(runs["setting"]["attacks"])
        assert all(s.shape == (T * n,) for s in sc.values())
        assert (eps is None) == math.isinf(p.epsilon)
    # the shadow-count curve with all 32 shadows is the table's LiRA (run_attacks)
    curve = runs["curve"]
    for a in ("lira_online", "lira_online_fixed"):
        r = attack_summary(runs["scores"][None][a], runs["member"][None])
        assert curve.auc[a][-1] == pytest.approx(r["auc"], abs=1e-12)
        assert curve.tpr[a][-1] == pytest.approx(r["tpr@0.001"], abs=1e-12)
    # the losses are the loss attack's scores (-loss), in the same order
    order = np.argsort(runs["scores"][None]["loss"], kind="stable")
    assert np.all(np.diff(-runs["loss"][order]) >= 0)
    assert setting_key(None) == "none" and setting_key(8.0) == "8"


def test_widget_driver_reproduces_a_stored_population():
    """Retrain one of the explore widget's stored populations (20 models, 200 records)."""
    stored = load_membership_runs()["widget"][100, "∞"]
    p, sc, mb = widget_population(100, "∞")
    assert p.n_shadows == WIDGET_SHADOWS and np.array_equal(mb, stored[1])
    assert p.test_accuracy.mean() == pytest.approx(stored[2], abs=0.01)
    for a, ranks in stored[0].items():
        live, kept = attack_summary(sc[a], mb)["auc"], attack_summary(ranks, mb)["auc"]
        assert live == pytest.approx(kept, abs=0.01), a


def test_icl_summaries_driver_reproduces_stored_runs():
    spec = importlib.util.spec_from_file_location("icl_summaries",
                                                  ROOT / "benchmarks" / "icl_summaries.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from dplib.experiments.icl import summarise_products
    from dplib.icl import OfflineICL, load_book_data
    from dplib.icl.data import PRODUCTS
    stored = load_cached_result("icl_summaries")
    model, sentiment = OfflineICL(), load_book_data("sentiment")
    for method, eps, seed in (("ksa_em", 8.0, 1), ("per_token", math.inf, 0)):
        r = summarise_products(model, sentiment, method=method, epsilon=eps,
                               products=PRODUCTS, rng=seed, **mod.SETTING)
        s = stored["runs"][mod.run_key(method, eps, seed)]
        assert np.allclose(r["f1"], s["f1"], atol=1e-9) and r["noise"] == pytest.approx(s["noise"])
