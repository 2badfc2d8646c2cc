"""Shadow models: many small models trained at once, and the attack of Shokri et al. (2017).

A membership-inference adversary who can train models like the target learns what "member" and
"non-member" outputs look like by training *shadow models* on data whose membership it controls
(Shokri, Stronati, Song & Shmatikov 2017, Sec. IV-C and Fig. 1). Every strong attack in this
package needs many of them, so training them must be cheap.

The batched trainer of shadow models is :mod:`dplib.training.batched` (the DP-SGD engine over a
stack of models).

The shadow-model attack
-----------------------
:class:`ShadowModelAttack` follows Shokri et al. (2017, Sec. IV-C/D; as taught in
``YingCPSC680``): for every shadow model i, each example of its training set contributes a row
(y, f_i(x), "in") and each example of its held-out set a row (y, f_i(x), "out") to the attack
training set; one binary classifier per class label y is trained on these rows and then applied
to the target model's outputs. As features we use the log-probability vector log f(x) (a
monotone, lossless transform of the probability vector that does not saturate at 1 in floating
point); the attack classifier is a small neural network (``"mlp"``, as in the paper) or a
logistic regression (``"logistic"``).
"""
from __future__ import annotations

import numpy as np

from .._constraints import Integer, Interval, Options, constrained, unconstrained
from ._params import COUNT, RNG, SEED
from ..training.batched import check_masks

__all__ = ["membership_masks", "ShadowModelAttack"]


# ---------------------------------------------------------------------------------------------
# who is in which model's training set
# ---------------------------------------------------------------------------------------------

@constrained(n_models=COUNT, n_examples=Integer(min=2), rng=RNG,
             fraction=Interval(0.0, 1.0, closed="neither", family="frac_open"),
             design=Options("fixed", "balanced"))
def membership_masks(n_models: int, n_examples: int, *, rng, fraction: float = 0.5,
                     design: str = "fixed") -> np.ndarray:
    """Boolean matrix ``[n_models, n_examples]``: entry (m, i) says example i trains model m.

    * ``design="fixed"``: every model gets a uniformly random subset of exactly
      ``round(fraction · n_examples)`` examples, independently of the other models;
    * ``design="balanced"``: every example is in exactly ``round(fraction · n_models)`` models
      (the design of Carlini et al.'s reference code: argsort of uniform keys per example);
      training-set sizes then vary around ``fraction · n_examples``.
    """
    m, n, frac, gen = n_models, n_examples, fraction, rng
    if design == "fixed":
        k = int(round(frac * n))
        if not 1 <= k < n:
            raise ValueError(f"fraction={frac} gives {k} training examples out of {n}; "
                             "need at least 1 in and 1 out")
        ranks = np.argsort(gen.random((m, n)), axis=1).argsort(axis=1)
        return ranks < k
    k = int(round(frac * m))
    if not 1 <= k < m:
        raise ValueError(f"design='balanced' with fraction={frac} puts every example in {k} of "
                         f"{m} models; need 1 <= {k} < n_models (use more models)")
    ranks = np.argsort(gen.random((m, n)), axis=0).argsort(axis=0)
    return ranks < k




# ---------------------------------------------------------------------------------------------
# the shadow-model attack of Shokri et al. (2017)
# ---------------------------------------------------------------------------------------------

def _log_probs(logits) -> np.ndarray:
    z = logits.detach().cpu().double().numpy() if hasattr(logits, "detach") else \
        np.asarray(logits, dtype=np.float64)
    if z.ndim < 2 or z.shape[-1] < 2:
        raise ValueError(f"logits must have shape [..., C] with C >= 2, got {z.shape}")
    if not np.isfinite(z).all():
        raise ValueError("logits must be finite")
    from scipy.special import log_softmax
    return log_softmax(z, axis=-1)


class ShadowModelAttack:
    """Shokri et al. (2017) membership inference: one attack classifier per class label.

    ``fit(shadow_logits, labels, shadow_masks)`` builds the attack training set from shadow
    models (rows (y, log f_i(x)) labelled in/out by ``shadow_masks``) and trains one binary
    classifier per class; ``score(target_logits, labels)`` returns the classifier's estimated
    probability of "in" for every example (larger means member). ``classifier`` is ``"mlp"``
    (a one-hidden-layer network with ``hidden`` units, scikit-learn's MLPClassifier, as the
    paper's attack models) or ``"logistic"``. Features are standardised per class.
    """

    @constrained(classifier=Options("mlp", "logistic"), hidden=COUNT, max_iter=COUNT, seed=SEED)
    def __init__(self, *, classifier: str = "mlp", hidden: int = 32, max_iter: int = 300,
                 seed: int = 0):
        self.classifier, self.hidden, self.max_iter, self.seed = (classifier, hidden, max_iter,
                                                                  seed)
        self.models_: dict = {}

    def _new(self):
        from sklearn.linear_model import LogisticRegression
        from sklearn.neural_network import MLPClassifier
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        if self.classifier == "mlp":
            clf = MLPClassifier(hidden_layer_sizes=(self.hidden,), max_iter=self.max_iter,
                                early_stopping=True, random_state=self.seed)
        else:
            clf = LogisticRegression(max_iter=self.max_iter)
        return make_pipeline(StandardScaler(), clf)

    @unconstrained("shadow_logits, labels and shadow_masks are one relation ([S, N, C], [N], "
                   "[S, N]), checked together in the body")
    def fit(self, shadow_logits, labels, shadow_masks) -> "ShadowModelAttack":
        """``shadow_logits`` [S, N, C]: S shadow models on N labelled examples; ``labels`` [N];
        ``shadow_masks`` [S, N]: True where the example trained that shadow model."""
        import warnings

        from sklearn.exceptions import ConvergenceWarning
        from threadpoolctl import threadpool_limits
        lp = _log_probs(shadow_logits)
        if lp.ndim != 3:
            raise ValueError(f"shadow_logits must have shape [S, N, C], got {lp.shape}")
        S, N, C = lp.shape
        y = _labels(labels, N, C)
        mk = check_masks(shadow_masks, S, N)
        feats = lp.reshape(S * N, C)
        ylab = np.broadcast_to(y, (S, N)).reshape(-1)
        member = mk.reshape(-1)
        self.num_classes_ = C
        self.models_ = {}
        for k in range(C):
            rows = ylab == k
            if not rows.any():
                continue
            if member[rows].all() or not member[rows].any():
                raise ValueError(f"class {k} has only members or only non-members among the "
                                 "shadow models' rows; use more shadow models")
            clf = self._new()
            # tiny problems: a multi-threaded BLAS only adds overhead (and oversubscribes a
            # shared CPU, 10x slower in our measurements), so fit on one thread
            with warnings.catch_warnings(), threadpool_limits(1):
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf.fit(feats[rows], member[rows])
            self.models_[k] = clf
        return self

    @unconstrained("target_logits and labels are checked in the body against the classes the "
                   "attack was fitted on (a relation with fit's data)")
    def score(self, target_logits, labels) -> np.ndarray:
        """Probability of "member" per example: shape [N] (or [T, N] for [T, N, C] logits)."""
        if not self.models_:
            raise ValueError("call fit(...) before score(...)")
        lp = _log_probs(target_logits)
        if lp.shape[-1] != self.num_classes_:
            raise ValueError(f"target_logits must have {self.num_classes_} classes, got "
                             f"{lp.shape[-1]}")
        lead = lp.shape[:-1]
        y = np.broadcast_to(_labels(labels, lead[-1], self.num_classes_), lead).reshape(-1)
        flat = lp.reshape(-1, lp.shape[-1])
        out = np.full(flat.shape[0], 0.5)
        for k, clf in self.models_.items():
            rows = y == k
            if rows.any():
                out[rows] = clf.predict_proba(flat[rows])[:, 1]
        missing = ~np.isin(y, list(self.models_))
        if missing.any():
            raise ValueError(f"label {int(y[missing][0])} never appeared in the shadow data")
        return out.reshape(lead)


def _labels(labels, n: int, num_classes: int) -> np.ndarray:
    y = np.asarray(labels.cpu() if hasattr(labels, "cpu") else labels)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be {n} integer class indices, got shape {y.shape} "
                         f"and dtype {y.dtype}")
    if y.min() < 0 or y.max() >= num_classes:
        raise ValueError(f"labels must be in [0, {num_classes - 1}], got "
                         f"{int(y[(y < 0) | (y >= num_classes)][0])}")
    return y
