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
import math
import os
import pickle
import re
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from ._common_params import FLAG, PATH_OR_NONE, PROBABILITY, RNG, SEED
from ._constraints import Custom, Integer, Interval, constrained, unconstrained
from ._digits import sklearn_digits
from ._validate import shown

__all__ = ["synthetic_survey", "synthetic_health_records", "load_digits", "load_mnist",
           "load_cifar10", "default_root", "is_online", "load_cached_result"]


#: A count of people or codes, ≥ 1.
_COUNT = Integer(min=1)
#: A validation fraction in [0, 1) and a test fraction in (0, 1).
_VAL_FRACTION = Interval(0.0, 1.0, closed="left")
_TEST_FRACTION = Interval(0.0, 1.0, closed="neither")


def _birth_years(name: str, value: object) -> tuple[int, int]:
    if (not isinstance(value, (tuple, list)) or len(value) != 2
            or not all(isinstance(y, int) and not isinstance(y, bool) for y in value)
            or not value[0] < value[1]):
        raise ValueError(f"{name} must be two integers (first < last), got {shown(value)}")
    return value


@constrained(n=_COUNT, proportion=PROBABILITY, rng=RNG)
def synthetic_survey(n: int, proportion: float, *, rng: np.random.Generator | int) -> np.ndarray:
    """True 0/1 answers of n people, exactly round(proportion·n) of them "yes", in random order."""
    answers = np.zeros(n, dtype=np.int8)
    answers[: int(round(proportion * n))] = 1
    return rng.permutation(answers)


@constrained(n=_COUNT, n_zip=_COUNT,
             birth_years=Custom(_birth_years, "two integers (first < last)",
                                [(2000, 1990), (1.5, 2000), (1990,), None, "1990",
                                 (1990, 1990), (True, 2000)]),
             diabetes_rate=PROBABILITY, rng=RNG)
def synthetic_health_records(n: int, *, n_zip: int = 20, birth_years: tuple[int, int] = (1945, 2005),
                             diabetes_rate: float = 0.1,
                             rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """A toy "de-identified" medical release: quasi-identifiers plus a sensitive attribute.

    Columns: ``zip`` (one of ``n_zip`` codes), ``birth_date`` (day number, uniform over the
    birth years), ``sex`` (0/1), ``diabetes`` (0/1). Names were "removed", as in the
    Massachusetts GIC release (Sweeney 2002); the chapter links them back through a voter roll.
    """
    lo, hi = birth_years
    rate, gen = diabetes_rate, rng
    days = int((hi - lo) * 365.25)
    return {
        "zip": 2100 + gen.integers(0, n_zip, n),
        "birth_date": gen.integers(0, days, n),
        "sex": gen.integers(0, 2, n),
        "diabetes": (gen.random(n) < rate).astype(np.int8),
    }


# --- real data sets ---------------------------------------------------------------------------

def _approximate_mode(counts: np.ndarray, n_draws: int,
                      rng: np.random.RandomState) -> np.ndarray:
    """Draws per class of a stratified sample of ``n_draws``: the floored proportional shares,
    the rest given to the largest remainders, ties broken by ``rng`` (scikit-learn's
    ``sklearn.utils.extmath._approximate_mode``, step for step, so the same generator state gives
    the same draws)."""
    continuous = counts / counts.sum() * n_draws
    floored = np.floor(continuous)
    need = int(n_draws - floored.sum())
    if need > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:   # at most one pass per class
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need -= add_now
            if need == 0:
                break
    return floored.astype(int)


def _stratified_split(y: np.ndarray, test_fraction: float,
                      seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The (train, test) indices of scikit-learn's ``train_test_split(..., test_size=
    test_fraction, random_state=seed, stratify=y)``, computed as its ``StratifiedShuffleSplit``
    does (⌈test_fraction·n⌉ test records; per-class counts by :func:`_approximate_mode`; one
    permutation per class, then of each side, all from ``RandomState(seed)``), without importing
    scikit-learn, which costs a chapter about 1.5 s of CPU to start (its import loads
    ``scipy.stats``). tests/unit/test_datasets_loaders.py checks that the indices are
    scikit-learn's."""
    n_test = math.ceil(test_fraction * len(y))
    n_train = len(y) - n_test
    classes, y_index, counts = np.unique(y, return_inverse=True, return_counts=True)
    if counts.min() < 2 or min(n_train, n_test) < len(classes):
        raise ValueError(f"a stratified split needs two records per class and at least one per "
                         f"class on each side, got class counts {counts.tolist()} and "
                         f"{n_train} / {n_test} records")
    by_class = np.split(np.argsort(y_index, kind="stable"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(counts, n_train, rng)
    t_i = _approximate_mode(counts - n_i, n_test, rng)
    train: list = []
    test: list = []
    for i, members in enumerate(by_class):       # one pass per class, not per record
        perm = members.take(rng.permutation(counts[i]), mode="clip")
        train.extend(perm[:n_i[i]])
        test.extend(perm[n_i[i]:n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def _split(x: np.ndarray, y: np.ndarray, seed: int, val_fraction: float, test_fraction: float,
           test: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """Seeded stratified split into train / val / test (test given: only train / val), the
    split scikit-learn's ``train_test_split`` makes (:func:`_stratified_split`)."""
    out = {}
    if test is None:
        tr, te = _stratified_split(y, test_fraction, seed)
        x, y, out["test"] = x[tr], y[tr], (x[te], y[te])
    else:
        out["test"] = test
    if val_fraction > 0:
        frac = val_fraction / (1 - (test_fraction if test is None else 0.0))
        tr, va = _stratified_split(y, frac, seed + 1)
        x, y, out["val"] = x[tr], y[tr], (x[va], y[va])
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


@constrained(seed=SEED, val_fraction=_VAL_FRACTION, test_fraction=_TEST_FRACTION,
             standardize=FLAG)
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
    v, t = val_fraction, test_fraction
    if v + t >= 1:
        raise ValueError(f"val_fraction + test_fraction must be < 1, got {v} + {t}")
    pixels, target = sklearn_digits()
    split = _split(pixels.astype(np.float32), target.astype(np.int64), seed, v, t)
    mean = std = None
    if standardize:
        xt = split["train"][0]
        mean, std = np.float32(xt.mean()), np.float32(xt.std())
    out = _to_torch(split, mean, std)
    out.update(num_classes=10, image_shape=(1, 8, 8))
    return out


def _cached_names() -> tuple[str, ...]:
    """The stored results shipped in dplib/data (file names without ``.json``)."""
    from importlib import resources
    folder = resources.files(__package__) / "data"
    return tuple(sorted(f.name[:-len(".json")] for f in folder.iterdir()
                        if f.name.endswith(".json")))


def _cached_name(name: str, value: object) -> str:
    names = _cached_names()
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"{name} must be one of {list(names)} (the files in dplib/data), "
                         f"got {shown(value)}")
    return value


@constrained(name=Custom(_cached_name, "the name of a file in dplib/data (without .json)",
                         ["nope", None, 3, "", ["encoding_digits"]], dynamic=True))
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
    return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))


def default_root() -> Path:
    """Where downloads are cached: ``$DPBOOK_DATA`` if set, else ``~/.cache/dplib``."""
    return Path(os.environ.get("DPBOOK_DATA") or Path.home() / ".cache" / "dplib")


@unconstrained("a probe that never raises: any url or timeout it cannot use answers False")
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


@constrained(root=PATH_OR_NONE, download=FLAG, seed=SEED, val_fraction=_VAL_FRACTION,
             flatten=FLAG)
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
    v = val_fraction
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


@constrained(root=PATH_OR_NONE, download=FLAG, seed=SEED, val_fraction=_VAL_FRACTION)
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
    v = val_fraction
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
