"""dplib.training.recipes: augmentation multiplicity, parameter averaging, public PCA features.

Oracles: per-copy gradients by a plain autograd loop (float64), the EMA recursion written out by
hand, and the sample covariance of the public data.
"""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dplib.training import (clipped_grad_sum, ghost_clipped_grad_sum, make_cnn,
                            make_logistic_regression, make_mlp, per_example_grads, train)
from dplib.training.recipes import (AugMult, ExponentialAverage, PublicKernelFeatures,
                                    PublicPCA, augmult_cross_entropy, shift_copies)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def images(b=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, 64, generator=g, dtype=torch.float64), \
        torch.randint(0, 10, (b,), generator=g)


def test_shift_copies_identity_shifts_and_fill():
    x, _ = images(3)
    c = shift_copies(x, (8, 8), 5, fill=-7.0)
    assert c.shape == (3, 5, 64)
    assert torch.equal(c[:, 0], x)
    img, down = x.reshape(3, 8, 8), c[:, 1].reshape(3, 8, 8)
    assert torch.equal(down[:, 1:, :], img[:, :-1, :])        # shifted by one row
    assert bool((down[:, 0, :] == -7.0).all())                  # the row shifted in is filled
    for k in range(1, 5):                                       # each shift loses one line
        assert int((c[:, k] == -7.0).sum()) >= 3 * 8
    assert shift_copies(x, (8, 8), 9).shape == (3, 9, 64)


def test_shift_copies_never_mixes_examples():
    x, _ = images(4)
    x2 = x.clone()
    x2[1:] = torch.randn(3, 64, dtype=torch.float64)
    assert torch.equal(shift_copies(x, (8, 8))[0], shift_copies(x2, (8, 8))[0])


@pytest.mark.parametrize("kw", [dict(image_shape=(8,)), dict(image_shape=(8, 1)),
                                dict(copies=4), dict(copies=0), dict(fill=math.nan)])
def test_shift_copies_refuses_bad_input(kw):
    args = dict(image_shape=(8, 8), copies=5, fill=0.0) | kw
    with pytest.raises(ValueError, match=next(iter(kw))):
        shift_copies(images(2)[0], **args)


def test_shift_copies_refuses_wrong_size():
    with pytest.raises(ValueError, match="x must be"):
        shift_copies(torch.zeros(2, 63), (8, 8))


@pytest.mark.parametrize("make", [lambda: make_logistic_regression(64, 10, seed=1),
                                  lambda: make_mlp(64, 10, (16,), seed=1)])
def test_augmult_gradient_is_mean_of_copy_gradients(make):
    torch.manual_seed(0)
    inner = make().double()
    wrapped = AugMult(inner, (8, 8), copies=5, fill=0.0)
    x, y = images(5)
    per_ex = per_example_grads(wrapped, augmult_cross_entropy, x, y)
    copies = shift_copies(x, (8, 8), 5)
    for i in range(5):
        grads = []
        for k in range(5):               # oracle: each copy alone, plain autograd
            inner.zero_grad()
            F.cross_entropy(inner(copies[i, k:k + 1]), y[i:i + 1]).backward()
            grads.append({n: p.grad.clone() for n, p in inner.named_parameters()})
        for n, _ in inner.named_parameters():
            mean = torch.stack([g[n] for g in grads]).mean(0)
            assert torch.allclose(per_ex["model." + n][i], mean, atol=1e-12), n


@pytest.mark.parametrize("build", [
    lambda: AugMult(make_mlp(64, 10, (16,), seed=2).double(), (8, 8)),
    # GroupNorm normalises within one image: example 0's gradient sees no other example
    lambda: AugMult(cnn(2), (8, 8), channels_first=True)], ids=["mlp", "cnn"])
def test_augmult_per_example_gradient_ignores_other_examples(build):
    wrapped = build()
    x, y = images(4)
    x2 = x.clone()
    x2[1:] = torch.rand(3, 64, dtype=torch.float64)
    g1 = per_example_grads(wrapped, augmult_cross_entropy, x, y)
    g2 = per_example_grads(wrapped, augmult_cross_entropy, x2, y)
    for n in g1:
        assert torch.equal(g1[n][0], g2[n][0])
        assert not torch.allclose(g1[n][1], g2[n][1])


def test_augmult_clipped_sum_has_sensitivity_c():
    """Clipping acts on the averaged gradient: every example adds at most C to the sum."""
    wrapped = AugMult(make_logistic_regression(64, 10).double(), (8, 8))
    x, y = images(6)
    c = 0.01
    total, norms, _ = clipped_grad_sum(wrapped, augmult_cross_entropy, x, y, c)
    flat = torch.cat([t.reshape(-1) for t in total.values()])
    assert float(flat.norm()) <= 6 * c + 1e-12
    assert bool((norms > c).all())              # all clipped: the bound is reached, not loose


def test_augmult_refused_on_ghost_path():
    wrapped = AugMult(make_logistic_regression(64, 10), (8, 8))
    x, y = images(4)
    with pytest.raises(ValueError, match="ghost=False"):
        ghost_clipped_grad_sum(wrapped, augmult_cross_entropy, x.float(), y, 1.0)
    with pytest.raises(ValueError, match="ghost=False"):
        train(wrapped, (x.float(), y), sample_rate=1.0, lr=0.1, steps=1, noise_multiplier=1.0,
              loss_fn=augmult_cross_entropy, ghost=True, seed=0)


def test_augmult_eval_mode_returns_plain_logits():
    inner = make_mlp(64, 10, (16,), seed=0)
    wrapped = AugMult(inner, (8, 8))
    x = images(3)[0].float()
    assert wrapped(x).shape == (3, 5, 10)
    wrapped.eval()
    assert torch.equal(wrapped(x), inner(x))


def test_augmult_cross_entropy_is_mean_over_copies():
    g = torch.Generator().manual_seed(3)
    logits, y = torch.randn(4, 5, 10, generator=g), torch.randint(0, 10, (4,), generator=g)
    want = torch.stack([F.cross_entropy(logits[:, k], y) for k in range(5)]).mean()
    assert torch.allclose(augmult_cross_entropy(logits, y), want)
    assert torch.allclose(augmult_cross_entropy(logits[:, 0], y), F.cross_entropy(logits[:, 0], y))
    with pytest.raises(ValueError, match="targets"):
        augmult_cross_entropy(logits, y[:3])
    with pytest.raises(ValueError, match="logits"):
        augmult_cross_entropy(torch.zeros(4), y)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 1.5, math.nan, "0.9"])
def test_ema_decay_validated(bad):
    with pytest.raises(ValueError, match="decay"):
        ExponentialAverage({"w": torch.zeros(2)}, bad)
    x, y = images(8)
    with pytest.raises(ValueError, match="ema_decay"):
        train(make_logistic_regression(64, 10), (x.float(), y), sample_rate=1.0, lr=0.1,
              steps=2, noise_multiplier=1.0, ema_decay=bad, seed=0)


def test_ema_is_the_normalised_exponential_weighting_of_the_iterates():
    w0 = torch.tensor([100.0, -200.0])                 # the initialisation gets no weight
    ema = ExponentialAverage({"w": w0}, 0.75)
    with pytest.raises(ValueError, match="update"):
        ema.average()
    iterates = [torch.tensor([float(t), 3.0 * t]) for t in range(1, 6)]
    for t, new in enumerate(iterates, start=1):
        ema.update({"w": new})
        weights = torch.tensor([0.75 ** (t - s) for s in range(1, t + 1)])
        want = (weights[:, None] * torch.stack(iterates[:t])).sum(0) / weights.sum()
        assert torch.allclose(ema.average()["w"], want)
    out = {"w": w0.clone()}
    ema.copy_to(out)
    assert torch.allclose(out["w"], want)
    with pytest.raises(ValueError, match="names"):
        ema.update({"v": w0})


@pytest.mark.slow
def test_train_with_ema_is_post_processing():
    """Same seed: same σ, ε and noise; a decay near 0 gives back the last iterate, and the
    average differs from it otherwise."""
    x, y = images(40, seed=4)
    x = x.float()
    kw = dict(sample_rate=0.5, lr=0.5, steps=10, target_epsilon=2.0, seed=7, momentum=0.9)
    last = train(make_logistic_regression(64, 10), (x, y), **kw)
    tiny = train(make_logistic_regression(64, 10), (x, y), ema_decay=1e-9, **kw)
    avg = train(make_logistic_regression(64, 10), (x, y), ema_decay=0.9, **kw)
    assert tiny.epsilon == avg.epsilon == last.epsilon
    assert tiny.noise_multiplier == avg.noise_multiplier == last.noise_multiplier
    w = {n: p for n, p in last.model.named_parameters()}
    for n, p in tiny.model.named_parameters():
        assert torch.allclose(p, w[n], atol=1e-6)
    assert any(not torch.allclose(p, w[n], atol=1e-3) for n, p in avg.model.named_parameters())


def test_public_pca_whitens_the_public_data():
    g = torch.Generator().manual_seed(5)
    xp = torch.randn(200, 10, generator=g) @ torch.randn(10, 10, generator=g)
    pca = PublicPCA(xp, 4)
    z = pca(xp).double()
    assert z.shape == (200, 4)
    assert torch.allclose(z.mean(0), torch.zeros(4, dtype=torch.float64), atol=1e-4)
    assert torch.allclose(torch.cov(z.T), torch.eye(4, dtype=torch.float64), atol=1e-3)
    raw = PublicPCA(xp, 4, whiten=False)
    basis = raw.projection.double()
    assert torch.allclose(basis.T @ basis, torch.eye(4, dtype=torch.float64), atol=1e-5)
    var = torch.cov(raw(xp).double().T).diagonal()
    assert bool((var[:-1] >= var[1:]).all())                   # leading components first
    assert list(pca.parameters()) == []                        # a public constant: no parameters


def test_public_pca_trains_with_ghost_and_does_not_learn_from_private_data():
    xp, _ = images(30, seed=6)
    pca = PublicPCA(xp.float(), 8)
    before = {k: v.clone() for k, v in pca.state_dict().items()}
    x, y = images(50, seed=8)
    model = nn.Sequential(pca, make_logistic_regression(8, 10))
    res = train(model, (x.float(), y), sample_rate=0.5, lr=0.5, steps=5, target_epsilon=1.0,
                ghost=True, seed=0)
    assert math.isclose(res.epsilon, 1.0, rel_tol=1e-2)
    for k, v in pca.state_dict().items():
        assert torch.equal(v, before[k])


@pytest.mark.parametrize("kw,match", [(dict(components=0), "components"),
                                      (dict(components=11), "components"),
                                      (dict(whiten=1), "whiten"),
                                      (dict(x_public=torch.zeros(1, 10)), "x_public"),
                                      (dict(x_public=torch.full((5, 10), math.inf)), "x_public")])
def test_public_pca_refuses_bad_input(kw, match):
    args = dict(x_public=torch.randn(20, 10), components=3) | kw
    with pytest.raises(ValueError, match=match):
        PublicPCA(**args)


def test_public_pca_refuses_wrong_width():
    with pytest.raises(ValueError, match="x must be"):
        PublicPCA(torch.randn(20, 10), 3)(torch.zeros(4, 9))


def test_public_kernel_features_match_the_formula_and_have_unit_norm():
    g = torch.Generator().manual_seed(11)
    z, x = torch.rand(40, 6, generator=g), torch.rand(9, 6, generator=g)
    feats = PublicKernelFeatures(z, 0.7)
    k = torch.exp(-0.7 * ((x[:, None, :] - z[None]) ** 2).sum(-1).double())   # by hand
    assert torch.allclose(feats(x).double(), k / k.norm(dim=1, keepdim=True), atol=1e-6)
    assert torch.allclose(feats(x).norm(dim=1), torch.ones(9), atol=1e-6)
    own = feats(z[:3])          # a public image is closest to itself: its own feature is largest
    assert torch.equal(own.argmax(dim=1), torch.arange(3))
    assert list(feats.parameters()) == []                      # a public constant


def test_public_kernel_features_survive_hostile_rows():
    """Far from every public image, k underflows to 0 in any precision; the features must still be
    finite with norm 1 (no 0/0). Only a non-finite row gives NaN, which training drops."""
    z = torch.rand(20, 4, generator=torch.Generator().manual_seed(12))
    x = torch.tensor([[1e30, 0, 0, 0], [-3e38, 3e38, 0, 1], [50.0, 50, 50, 50],
                      [math.inf, 0, 0, 0]])
    out = PublicKernelFeatures(z, 10.0)(x)
    assert bool(torch.isfinite(out[:3]).all())
    assert torch.allclose(out[:3].norm(dim=1), torch.ones(3), atol=1e-6)
    assert bool(torch.isnan(out[3]).all())
    # far away, the nearest public example takes it all: as ‖x‖ → ∞ it is the one furthest
    # along x's direction (‖x − z‖² = ‖x‖² − 2⟨x, z⟩ + ‖z‖²)
    xd = x[:2].double()
    assert torch.equal(out[:2].argmax(dim=1), (xd / xd.norm(dim=1, keepdim=True) @ z.double().T)
                       .argmax(dim=1))
    near = torch.cdist(x[2:3].double(), z.double(), compute_mode="donot_use_mm_for_euclid_dist")
    assert int(out[2].argmax()) == int(near.argmin())
    assert torch.allclose(out[:2].max(dim=1).values, torch.ones(2))
    # float64 rows and γ near the top of the float64 range stay finite too
    big = PublicKernelFeatures(z.double(), 1e308)(torch.tensor([[1e300, 0, 0, 0], [0.5] * 4],
                                                               dtype=torch.float64))
    assert bool(torch.isfinite(big).all()) and torch.allclose(big.norm(dim=1),
                                                             torch.ones(2, dtype=torch.float64))


def test_public_kernel_features_train_privately_without_learning_from_private_data():
    xp, _ = images(30, seed=6)
    feats = PublicKernelFeatures(xp.float(), 0.5)
    before = feats.landmarks.clone()
    x, y = images(50, seed=8)
    model = nn.Sequential(feats, make_logistic_regression(30, 10))
    res = train(model, (x.float(), y), sample_rate=0.5, lr=0.5, steps=5,
                target_epsilon=1.0, ghost=True, seed=0)
    assert math.isclose(res.epsilon, 1.0, rel_tol=1e-2)
    assert torch.equal(feats.landmarks, before)
    grads, norms, _ = clipped_grad_sum(model, F.cross_entropy, x[:8].float(), y[:8], 1.0)
    ghost, gnorms, _ = ghost_clipped_grad_sum(model, F.cross_entropy, x[:8].float(), y[:8], 1.0)
    assert torch.allclose(norms, gnorms, atol=1e-5)
    assert all(torch.allclose(grads[k], ghost[k], atol=1e-5) for k in grads)


@pytest.mark.parametrize("kw,match", [(dict(gamma=0.0), "gamma"), (dict(gamma=math.inf), "gamma"),
                                      (dict(x_public=torch.zeros(0, 10)), "x_public"),
                                      (dict(x_public=torch.zeros(5, 0)), "x_public"),
                                      (dict(x_public=torch.zeros(5, 10, dtype=torch.long)),
                                       "floating point"),
                                      (dict(x_public=torch.full((5, 10), math.nan)),
                                       "50 inf or NaN")])
def test_public_kernel_features_refuse_bad_input(kw, match):
    args = dict(x_public=torch.randn(20, 10), gamma=0.5) | kw
    with pytest.raises(ValueError, match=match):
        PublicKernelFeatures(**args)
    with pytest.raises(ValueError, match="x must be"):
        PublicKernelFeatures(torch.randn(20, 10), 0.5)(torch.zeros(4, 9))
    with pytest.raises(ValueError, match="x must be a floating-point"):
        PublicKernelFeatures(torch.randn(20, 10), 0.5)(torch.zeros(4, 10, dtype=torch.long))


class _Shapes(nn.Module):
    """Records the shape of its input; logits from a fixed linear map of the pixels."""

    def __init__(self):
        super().__init__()
        self.lin, self.seen = nn.Linear(64, 10), []

    def forward(self, x):
        self.seen.append(tuple(x.shape))
        return self.lin(x.reshape(x.shape[0], 64))


@pytest.mark.parametrize("channels_first,train_shape,eval_shape",
                         [(False, (15, 64), (3, 64)), (True, (15, 1, 8, 8), (3, 1, 8, 8))])
def test_augmult_hands_the_model_flat_or_channels_first_images(channels_first, train_shape,
                                                                eval_shape):
    inner = _Shapes()
    wrapped = AugMult(inner, (8, 8), copies=5, channels_first=channels_first)
    x = images(3)[0].float()
    out = wrapped(x)
    assert out.shape == (3, 5, 10) and inner.seen[-1] == train_shape
    copies = shift_copies(x, (8, 8), 5)                  # the same copies, in the same order
    assert torch.allclose(out, inner.lin(copies))
    wrapped.eval()
    assert torch.equal(wrapped(x), inner.lin(x)) and inner.seen[-1] == eval_shape


@pytest.mark.parametrize("bad", [1, None, "yes"])
def test_augmult_channels_first_validated(bad):
    with pytest.raises(ValueError, match="channels_first"):
        AugMult(nn.Linear(64, 10), (8, 8), channels_first=bad)


def cnn(seed=1):
    return make_cnn(1, 10, 8, groups=2, width=4, seed=seed).double()


@pytest.mark.parametrize("copies", [5, 9])
def test_augmult_cnn_gradient_is_mean_of_copy_gradients(copies):
    """Per-example gradient (vmap) of the wrapped CNN = mean of the K per-copy gradients, each
    computed alone by plain autograd on its [1, 1, 8, 8] image."""
    inner = cnn()
    wrapped = AugMult(inner, (8, 8), copies=copies, channels_first=True)
    x, y = images(4)
    per_ex = per_example_grads(wrapped, augmult_cross_entropy, x, y)
    imgs = shift_copies(x, (8, 8), copies).reshape(4, copies, 1, 1, 8, 8)
    for i in range(4):
        grads = []
        for k in range(copies):
            inner.zero_grad()
            F.cross_entropy(inner(imgs[i, k]), y[i:i + 1]).backward()
            grads.append({n: p.grad.clone() for n, p in inner.named_parameters()})
        for n, _ in inner.named_parameters():
            mean = torch.stack([g[n] for g in grads]).mean(0)
            assert torch.allclose(per_ex["model." + n][i], mean, atol=1e-12), n


def test_augmult_cnn_trains_with_dp_sgd():
    x, y = images(20, seed=9)
    wrapped = AugMult(make_cnn(1, 10, 8, groups=2, width=4, seed=0), (8, 8),
                      channels_first=True)
    res = train(wrapped, (x.float(), y), sample_rate=0.5, lr=0.5, steps=3, target_epsilon=2.0,
                loss_fn=augmult_cross_entropy, ghost=False, seed=0)
    assert math.isclose(res.epsilon, 2.0, rel_tol=1e-2)
    assert wrapped.training and wrapped(x.float()).shape == (20, 5, 10)
    wrapped.eval()
    assert wrapped(x.float()).shape == (20, 10)
