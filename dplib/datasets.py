"""Data the chapters use: generated locally or bundled offline, fully seeded; plus loaders for
public data sets that download only when asked.

* Offline: :func:`synthetic_survey`, :func:`synthetic_health_records`, :func:`load_digits`
  (scikit-learn's bundled 8×8 digits, 1,797 images — no network).
* Online, for Colab / GPU runs: :func:`load_mnist`, :func:`load_cifar10`. They download the
  official files once (``download=True``) and cache them under ``root`` (default
  ``$DPBOOK_DATA`` or ``~/.cache/dplib``). Every file is read into memory once and checked
  against the SHA-256 written below *before* it is parsed: a cached or downloaded file with
  another hash is deleted and refused, never opened (an MD5 match proves nothing against a
  crafted file, and CIFAR-10's batches are pickles, which run code when loaded). Tests never
  download: they exercise the same code on small local files.
* Stored results: :func:`load_cached_result` reads a long benchmark run's JSON, installed with
  dplib as package data (``dplib/data``), so a chapter opened alone needs no repository.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import re
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from ._validate import as_generator, check_bool, check_int, check_probability, check_real, shown

__all__ = ["synthetic_survey", "synthetic_health_records", "load_digits", "load_mnist",
           "load_cifar10", "default_root", "is_online", "load_cached_result"]


def synthetic_survey(n: int, proportion: float, *, rng: np.random.Generator | int) -> np.ndarray:
    """True 0/1 answers of n people, exactly round(proportion·n) of them "yes", in random order."""
    n = check_int("n", n)
    pi = check_probability("proportion", proportion)
    answers = np.zeros(n, dtype=np.int8)
    answers[: int(round(pi * n))] = 1
    return as_generator(rng).permutation(answers)


def synthetic_health_records(n: int, *, n_zip: int = 20, birth_years: tuple[int, int] = (1945, 2005),
                             diabetes_rate: float = 0.1,
                             rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """A toy "de-identified" medical release: quasi-identifiers plus a sensitive attribute.

    Columns: ``zip`` (one of ``n_zip`` codes), ``birth_date`` (day number, uniform over the
    birth years), ``sex`` (0/1), ``diabetes`` (0/1). Names were "removed", as in the
    Massachusetts GIC release (Sweeney 2002); the chapter links them back through a voter roll.
    """
    n = check_int("n", n)
    n_zip = check_int("n_zip", n_zip)
    if not isinstance(birth_years, (tuple, list)) or len(birth_years) != 2:
        raise ValueError(f"birth_years must be two integers (first < last), got "
                         f"{shown(birth_years)}")
    lo, hi = birth_years
    if not (isinstance(lo, int) and isinstance(hi, int) and lo < hi):
        raise ValueError(f"birth_years must be two integers (first < last), got "
                         f"{shown(birth_years)}")
    rate = check_probability("diabetes_rate", diabetes_rate)
    gen = as_generator(rng)
    days = int((hi - lo) * 365.25)
    return {
        "zip": 2100 + gen.integers(0, n_zip, n),
        "birth_date": gen.integers(0, days, n),
        "sex": gen.integers(0, 2, n),
        "diabetes": (gen.random(n) < rate).astype(np.int8),
    }


# --- real data sets ---------------------------------------------------------------------------

def _split(x: np.ndarray, y: np.ndarray, seed: int, val_fraction: float, test_fraction: float,
           test: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """Seeded stratified split into train / val / test (test given: only train / val)."""
    from sklearn.model_selection import train_test_split
    out = {}
    if test is None:
        x, x_te, y, y_te = train_test_split(x, y, test_size=test_fraction, random_state=seed,
                                            stratify=y)
        out["test"] = (x_te, y_te)
    else:
        out["test"] = test
    if val_fraction > 0:
        frac = val_fraction / (1 - (test_fraction if test is None else 0.0))
        x, x_va, y, y_va = train_test_split(x, y, test_size=frac, random_state=seed + 1,
                                            stratify=y)
        out["val"] = (x_va, y_va)
    else:
        out["val"] = (x[:0], y[:0])
    out["train"] = (x, y)
    return out


def _to_torch(split: dict, mean: np.ndarray | None, std: np.ndarray | None) -> dict:
    import torch
    res = {}
    for k, (x, y) in split.items():
        x = x.astype(np.float32)
        if mean is not None:
            x = (x - mean) / std
        res[k] = (torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)),
                  torch.from_numpy(np.asarray(y, dtype=np.int64)))
    return res


def _fractions(val_fraction: object, test_fraction: object) -> tuple[float, float]:
    v = check_real("val_fraction", val_fraction, low=0.0, high=1.0, low_open=False)
    t = check_real("test_fraction", test_fraction, low=0.0, high=1.0)
    if v + t >= 1:
        raise ValueError(f"val_fraction + test_fraction must be < 1, got {v} + {t}")
    return v, t


def load_digits(*, seed: int = 0, val_fraction: float = 0.2, test_fraction: float = 0.2,
                standardize: bool = True) -> dict:
    """scikit-learn's bundled handwritten digits (1,797 8×8 images, 10 classes; offline).

    Returns ``{"train": (X, y), "val": (X, y), "test": (X, y), "num_classes": 10,
    "image_shape": (1, 8, 8)}`` with X a float32 tensor [n, 64] and y an int64 tensor, split
    stratified and seeded by ``seed``. With ``standardize`` the pixels (0–16) are centred and
    scaled by one global mean and standard deviation computed on the TRAINING split only (one
    scalar each, so no per-pixel statistic of the test data leaks into the model; the statistics
    of the training split are treated as public preprocessing — a DP pipeline that must protect
    them would compute them privately or use the fixed range 0–16 instead).
    """
    from sklearn.datasets import load_digits as _sk_digits
    seed = check_int("seed", seed, low=0)
    standardize = check_bool("standardize", standardize)
    v, t = _fractions(val_fraction, test_fraction)
    if test_fraction == 0:
        raise ValueError("test_fraction must be in (0, 1), got 0")
    data = _sk_digits()
    split = _split(data.data.astype(np.float32), data.target.astype(np.int64), seed, v, t)
    mean = std = None
    if standardize:
        xt = split["train"][0]
        mean, std = np.float32(xt.mean()), np.float32(xt.std())
    out = _to_torch(split, mean, std)
    out.update(num_classes=10, image_shape=(1, 8, 8))
    return out


def load_cached_result(name: str) -> dict:
    """The stored results of a long benchmark run, shipped with dplib as ``dplib/data/<name>.json``.

    A chapter quotes runs that take too long to repeat (``benchmarks/encoding.py``: about 35
    minutes) from these files; being package data, they are installed with dplib, so a notebook
    opened alone (Colab, an empty folder) finds them without the repository. Each file's
    ``provenance`` entry records the command, versions, machine and date of its run.
    """
    import json
    from importlib import resources
    folder = resources.files(__package__) / "data"
    names = tuple(sorted(f.name[:-len(".json")] for f in folder.iterdir()
                         if f.name.endswith(".json")))
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"name must be one of {list(names)} (the files in dplib/data), "
                         f"got {shown(name)}")
    return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))


def default_root() -> Path:
    """Where downloads are cached: ``$DPBOOK_DATA`` if set, else ``~/.cache/dplib``."""
    return Path(os.environ.get("DPBOOK_DATA") or Path.home() / ".cache" / "dplib")


def is_online(url: str = "https://ossci-datasets.s3.amazonaws.com",
              timeout: float = 3.0) -> bool:
    """True when ``url`` answers within ``timeout`` seconds (chapters use it to decide whether a
    download-dependent cell runs). Never raises."""
    try:
        req = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "dplib"})
        with urllib.request.urlopen(req, timeout=timeout):
            return True
    except urllib.error.HTTPError:     # the server answered (e.g. 403 on a bucket root)
        return True
    except Exception:   # offline, DNS failure, timeout: do not download
        return False


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fetch(name: str, urls: tuple[str, ...], sha256: str, folder: Path, download: bool) -> bytes:
    """The content of ``folder/name``, verified to have SHA-256 ``sha256``; downloaded if allowed.

    The bytes are read once and hashed, and the caller parses those same bytes, so nothing can
    swap the file between the check and the read. A cached file with another hash is deleted
    and refused (``ValueError``). A download is checked in memory and written to the cache
    (through a temporary file renamed at the end) only when it matches; mirrors are tried in
    order, and a mismatch from every mirror raises ``RuntimeError`` leaving nothing behind.
    """
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise ValueError(f"sha256 of {name} must be 64 lowercase hex digits, got {shown(sha256)}")
    path = folder / name
    if path.exists():
        data = path.read_bytes()
        got = _sha256(data)
        if got != sha256:
            path.unlink()
            raise ValueError(f"cached file {path} has SHA-256 {got}, expected {sha256}: it was "
                             "deleted unread; call again with download=True to fetch it again")
        return data
    if not download:
        raise FileNotFoundError(f"{path} is missing; call with download=True (needs network) "
                                f"or put the official file there")
    folder.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in urls:
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "dplib"})
            with urllib.request.urlopen(req, timeout=60) as r:
                data = r.read()
        except Exception as exc:   # offline or missing: try the next mirror
            errors.append(f"{url}: {exc}")
            continue
        got = _sha256(data)
        if got != sha256:
            errors.append(f"{url}: SHA-256 {got} != expected {sha256}")
            continue
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=name + ".", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return data
    raise RuntimeError(f"could not download {name}: " + "; ".join(errors))


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, strings, numbers and NumPy arrays, and nothing else.

    A second line of defence behind the SHA-256 check: CIFAR-10's batches need only NumPy's array
    reconstruction, so any other global a pickle names (``os.system``, ``builtins.eval``, ...) is
    refused with ``pickle.UnpicklingError`` instead of being called.
    """

    ALLOWED = frozenset({
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),   # bytes written by Python 3 at protocol 2
    })

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(module, name)


#: MNIST files (LeCun et al. 1998) and their SHA-256 sums: the official files, the ones whose
#: MD5 sums torchvision.datasets.MNIST checks (f68b3c2d…, d53e105e…, 9fb629c4…, ec29112d…).
MNIST_FILES = {
    "train-images-idx3-ubyte.gz":
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz":
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz":
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz":
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "https://storage.googleapis.com/cvdf-datasets/mnist/")
#: CIFAR-10 python archive (Krizhevsky 2009) and its SHA-256 (the value torchvision's dataset
#: prototypes pin; the archive's MD5 is c58f30108f718f92721af3b95e74349a).
CIFAR10_FILE = ("cifar-10-python.tar.gz",
                "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce")
CIFAR10_MIRRORS = ("https://www.cs.toronto.edu/~kriz/",)


def _read_idx(data: bytes, name: str) -> np.ndarray:
    """A gzipped IDX file (LeCun's MNIST format): big-endian magic 0x000008dd (ubyte, d dims),
    d sizes, then the data."""
    raw = gzip.decompress(data)
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{name} is not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _check_root(root) -> Path:
    return default_root() if root is None else Path(root)


def load_mnist(root: str | os.PathLike | None = None, *, download: bool = False, seed: int = 0,
               val_fraction: float = 0.0, flatten: bool = False) -> dict:
    """MNIST (LeCun et al. 1998): 60,000 training and 10,000 test 28×28 digits.

    Files are cached in ``root/mnist`` and checked against the SHA-256 sums of
    :data:`MNIST_FILES` before they are decompressed. Pixels are scaled to [0, 1] and
    normalised with the usual MNIST constants (mean 0.1307, std 0.3081 — fixed public numbers,
    so no data statistic enters). X has shape [n, 1, 28, 28] (or [n, 784] with ``flatten``).
    Returns the same dict as :func:`load_digits` (``val`` is carved, seeded and stratified, out
    of the training set when ``val_fraction`` > 0; the official test set is ``test``).
    """
    folder = _check_root(root) / "mnist"
    seed = check_int("seed", seed, low=0)
    v = check_real("val_fraction", val_fraction, low=0.0, high=1.0, low_open=False)
    names = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    xtr, ytr, xte, yte = (_read_idx(_fetch(k, tuple(m + k for m in MNIST_MIRRORS),
                                           MNIST_FILES[k], folder, download), k)
                          for k in names)

    def prep(x):
        x = (x.astype(np.float32) / 255.0 - 0.1307) / 0.3081
        return x.reshape(len(x), -1) if flatten else x.reshape(len(x), 1, 28, 28)
    split = _split(prep(xtr), ytr.astype(np.int64), seed, v, 0.0,
                   test=(prep(xte), yte.astype(np.int64)))
    out = _to_torch(split, None, None)
    out.update(num_classes=10, image_shape=(1, 28, 28))
    return out


def load_cifar10(root: str | os.PathLike | None = None, *, download: bool = False,
                 seed: int = 0, val_fraction: float = 0.0) -> dict:
    """CIFAR-10 (Krizhevsky 2009): 50,000 training and 10,000 test 32×32 colour images.

    The python archive is cached in ``root/cifar10``, checked against the SHA-256 of
    :data:`CIFAR10_FILE` before it is opened, and read without extracting it to disk; its
    pickled batches are loaded by an unpickler that builds NumPy arrays and nothing else.
    X is float32 [n, 3, 32, 32], scaled to [0, 1] and normalised per channel with the commonly
    used public constants (mean (0.4914, 0.4822, 0.4465), std (0.2470, 0.2435, 0.2616)). Same
    dict as :func:`load_digits`.
    """
    folder = _check_root(root) / "cifar10"
    seed = check_int("seed", seed, low=0)
    v = check_real("val_fraction", val_fraction, low=0.0, high=1.0, low_open=False)
    name, sha = CIFAR10_FILE
    data = _fetch(name, tuple(m + name for m in CIFAR10_MIRRORS), sha, folder, download)
    parts: dict[str, dict] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            base = os.path.basename(member.name)
            if member.isfile() and (base.startswith("data_batch_") or base == "test_batch"):
                parts[base] = _ArrayUnpickler(tar.extractfile(member),
                                              encoding="latin1").load()
    train_names = [f"data_batch_{i}" for i in range(1, 6)]
    missing = [k for k in train_names + ["test_batch"] if k not in parts]
    if missing:
        raise ValueError(f"{folder / name} lacks {missing}")
    mean = np.array([0.4914, 0.4822, 0.4465], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.2470, 0.2435, 0.2616], np.float32).reshape(1, 3, 1, 1)

    def prep(batches):
        x = np.concatenate([np.asarray(parts[b]["data"], np.uint8) for b in batches])
        y = np.concatenate([np.asarray(parts[b]["labels"], np.int64) for b in batches])
        return (x.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0 - mean) / std, y
    xtr, ytr = prep(train_names)
    split = _split(xtr, ytr, seed, v, 0.0, test=prep(["test_batch"]))
    out = _to_torch(split, None, None)
    out.update(num_classes=10, image_shape=(3, 32, 32))
    return out
