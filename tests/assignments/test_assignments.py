"""The autograded assignments: generated with Otter Assign, graded with Otter (no Docker).

For every master notebook in ``assignments/`` (so a new assignment is covered by adding it):

* the autograder gives full marks to the solutions and zero to the untouched student notebook;
* plausible wrong answers (below, one per question) lose points on every question, so each
  question's hidden tests can fail;
* the student version carries neither the solutions nor the hidden tests;
* ``make assignments``, the README's command, writes that layout (run in a copy of the
  repository, so its relative output folder is taken as an instructor's shell gives it);
* the autograder zip's environment installs every package the notebook imports;
* the setup cell installs what Colab needs, and its Colab branch unpacks the public tests, also
  when it ran once before they were uploaded, and never a tests.zip that is not the one made
  with the notebook.

Grading runs the notebooks in a kernel, a few seconds each; the runs are done once per session,
two at a time (``grades`` below), each kernel with one BLAS/OpenMP thread as ``make test`` gives
the other tests (torch's default threads oversubscribe two cores). Otter Assign's own grading of
the solutions (``run_tests`` in each master) is skipped in ``make assignments`` here: it runs the
same autograder zip on the same solution notebook as ``test_solution_gets_full_marks``, which
checks more (every question's points).
"""
from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import types
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import nbformat
import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from assignments import (environment_requirements, generate, grade_many,  # noqa: E402
                         master_notebooks, read_generated)
from sync_notebooks import OTTER_LINE, REF_LINE, REPO_LINE, repository_url  # noqa: E402

MASTERS = master_notebooks()
NAMES = [m.stem for m in MASTERS]

# One plausible mistake per question: (name the mistake redefines, code of the mistake).
# The code is inserted right after the solution cell that defines the name, so the check cell
# that follows sees the wrong answer.
MISTAKES: dict[str, dict[str, tuple[str, str]]] = {
    "a1_randomized_response": {
        "q1": ("q1_answer", 'q1_answer = "a"'),
        # forgot that tails can also produce the truth
        "q2": ("q2_eps", "q2_p = 0.6\nq2_eps = float(np.log(0.6 / 0.4))"),
        # the naive estimator: the fraction of "yes" reports
        "q3": ("rr_estimator", "def rr_estimator(reports, epsilon):\n"
                               "    return float(np.mean(reports))"),
        # sampling term only
        "q4": ("q4_n", "q4_n = int(np.ceil(0.3 * 0.7 / 0.02 ** 2))"),
        # scale inverted
        "q5": ("laplace_release", "def laplace_release(value, epsilon, sensitivity, rng):\n"
                                  "    value = np.asarray(value, dtype=float)\n"
                                  "    return value + rng.laplace(0.0, epsilon / sensitivity,"
                                  " size=value.shape)"),
        # range 5 instead of 2 * 5 (add/remove thinking under replace-one)
        "q6": ("q6_scale", "q6_sensitivity = 5 / 500\nq6_scale = q6_sensitivity / 0.5"),
        "q7": ("q7_saving", "q7_classic = float(np.sqrt(2 * np.log(1 / 1e-5)) / 0.5)\n"
                            "q7_analytic = q7_classic\nq7_saving = 0.0"),
        "q8": ("q8_answer", 'q8_answer = "a"'),
        "q9": ("q9_answer", 'q9_answer = "d"'),
    },
    "a2_accounting": {
        "q1": ("q1_delta", "q1_eps = 0.5\nq1_delta = 1e-6"),
        # the KOV drift term in place of the DRV one
        "q2": ("advanced_epsilon", "def advanced_epsilon(epsilon, k, delta_slack):\n"
                                   "    return float(epsilon * np.sqrt(2 * k * np.log(1 / "
                                   "delta_slack)) + k * epsilon * np.tanh(epsilon / 2))"),
        "q3": ("q3_better", "q3_basic = 10.0\nq3_advanced = 100.0\nq3_better = 'basic'"),
        # forgot the factor k
        "q4": ("gaussian_rdp_epsilon", "def gaussian_rdp_epsilon(sigma, k, delta, orders):\n"
                                       "    orders = np.asarray(orders, dtype=float)\n"
                                       "    return float(np.min(orders / (2 * sigma ** 2) + "
                                       "np.log(1 / delta) / (orders - 1)))"),
        # no amplification: q * eps
        "q5": ("q5_adjacency", "q5_eps = 0.01 * 1.0\nq5_adjacency = 'replace-one'"),
        # accountants swapped
        "q6": ("q6_pld", "q6_rdp, q6_pld = q6_pld, q6_rdp"),
        # twice the noise needed
        "q7": ("q7_sigma", "q7_sigma = 2 * q7_sigma"),
        "q8": ("q8_answer", 'q8_answer = "c"'),
    },
    "a3_dpsgd": {
        "q1": ("q1_answer", 'q1_answer = "a"'),
        # one clipping factor for the whole batch instead of one per example
        "q2": ("clip_gradients", "def clip_gradients(grads, max_norm):\n"
                                 "    norm = torch.linalg.vector_norm(grads)\n"
                                 "    return grads * torch.clamp(max_norm / norm, max=1.0)"),
        # divides by the realised batch size
        "q3": ("privatize", "def privatize(clipped, noise_multiplier, max_norm,"
                            " expected_batch_size, generator):\n"
                            "    noise = torch.randn(clipped.shape[1], generator=generator)\n"
                            "    return (clipped.sum(dim=0) + noise_multiplier * max_norm * noise)"
                            " / clipped.shape[0]"),
        # the PLD accountant where RDP was asked
        "q4": ("q4_eps", "q4_eps = dplib.accounting.PLDAccountant().step(noise_multiplier=1.0, "
                         "sample_rate=q, num_steps=300).get_epsilon(1e-5)"),
        # calibrated with RDP: more noise than the PLD accountant needs
        "q5": ("q5_sigma", "q5_sigma = dplib.accounting.calibrate_noise(2.0, 1e-5, q, 300)"),
        # trained without privacy
        "q6": ("q6_accuracy", "q6_result = train(make_logistic_regression(64, 10), "
                              "(X_train, y_train), sample_rate=q, steps=300, lr=0.5, "
                              "noise_multiplier=0.0, max_grad_norm=float('inf'), seed=0)\n"
                              "q6_accuracy = evaluate(q6_result.model, X_test, y_test)"),
        "q7": ("q7_answer", 'q7_answer = "c"'),
        "q8": ("q8_answer", 'q8_answer = "a"'),
    },
    "a4_membership_inference": {
        # the loss itself: larger would mean *less* likely a member
        "q1": ("loss_attack_scores", "def loss_attack_scores(logits, labels):\n"
                                     "    from scipy.special import logsumexp\n"
                                     "    z = np.asarray(logits, dtype=float)\n"
                                     "    true = np.take_along_axis(z, np.asarray(labels)[:, None],"
                                     " axis=1)[:, 0]\n"
                                     "    return logsumexp(z, axis=1) - true"),
        # ties count as losses
        "q2": ("auc", "def auc(scores, labels):\n"
                      "    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)\n"
                      "    return float(np.mean(scores[labels][:, None] > scores[~labels]))"),
        # threshold at a quantile of the non-member scores
        "q3": ("tpr_at_fpr", "def tpr_at_fpr(scores, labels, fpr):\n"
                             "    scores, labels = np.asarray(scores, float), "
                             "np.asarray(labels, bool)\n"
                             "    t = np.quantile(scores[~labels], 1 - fpr)\n"
                             "    return float(np.mean(scores[labels] >= t))"),
        "q4": ("q4_answer", 'q4_answer = "a"'),
        "q5": ("q5_leakier", "q5_auc_plain, q5_auc_private = q5_auc_private, q5_auc_plain\n"
                             "q5_leakier = 'private' if q5_leakier == 'plain' else 'plain'"),
        # e^eps forgotten
        "q6": ("q6_claim", "q6_tpr_bound = 0.01 + 1e-5\nq6_claim = 'consistent'"),
        # fitted to all shadow scores, IN and OUT together
        "q7": ("lira_offline_scores", "def lira_offline_scores(target_scores, shadow_scores,"
                                      " shadow_in):\n"
                                      "    from scipy import stats\n"
                                      "    s = np.asarray(shadow_scores, dtype=float)\n"
                                      "    return -stats.norm.logsf(target_scores, s.mean(0),"
                                      " s.std(0, ddof=1))"),
        # members and non-members swapped
        "q8": ("q8_tpr_lira", "q8_auc_global = auc(target_scores, ~target_in)\n"
                              "q8_auc_lira = auc(q8_lira, ~target_in)\n"
                              "q8_tpr_lira = tpr_at_fpr(q8_lira, ~target_in, 0.01)"),
        "q9": ("q9_answer", 'q9_answer = "d"'),
    },
    "a5_langevin": {
        # the radius of the ball instead of its diameter: one record swings from x to x'
        "q1": ("q1_shift", "q1_sensitivity = 3.0\nq1_shift = 0.02 * 3.0 / 5000"),
        # the step's shift taken as S_g / n, forgetting the step size η
        "q2": ("composition_bound", "def composition_bound(alpha, sensitivity, sigma, eta, n, K):\n"
                                    "    shift = sensitivity / n\n"
                                    "    return np.asarray(K) * alpha * shift ** 2 / "
                                    "(2 * 2 * eta * sigma ** 2)"),
        # where composition passes the limit, not where the two bounds cross
        "q3": ("q3_crossover", "q3_crossover = int(round(q3_limit / q3_per_step))"),
        # the noise variances added up, without the contraction (1 − η)² of earlier noise
        "q4": ("exact_renyi", "def exact_renyi(alpha, sensitivity, sigma, eta, n, K):\n"
                              "    K = np.asarray(K, dtype=float)\n"
                              "    gap = (1 - (1 - eta) ** K) * sensitivity / n\n"
                              "    return alpha * gap ** 2 / (2 * 2 * eta * sigma ** 2 * K)"),
        # noise of standard deviation √η σ: the 2 of the Langevin diffusion forgotten
        "q5": ("noisy_gd_step", "def noisy_gd_step(theta, grad_sum, n, eta, sigma, radius, z):\n"
                                "    v = theta - eta / n * grad_sum + math.sqrt(eta) * sigma * z\n"
                                "    return v * min(1.0, radius / torch.linalg.vector_norm(v)"
                                ".item())"),
        # the default analysis (dynamics) for both
        "q6": ("q6_ratio", "q6_sigma_composition = calibrate_sigma(1.0, 1e-5, 2.0, 0.1, LAM, "
                           "1000, 500)\nq6_ratio = q6_sigma_composition / q6_sigma_dynamics"),
        "q7": ("q7_answer", 'q7_answer = "a"'),
        "q8": ("q8_answer", 'q8_answer = "a"'),
        # the theorem's γ = ½ taken as optimal
        "q9": ("q9_saving", "q9_gamma = 0.5\nq9_eps = privacy_dynamics_rdp(lam=LAM, K=100, "
                            "**SETTING)\nq9_saving = 0.0"),
    },
    "a6_sgld": {
        # the contraction rate λη instead of λη/2 in the exponent
        "q1": ("q1_eps", "q1_eps = q1_limit * -math.expm1(-LAM * ETA * 100)"),
        # sensitivity L instead of 2L: the factor 4 lost
        "q2": ("theorem_rdp", "def theorem_rdp(alpha, lipschitz, sigma, lam, n, step_sizes):\n"
                              "    total = float(np.sum(step_sizes))\n"
                              "    return float(alpha * lipschitz ** 2 / (lam * n ** 2 * sigma ** 2)"
                              " * -np.expm1(-lam * total / 2))"),
        # the sum as printed, over η_1, ..., η_K: smaller than the corollary
        "q3": ("q3_larger", "q3_taken = sgld_rdp(ALPHA, L, SIGMA, LAM, N, "
                            "decreasing_step_sizes(BETA, LAM, 1001)[1:])\n"
                            "q3_larger = 'corollary'"),
        # the factor 2 of the rate λη/2 forgotten
        "q4": ("q4_steps", "q4_steps = math.ceil(math.log(10) / (LAM * ETA))"),
        # the penalty's λr left out of the Lipschitz constant
        "q5": ("q5_lipschitz", "q5_lipschitz = math.sqrt(2)"),
        # the noise multiplier of the replace-one formula (std / 2L) passed to an accountant that
        # halves it again
        "q6": ("released_epsilon", "def released_epsilon(delta, lipschitz, sigma, n, batch_size, "
                                   "eta, K):\n"
                                   "    z = sigma * batch_size / (lipschitz * math.sqrt(2 * eta))\n"
                                   "    acc = RDPAccountant(sampling='without_replacement', "
                                   "neighboring='replace_one')\n"
                                   "    acc.step(noise_multiplier=z, sample_rate=batch_size / n, "
                                   "num_steps=K)\n"
                                   "    return float(acc.get_epsilon(delta))"),
        # full batches checked, and any positive δ taken as a refutation
        "q7": ("q7_largest_refuted", "q7_delta = one_step_delta_lower_bound(1.0, batch_size=500, "
                                     "**problem)\n"
                                     "q7_largest_refuted = max(m for m in (1, 2, 5, 10, 20, 50, "
                                     "100, 200, 500) if one_step_delta_lower_bound(1.0, "
                                     "batch_size=m, **problem) > 0)"),
        "q8": ("q8_answer", 'q8_answer = "d"'),
        "q9": ("q9_answer", 'q9_answer = "a"'),
    },
    "a7_encoding": {
        # the argmin of the paper's printed Algorithm 2, line 3
        "q1": ("q1_encoded", "q1_index = 0\nq1_encoded = [0.0, -0.7, 0.0, 0.6]"),
        # thresholds in parameter order instead of by rank
        "q2": ("encode_gradient", "def encode_gradient(grad, codes):\n"
                                  "    mag, order = torch.sort(grad.abs())\n"
                                  "    sim = (codes @ mag) / codes.norm(dim=1)\n"
                                  "    psi = codes[torch.argmax(sim)]\n"
                                  "    thr = psi.to(grad.dtype)\n"
                                  "    return torch.maximum(torch.minimum(grad, thr), -thr)"),
        # the binomial coefficients left out, as in the paper's equations 20-22
        "q3": ("q3_eps", "q3_eps = math.log(sum(0.1 ** k * 0.9 ** (3 - k) * laplace_moment(0.6, k)"
                         " * laplace_moment(0.8, k) for k in range(4))) / 2"),
        # the paper's printed prefactor 1/(1 - alpha)
        "q4": ("lemma4", "def lemma4(alpha, q, psi, noise):\n"
                         "    ks = np.arange(alpha + 1)\n"
                         "    lp = log_moments(noise, np.abs(np.asarray(psi, dtype=float)), ks)"
                         ".sum(axis=0)\n"
                         "    lw = np.array([math.log(math.comb(alpha, k)) + k * math.log(q) + "
                         "(alpha - k) * math.log1p(-q) for k in ks])\n"
                         "    return float(special.logsumexp(lw + lp) / (1 - alpha))"),
        # the code vectors' norm forgotten: sigma = noise std
        "q5": ("q5_eps", "q5_sigma = 3.0\nq5_eps = RDPAccountant(orders=INTEGER_ORDERS).step("
                         "noise_multiplier=3.0, sample_rate=0.05, num_steps=400)"
                         ".get_epsilon(1e-5)"),
        # the variance ratio, not the standard-deviation ratio
        "q6": ("q6_ratio", "q6_ratio = 5 * 6 / ((5 - 2) * (5 + 3))"),
        "q7": ("q7_answer", 'q7_answer = "a"'),
        "q8": ("q8_answer", 'q8_answer = "a"'),
        # accounted as micro-batches of one: sensitivity 1
        "q9": ("q9_eps", "q9_eps = RDPAccountant(orders=INTEGER_ORDERS).step(noise_multiplier=2.0,"
                         " sample_rate=0.05, num_steps=300).get_epsilon(1e-5)"),
    },
    "a8_dp_icl": {
        # reuse forgotten: one exemplar, one vote
        "q1": ("q1_sensitivity", "q1_sensitivity = math.sqrt(2)"),
        # counted along the wrong axis: per subset over the queries
        "q2": ("vote_counts", "def vote_counts(votes, num_classes):\n"
                              "    votes = np.asarray(votes)\n"
                              "    return np.stack([np.bincount(col, minlength=num_classes)"
                              " for col in votes.T])"),
        # the sensitivity sqrt(2) forgotten: s = sigma
        "q3": ("vote_noise", "def vote_noise(epsilon, delta, num_queries, sample_rate):\n"
                             "    return calibrate_noise(epsilon, delta, sample_rate,"
                             " num_queries)"),
        # the difference of two noisy projections taken to have variance s^2
        "q4": ("q4_ceiling", "q4_ceiling = stats.norm.cdf(math.sqrt(2) / s4)"),
        # no amplification by subsampling: rate 1
        "q5": ("q5_queries", "q5_queries = max(q for q in range(1, 50) if "
                             "gaussian_epsilon_spent(4.0, 1e-5, q, 1.0) <= 2.0)"),
        # the noiseless ensemble
        "q6": ("q6_accuracy", "q6_result = dp_icl_classify(model, tpl, sentiment.pool_texts, "
                              "sentiment.pool_labels, queries, epsilon=math.inf, delta=1e-5, "
                              "num_subsets=20, shots=4, rng=0)\n"
                              "q6_accuracy = float(np.mean(q6_result.predictions == truth))"),
        "q7": ("q7_answer", 'q7_answer = "d"'),
        "q8": ("q8_answer", 'q8_answer = "a"'),
        # monotone thinking: one changed answer lowers the gap by 1
        "q9": ("q9_probability", "q9_distance = 60 - 1\n"
                                 "t9 = math.log(1 / 1e-6) / 0.5 - q9_distance\n"
                                 "q9_probability = 1 - 0.5 * math.exp(0.5 * t9)"),
    },
    "capstone_private_digits": {
        # trained without privacy
        "q1": ("test_accuracy", "final = train(make_logistic_regression(64, 10), "
                                "(X_train, y_train), sample_rate=64 / n, steps=300, lr=0.5, "
                                "noise_multiplier=0.0, max_grad_norm=float('inf'), seed=0)\n"
                                "test_accuracy = evaluate(final.model, X_test, y_test)"),
        # names the PLD accountant while its epsilon came from RDP
        "q2": ("report", 'report["accountant"] = "pld"'),
        # forgets the data-set size and the writers
        "q3": ("q3_not_covered", 'q3_not_covered = "abd"'),
        # reads the statement's numbers but not its warning about the fixed seed
        "q3b": ("q3b_release", "q3b_release = True"),
        # audits the non-private recipe
        "q4": ("audit", "audit = canary_audit(audit_x, audit_y, canary_x, canary_y, runs=16, "
                        "model_fn=lambda seed: make_logistic_regression(64, 10), epsilon=None, "
                        "seed=0, **run)"),
        "q5": ("q5_answer", 'q5_answer = "a"'),
    },
}


def _defines(cell, name: str) -> bool:
    if cell.cell_type != "code":
        return False
    try:
        tree = ast.parse(cell.source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                if any(isinstance(t, ast.Name) and t.id == name for t in names):
                    return True
    return False


def with_mistakes(solution: Path, mistakes: dict[str, tuple[str, str]], dest: Path) -> Path:
    """A copy of the solution notebook with each question's mistake inserted."""
    nb = nbformat.read(solution, as_version=4)
    for question, (anchor, code) in mistakes.items():
        idx = max((i for i, c in enumerate(nb.cells) if _defines(c, anchor)), default=None)
        assert idx is not None, f"{solution.name} {question}: nothing defines {anchor}"
        nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(code))
    nbformat.write(nb, dest)
    return dest


def _question_points(master: Path) -> dict[str, float]:
    nb = nbformat.read(master, as_version=4)
    points = {}
    for cell in nb.cells:
        if cell.cell_type == "raw" and cell.source.startswith("# BEGIN QUESTION"):
            name = re.search(r"^name:\s*(\S+)", cell.source, re.M).group(1)
            points[name] = float(re.search(r"^points:\s*(\S+)", cell.source, re.M).group(1))
    return points


# What `make assignments` needs of the repository: the Makefile, the tool, the masters, and the
# files its setup step depends on (so that make sees the environment as set up).
MAKE_INPUTS = ["Makefile", "tools", "assignments", "requirements.txt", "requirements-dev.txt",
               "pyproject.toml"]


def _copy_for_make(dest: Path) -> Path:
    """A copy of what ``make assignments`` reads, with this interpreter's environment as .venv.

    ``.venv`` is a folder of links to the running environment plus a fresh setup stamp, so make
    runs the target itself instead of setting the environment up again.
    """
    dest.mkdir()
    for name in MAKE_INPUTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns(
                "__pycache__", "_build", ".ipynb_checkpoints"))
        else:
            shutil.copy2(src, dest / name)
    venv = dest / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry)
    (venv / ".installed").touch()
    return dest


@pytest.fixture(scope="session")
def made(tmp_path_factory) -> Path:
    """The repository copy in which `make assignments` ran, as the README gives it."""
    repo = _copy_for_make(tmp_path_factory.mktemp("make") / "repo")
    before = sorted(p.relative_to(repo) for p in (repo / "assignments").rglob("*"))
    # Otter Assign's run of the solutions is test_solution_gets_full_marks' grading (see above).
    proc = subprocess.run(["make", "assignments"], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "DPBOOK_ASSIGN_NO_RUN_TESTS": "1"})
    assert proc.returncode == 0, f"make assignments failed:\n{proc.stdout}\n{proc.stderr}"
    after = sorted(p.relative_to(repo) for p in (repo / "assignments").rglob("*"))
    assert after == before, "make assignments wrote into assignments/"
    return repo


@pytest.fixture(scope="session")
def generated(made):
    """Every assignment as `make assignments` wrote it into _build/assignments."""
    return {name: read_generated(made / "_build" / "assignments" / name, name) for name in NAMES}


@pytest.fixture(scope="session")
def grades(generated, tmp_path_factory):
    """Every grading run of the session, two at a time: (name, kind) -> Grade.

    The full runs (solutions, mistakes) go first, the longest first, so that neither of the two
    workers is left with a long run at the end."""
    tmp = tmp_path_factory.mktemp("wrong")
    jobs = {}
    for name, g in generated.items():
        jobs[(name, "solution")] = g.solution
        jobs[(name, "student")] = g.student
        if name in MISTAKES:
            jobs[(name, "wrong")] = with_mistakes(g.solution, MISTAKES[name],
                                                  tmp / f"{name}.ipynb")
    order = sorted(jobs, key=lambda key: (key[1] == "student", -_cost(key[0])))
    env = {var: os.environ.get(var) for var in THREAD_VARS}
    for var in THREAD_VARS:                                 # inherited by the kernels
        os.environ.setdefault(var, "1")
    try:
        return grade_many({key: (generated[key[0]].autograder, jobs[key]) for key in order},
                          workers=2)
    finally:
        for var, value in env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _cost(name: str) -> int:
    """How long a notebook's run is, roughly: the lines of code it runs (its tests included)."""
    nb = nbformat.read(ROOT / "assignments" / f"{name}.ipynb", as_version=4)
    return sum(len(c.source.splitlines()) for c in nb.cells if c.cell_type == "code")


def test_make_assignments_writes_every_assignment(made, generated):
    """The README's command: each assignment's student and autograder files, in _build."""
    out = made / "_build" / "assignments"
    assert sorted(p.name for p in out.iterdir()) == sorted(NAMES)
    for name, g in generated.items():
        assert g.student.parent == out / name / "student"
        assert g.autograder.parent == out / name / "autograder"
        with zipfile.ZipFile(g.tests_zip) as zf:
            assert sorted(zf.namelist()) == sorted(
                f"tests/{p.name}" for p in (g.student.parent / "tests").glob("*.py"))
        assert f'TESTS_SHA256 = "{g.tests_sha256}"' in _setup_source(g.student), \
            "the student notebook must carry its tests.zip's SHA-256"


def test_there_are_assignments():
    assert {"a1_randomized_response", "a2_accounting", "a3_dpsgd",
            "a4_membership_inference"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_solution_gets_full_marks(grades, name):
    g = grades[(name, "solution")]
    assert g.per_question.keys() == _question_points(ROOT / "assignments" / f"{name}.ipynb").keys()
    assert g.possible > 0 and g.score == g.possible, g.report()


@pytest.mark.parametrize("name", NAMES)
def test_untouched_student_notebook_gets_zero(grades, name):
    g = grades[(name, "student")]
    assert g.possible == grades[(name, "solution")].possible
    assert g.score == 0, g.report()


@pytest.mark.parametrize("name", NAMES)
def test_every_question_rejects_a_plausible_mistake(grades, name):
    assert name in MISTAKES, f"add one plausible mistake per question of {name} to MISTAKES"
    g = grades[(name, "wrong")]
    assert set(MISTAKES[name]) == set(g.per_question), "one mistake per question"
    kept = {q: s for q, (s, p) in g.per_question.items() if s >= p}
    assert not kept, f"questions whose hidden tests accept a wrong answer: {kept}\n{g.report()}"


@pytest.mark.parametrize("name", NAMES)
def test_student_version_hides_solutions_and_hidden_tests(generated, name):
    g = generated[name]
    student = nbformat.read(g.student, as_version=4)
    code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    assert "# SOLUTION" not in code and "BEGIN SOLUTION" not in code
    master = nbformat.read(ROOT / "assignments" / f"{name}.ipynb", as_version=4)
    for cell in master.cells:
        for line in cell.source.splitlines():
            if cell.cell_type == "code" and line.rstrip().endswith("# SOLUTION"):
                statement = line.replace("# SOLUTION", "").strip()
                assert statement not in code, f"solution {statement!r} left for the student"
    public = "\n".join(p.read_text() for p in (g.student.parent / "tests").glob("*.py"))
    assert "hidden=True" not in public
    assert "hidden=True" in "\n".join(
        p.read_text() for p in (g.solution.parent / "tests").glob("*.py"))
    # every question has hidden tests, and the kinds of question the book promises are there
    text = "\n".join(c.source for c in master.cells if c.cell_type == "markdown")
    for kind in ("(conceptual)", "(numerical)", "(coding)"):
        assert kind in text, f"{name} has no {kind} question"


@pytest.mark.parametrize("name", NAMES)
def test_setup_cell_installs_from_configured_repository(name):
    nb = nbformat.read(ROOT / "assignments" / f"{name}.ipynb", as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert REPO_LINE.search(setup.source).group(0) == f'BOOK_REPO = "{repository_url()}"', \
        "run `make sync`"
    assert '"google.colab" in sys.modules' in setup.source
    assert OTTER_LINE.search(setup.source) and 'TESTS_URL = ""' in setup.source
    assert 'TESTS_SHA256 = ""' in setup.source
    assert f'NOTEBOOK = "{name}.ipynb"' in setup.source
    ref = REF_LINE.search(setup.source).group(0).split('"')[1]
    req = (ROOT / "assignments" / "requirements.txt").read_text().split()
    assert f"git+{repository_url()}@{ref}" in req, \
        "the autograder image installs dplib at the notebooks' commit: make sync"


def _imports(notebook: Path) -> set[str]:
    """The top-level package of every import in the notebook's code (tests included)."""
    modules = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


def _distribution(requirement: str) -> str:
    """The distribution a pip requirement line installs (this repository's ``git+`` is dplib)."""
    if requirement.startswith("git+"):
        url = requirement[len("git+"):].split("@")[0]
        assert url == repository_url(), f"{requirement}: not the book's repository"
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
        return canonicalize_name(project)
    return canonicalize_name(Requirement(requirement).name)


@functools.cache
def _providers() -> dict[str, list[str]]:
    """Module -> the installed distributions that provide it (read once: it scans them all)."""
    return packages_distributions()


@pytest.mark.parametrize("name", NAMES)
def test_autograder_environment_installs_every_import(generated, name):
    """Each import of the notebook is installed by the autograder zip's environment itself,
    not through another package's dependencies (torch, for one, is no dependency of dplib)."""
    installed = {_distribution(r) for r in environment_requirements(generated[name].autograder)}
    providers = _providers()
    missing = {}
    for module in sorted(_imports(ROOT / "assignments" / f"{name}.ipynb")):
        if module in sys.stdlib_module_names:
            continue
        dists = {canonicalize_name(d) for d in providers.get(module, [module])}
        if not dists & installed:
            missing[module] = sorted(dists)
    assert not missing, (f"{name} imports what its autograder does not install: {missing}; "
                         "add them to assignments/requirements.txt")


def _requirement_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.strip().startswith(("#", "-"))]


def test_autograder_requirements_use_the_books_bounds():
    """Every package is bounded below, as the book's own requirements.txt bounds it."""
    book = {canonicalize_name(r.name): r.specifier
            for r in map(Requirement, _requirement_lines(ROOT / "requirements.txt"))}
    lines = _requirement_lines(ROOT / "assignments" / "requirements.txt")
    assert any(line.startswith("git+") for line in lines)
    for line in lines:
        if line.startswith("git+"):
            continue
        req = Requirement(line)
        assert any(s.operator in (">=", "==") for s in req.specifier), \
            f"{line}: pin it or give it a lower bound"
        name = canonicalize_name(req.name)
        if name in book:
            assert req.specifier == book[name], \
                f"{line}: the book's requirements.txt says {req.name}{book[name]}"


def _setup_source(notebook: Path) -> str:
    return next(c for c in nbformat.read(notebook, as_version=4).cells
                if c.cell_type == "code").source


class _ColabShell:
    """What ``get_ipython()`` returns in Colab, as far as Otter looks (its repr)."""

    def __str__(self) -> str:
        return "<google.colab._shell.Shell object>"


def _as_colab(monkeypatch, work: Path) -> list:
    """Run the next setup cells as in Colab, in ``work``: ``google.colab`` importable, Otter
    seeing Colab's shell, pip stubbed out (its calls are returned)."""
    import otter.check.utils

    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr(otter.check.utils, "get_ipython", _ColabShell)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    return calls


def _run(code: str, namespace: dict, name: str = "cell"):
    exec(compile(code, name, "exec"), namespace)


def _tests_in(folder: Path) -> dict[str, bytes]:
    return {f"tests/{p.name}": p.read_bytes() for p in sorted((folder / "tests").glob("*.py"))}


def _zip_tests(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if n.endswith(".py")}


def test_colab_setup_run_before_the_upload_unpacks_it_when_run_again(generated, tmp_path,
                                                                     monkeypatch, capsys):
    """Run the cell, upload tests.zip, run the cell again: the tests are there and
    ``grader.check`` passes the solutions (the order a student meets in Colab)."""
    g = generated[NAMES[0]]
    setup = _setup_source(g.student)
    work = tmp_path / "colab"
    calls = _as_colab(monkeypatch, work)
    namespace: dict = {}
    _run(setup, namespace, "setup")
    assert "upload tests.zip" in capsys.readouterr().out
    assert not _tests_in(work)
    with pytest.raises(FileNotFoundError):      # no test yet: check says so
        _run('grader.check("q1")', namespace)

    shutil.copy(g.tests_zip, work / "tests.zip")     # the student uploads it
    _run(setup, namespace, "setup")
    assert len(calls) == 2
    assert _tests_in(work) == _zip_tests(g.tests_zip) and _tests_in(work)

    # the solutions, cell by cell after the setup cell, then every public check
    solution = [c.source for c in nbformat.read(g.solution, as_version=4).cells
                if c.cell_type == "code"][1:]
    for i, code in enumerate(solution):
        if "grader." not in code:
            _run(code, namespace, f"solution cell {i}")
    for test in sorted((work / "tests").glob("*.py")):
        _run(f"result = grader.check({test.stem!r})", namespace)
        assert namespace["result"].passed_all, f"{test.stem}: {namespace['result']}"


def test_colab_setup_refuses_a_tampered_tests_zip(generated, tmp_path, monkeypatch):
    """A tests.zip that is not the generated one is not unpacked, before or after a first run."""
    g = generated[NAMES[0]]
    setup = _setup_source(g.student)
    work = tmp_path / "colab"
    _as_colab(monkeypatch, work)
    namespace: dict = {}
    _run(setup, namespace, "setup")              # before the upload
    tests = _zip_tests(g.tests_zip)
    first = sorted(tests)[0]
    with zipfile.ZipFile(work / "tests.zip", "w") as zf:   # one test made to pass anything
        for name, data in tests.items():
            zf.writestr(name, data + b"\n# edited\n" if name == first else data)
    with pytest.raises(RuntimeError, match="SHA-256"):
        _run(setup, namespace, "setup")
    assert not _tests_in(work)


def test_colab_branch_unpacks_public_tests(tmp_path, monkeypatch):
    """Run the first cell as Colab would (pip stubbed out), fetching tests.zip from TESTS_URL."""
    name = NAMES[0]
    g = generate(ROOT / "assignments" / f"{name}.ipynb", tmp_path / "out",
                 url=(tmp_path / "published").as_uri(), run_tests=False)
    published = tmp_path / "published" / name
    published.mkdir(parents=True)
    (published / "tests.zip").write_bytes((g.student.parent / "tests.zip").read_bytes())
    setup = next(c for c in nbformat.read(g.student, as_version=4).cells
                 if c.cell_type == "code")
    assert f'TESTS_URL = "{published.as_uri()}/tests.zip"' in setup.source

    work = tmp_path / "colab"
    calls = _as_colab(monkeypatch, work)
    namespace: dict = {}
    _run(setup.source, namespace, "setup")
    assert calls and any(part.startswith(f"git+{repository_url()}@") for part in calls[0])
    assert any(part.startswith("otter-grader==") for part in calls[0])
    with zipfile.ZipFile(g.student.parent / "tests.zip") as zf:
        expected = sorted(n for n in zf.namelist() if n.endswith(".py"))
    assert sorted(f"tests/{p.name}" for p in (work / "tests").glob("*.py")) == expected
    assert namespace["grader"] is not None
