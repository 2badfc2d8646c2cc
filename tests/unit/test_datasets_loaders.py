"""dplib.datasets loaders: digits (offline, bundled with scikit-learn) and the MNIST / CIFAR-10
download code (SHA-256 checked), exercised on small fake files in the official formats (nothing
is downloaded: "mirrors" are file:// URLs in a temporary directory)."""
import gzip
import hashlib
import io
import pickle
import tarfile

import numpy as np
import pytest
import torch

import dplib.datasets as ds


def test_digits_splits_are_stratified_seeded_and_standardised_on_train_only():
    d = ds.load_digits(seed=3)
    sizes = {k: len(d[k][1]) for k in ("train", "val", "test")}
    assert sum(sizes.values()) == 1797
    assert sizes["test"] == 360 and sizes["val"] in (359, 360)
    for k in ("train", "val", "test"):
        x, y = d[k]
        assert x.dtype == torch.float32 and x.shape[1] == 64 and y.dtype == torch.int64
        counts = np.bincount(y.numpy(), minlength=10) / len(y)
        assert np.all(np.abs(counts - 0.1) < 0.02)          # stratified: ~10 % per class
    xt = d["train"][0]
    assert abs(float(xt.mean())) < 1e-5 and abs(float(xt.std()) - 1) < 1e-3
    assert abs(float(d["test"][0].mean())) > 1e-4            # test statistics were not used
    again = ds.load_digits(seed=3)
    assert torch.equal(again["test"][0], d["test"][0])
    other = ds.load_digits(seed=4)
    assert not torch.equal(other["test"][1], d["test"][1])
    raw = ds.load_digits(seed=3, standardize=False)
    assert float(raw["train"][0].max()) == 16.0
    assert d["num_classes"] == 10 and d["image_shape"] == (1, 8, 8)


def test_digits_are_scikit_learns_data_and_splits_without_importing_it():
    """load_digits reads scikit-learn's bundled file and splits as its train_test_split does
    (dplib.datasets._stratified_split), without importing it: the same records in the same order
    as sklearn.datasets.load_digits + train_test_split(stratify=y) give, for several seeds."""
    import subprocess
    import sys
    code = ("import sys, dplib.datasets as ds; ds.load_digits(seed=0); "
            "print('sklearn' in sys.modules, 'scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split
    sk = sk_digits()
    for seed in (0, 1, 7):
        x = sk.data.astype(np.float32)
        y = sk.target.astype(np.int64)
        x, x_te, y, y_te = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
        x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.25, random_state=seed + 1,
                                                  stratify=y)
        d = ds.load_digits(seed=seed, standardize=False)
        for k, (xs, ys) in {"train": (x_tr, y_tr), "val": (x_va, y_va),
                            "test": (x_te, y_te)}.items():
            assert np.array_equal(d[k][0].numpy(), xs) and np.array_equal(d[k][1].numpy(), ys)
    rng = np.random.default_rng(0)   # unbalanced classes, ties in the remainders, other sizes
    for labels in (rng.integers(0, 7, 501), np.repeat(np.arange(5), [2, 3, 50, 7, 100])):
        for frac, seed in ((0.1, 0), (1 / 3, 5), (0.5, 2)):
            ref = train_test_split(np.arange(len(labels)), test_size=frac, random_state=seed,
                                   stratify=labels)
            mine = ds._stratified_split(labels, frac, seed)
            assert all(np.array_equal(a, b) for a, b in zip(ref, mine))


@pytest.mark.parametrize("kw,match", [({"val_fraction": -0.1}, "val_fraction"),
                                      ({"test_fraction": 1.0}, "test_fraction"),
                                      ({"val_fraction": 0.5, "test_fraction": 0.5}, "< 1"),
                                      ({"seed": -1}, "seed")])
def test_digits_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        ds.load_digits(**kw)


def _idx(arr: np.ndarray) -> bytes:
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big")
                                                     for s in arr.shape)
    return gzip.compress(header + arr.astype(np.uint8).tobytes())


def _sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def fake_mnist(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    files = {
        "train-images-idx3-ubyte.gz": _idx(rng.integers(0, 256, (50, 28, 28))),
        "train-labels-idx1-ubyte.gz": _idx(np.arange(50) % 10),
        "t10k-images-idx3-ubyte.gz": _idx(rng.integers(0, 256, (20, 28, 28))),
        "t10k-labels-idx1-ubyte.gz": _idx(np.arange(20) % 10),
    }
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for k, b in files.items():
        (mirror / k).write_bytes(b)
    monkeypatch.setattr(ds, "MNIST_FILES", {k: _sha256(b) for k, b in files.items()})
    monkeypatch.setattr(ds, "MNIST_MIRRORS", (f"file://{tmp_path}/missing/",
                                              f"file://{mirror}/"))
    return tmp_path / "cache", files


def test_mnist_download_checksum_cache_and_format(fake_mnist):
    root, files = fake_mnist
    with pytest.raises(FileNotFoundError, match="download=True"):
        ds.load_mnist(root)
    d = ds.load_mnist(root, download=True)       # first mirror fails, second works
    assert d["train"][0].shape == (50, 1, 28, 28) and d["test"][0].shape == (20, 1, 28, 28)
    assert torch.equal(d["train"][1], torch.arange(50) % 10)
    raw = np.frombuffer(gzip.decompress(files["train-images-idx3-ubyte.gz"])[16:], np.uint8)
    want = (raw[:784].astype(np.float32) / 255 - 0.1307) / 0.3081
    np.testing.assert_allclose(d["train"][0][0].flatten().numpy(), want, rtol=1e-6)
    assert sorted(p.name for p in (root / "mnist").iterdir()) == sorted(files)  # no .part left
    # cached: works offline now, and a corrupted cache is refused, never silently used
    flat = ds.load_mnist(root, flatten=True, val_fraction=0.2)
    assert flat["train"][0].shape == (40, 784) and flat["val"][0].shape == (10, 784)
    (root / "mnist" / "t10k-labels-idx1-ubyte.gz").write_bytes(b"corrupt")
    with pytest.raises(ValueError, match="SHA-256"):
        ds.load_mnist(root)
    assert not (root / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()   # deleted, not kept


def test_download_with_wrong_checksum_leaves_nothing(fake_mnist, monkeypatch):
    root, files = fake_mnist
    bad = dict(ds.MNIST_FILES)
    bad["t10k-labels-idx1-ubyte.gz"] = "0" * 64
    monkeypatch.setattr(ds, "MNIST_FILES", bad)
    with pytest.raises(RuntimeError, match="SHA-256"):
        ds.load_mnist(root, download=True)
    assert not (root / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list((root / "mnist").glob("*.part"))


def test_cifar10_from_a_fake_archive(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, n in [(f"data_batch_{i}", 4) for i in range(1, 6)] + [("test_batch", 3)]:
            blob = pickle.dumps({"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                                 "labels": list(range(n))})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    archive = buf.getvalue()
    mirror = tmp_path / "m"
    mirror.mkdir()
    (mirror / "cifar-10-python.tar.gz").write_bytes(archive)
    monkeypatch.setattr(ds, "CIFAR10_FILE", ("cifar-10-python.tar.gz", _sha256(archive)))
    monkeypatch.setattr(ds, "CIFAR10_MIRRORS", (f"file://{mirror}/",))
    d = ds.load_cifar10(tmp_path / "cache", download=True)
    assert d["train"][0].shape == (20, 3, 32, 32) and d["test"][0].shape == (3, 3, 32, 32)
    assert d["image_shape"] == (3, 32, 32)
    assert abs(float(d["train"][0][:, 0].mean()) - (127.5 / 255 - 0.4914) / 0.2470) < 0.3


def test_default_root_honours_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DPBOOK_DATA", str(tmp_path))
    assert ds.default_root() == tmp_path
