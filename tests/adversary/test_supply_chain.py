"""The classroom path under attack: what a reader's Colab installs, downloads and unpickles.

The adversary controls what the network serves: a new commit pushed to the book's repository, a
new otter-grader release, a swapped ``tests.zip``, a crafted CIFAR-10 archive, a moved model
revision on the Hugging Face hub. Each test shows that such a change is refused, or cannot
reach the reader, without using the network.
"""
from __future__ import annotations

import ast
import hashlib
import io
import os
import pickle
import re
import subprocess
import sys
import tarfile
import types
import zipfile
from importlib import metadata
from pathlib import Path

import nbformat
import pytest

import dplib.datasets as ds
from dplib.icl import hf as icl_hf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import assignments as A  # noqa: E402
import sync_notebooks as S  # noqa: E402

CHAPTERS = S.chapter_notebooks()
MASTERS = S.assignment_notebooks()
NOTEBOOKS = CHAPTERS + MASTERS
COMMIT = re.compile(r"[0-9a-f]{40}")
GIT_TARGET = re.compile(r"(?:dplib\[[a-z_]+\] @ )?git\+(\S+)")
EXACT_PIN = re.compile(r"[A-Za-z0-9_.\-]+(\[[A-Za-z0-9_,\-]+\])?==\d+(\.\d+)*")


# ---- helpers ----------------------------------------------------------------------------------

def _setup_source(path: Path) -> str:
    return S.setup_cell(nbformat.read(path, as_version=4)).source


def _colab_branch(source: str) -> types.CodeType:
    """The setup cell's statements up to the end of its ``if "google.colab" in sys.modules:``
    block (what runs in Colab before ``dplib`` is imported), compiled."""
    tree = ast.parse(source)
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.If) and "google.colab" in ast.unparse(node.test):
            return compile(ast.Module(body=tree.body[:i + 1], type_ignores=[]), "setup", "exec")
    raise AssertionError("the setup cell has no Colab branch")


def _run_as_colab(source: str, cwd: Path, monkeypatch) -> tuple[dict, list[list[str]]]:
    """Run the Colab branch of a setup cell in ``cwd`` with pip stubbed out; return the
    namespace and every command it passed to ``subprocess.run``."""
    monkeypatch.chdir(cwd)
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    calls: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(list(cmd)))
    namespace: dict = {}
    exec(_colab_branch(source), namespace)
    return namespace, calls


def _pip_requirements(calls: list[list[str]]) -> list[str]:
    reqs = []
    for cmd in calls:
        assert cmd[1:4] == ["-m", "pip", "install"], f"unexpected command {cmd}"
        reqs += [a for a in cmd[4:] if not a.startswith("-")]
    return reqs


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


# ---- what the notebooks install ---------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_cell_installs_only_pinned_requirements(path, tmp_path, monkeypatch):
    """In Colab the cell installs the repository at a 40-hex commit and every other package at
    an exact version: nothing a later push or release could change."""
    (tmp_path / "tests").mkdir()          # the public tests are there: nothing to unpack
    _, calls = _run_as_colab(_setup_source(path), tmp_path, monkeypatch)
    reqs = _pip_requirements(calls)
    # the repository, possibly with one of its extras (``dplib[synthetic] @ git+...``): the
    # extra's requirements are declared by the pinned commit, like dplib's own
    git = [r for r in reqs if GIT_TARGET.fullmatch(r)]
    assert len(git) == 1, reqs
    repo, _, ref = GIT_TARGET.fullmatch(git[0]).group(1).rpartition("@")
    assert repo == S.repository_url() and COMMIT.fullmatch(ref), \
        f"{git[0]} is not pinned to a commit: run `make sync`"
    others = [r for r in reqs if r not in git]
    assert all(EXACT_PIN.fullmatch(r) for r in others), f"unpinned: {others}"
    if path in MASTERS:
        assert [r.split("==")[0] for r in others] == ["otter-grader"]


def test_every_notebook_and_the_autograder_pin_the_same_ref_and_otter():
    refs = {p.stem: S.REF_LINE.search(_setup_source(p)).group(0) for p in NOTEBOOKS}
    assert len(set(refs.values())) == 1, f"notebooks disagree: {refs} (run `make sync`)"
    ref = next(iter(refs.values())).split('"')[1]
    assert COMMIT.fullmatch(ref)
    req = S.REQUIREMENTS.read_text().split()
    assert f"git+{S.repository_url()}@{ref}" in req, "requirements.txt: run `make sync`"
    otters = {S.OTTER_LINE.search(_setup_source(p)).group(0) for p in MASTERS}
    assert len(otters) == 1 and EXACT_PIN.fullmatch(next(iter(otters)).split('"')[1])


def test_pinned_ref_is_a_commit_of_this_history():
    """The pinned commit is HEAD or one of its ancestors: the book's own code, not a commit of
    another branch (or of nobody)."""
    ref = S.REF_LINE.search(_setup_source(NOTEBOOKS[0])).group(0).split('"')[1]
    try:
        inside = _git("rev-parse", "--is-inside-work-tree")
    except FileNotFoundError:
        pytest.skip("git is not installed: the pinned commit cannot be looked up")
    if inside.returncode != 0:
        pytest.skip("not a git checkout: the pinned commit cannot be looked up")
    if _git("cat-file", "-e", f"{ref}^{{commit}}").returncode != 0:
        if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
            pytest.skip(f"shallow clone without the history that holds {ref}")
        pytest.fail(f"BOOK_REF {ref} is not a commit of this repository: run `make sync`")
    assert _git("merge-base", "--is-ancestor", ref, "HEAD").returncode == 0, \
        f"BOOK_REF {ref} is not an ancestor of HEAD: run `make sync`"


def test_sync_refuses_a_setup_cell_that_installs_unpinned():
    unpinned = ('BOOK_REPO = "x"\nBOOK_REF = "y"\n'
                'subprocess.run(["pip", "install", f"git+{BOOK_REPO}"])\n')
    with pytest.raises(ValueError, match="BOOK_REF"):
        S.pin_setup_source(unpinned, "u", "0" * 40, None)
    with pytest.raises(ValueError, match="BOOK_REF line"):
        S.pin_setup_source('BOOK_REPO = "x"\n', "u", "0" * 40, None)
    with pytest.raises(ValueError, match="ref"):
        S.book_ref("no-such-ref-anywhere")


# ---- the assignments' tests.zip -----------------------------------------------------------------

@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The first assignment generated twice (tests not run): without and with a URL."""
    out = tmp_path_factory.mktemp("assignments")
    master = MASTERS[0]
    local = A.generate(master, out / "local", run_tests=False)
    published = out / "published"
    online = A.generate(master, out / "online", url=published.as_uri(), run_tests=False)
    (published / master.stem).mkdir(parents=True)
    return local, online, published / master.stem / "tests.zip"


def _tampered(zip_bytes: bytes) -> bytes:
    """The same zip with one public test replaced (code the grader would run)."""
    src, buf = zipfile.ZipFile(io.BytesIO(zip_bytes)), io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for i, name in enumerate(sorted(src.namelist())):
            dst.writestr(name, "import os\nos.mkdir('pwned')\n" if i == 0 else src.read(name))
    return buf.getvalue()


def test_student_notebook_carries_the_sha256_of_its_tests_zip(generated):
    local, online, _ = generated
    for g in (local, online):
        sha = hashlib.sha256(g.tests_zip.read_bytes()).hexdigest()
        assert g.tests_sha256 == sha
        setup = _setup_source(g.student)
        assert f'TESTS_SHA256 = "{sha}"' in setup
        assert f'OTTER = "otter-grader=={metadata.version("otter-grader")}"' in setup
    # the autograder image is pinned too: this otter-grader, the book at the synced commit
    with zipfile.ZipFile(local.autograder) as zf:
        env = zf.read("environment.yml").decode()
    ref = S.REF_LINE.search(_setup_source(MASTERS[0])).group(0).split('"')[1]
    assert f"git+{S.repository_url()}@{ref}" in env
    assert re.search(rf"otter-grader(\[[^\]]*\])?=={re.escape(metadata.version('otter-grader'))}",
                     env)


@pytest.mark.parametrize("where", ["uploaded", "downloaded"])
def test_colab_cell_unpacks_only_the_tests_zip_it_was_made_with(where, generated, tmp_path,
                                                                monkeypatch):
    local, online, published = generated
    g = local if where == "uploaded" else online
    genuine = g.tests_zip.read_bytes()
    target = tmp_path / "tests.zip" if where == "uploaded" else published
    target.write_bytes(_tampered(genuine))
    with pytest.raises(RuntimeError, match="SHA-256"):
        _run_as_colab(_setup_source(g.student), tmp_path, monkeypatch)
    assert not (tmp_path / "tests").exists() and not (tmp_path / "pwned").exists()
    target.write_bytes(genuine)                           # the right zip is unpacked
    _run_as_colab(_setup_source(g.student), tmp_path, monkeypatch)
    assert sorted(p.name for p in (tmp_path / "tests").glob("*.py")) == sorted(
        Path(n).name for n in zipfile.ZipFile(io.BytesIO(genuine)).namelist())


def test_master_notebook_unpacks_no_tests_zip(tmp_path, monkeypatch):
    """The master carries no hash: whatever tests.zip lies next to it is refused."""
    with zipfile.ZipFile(tmp_path / "tests.zip", "w") as zf:
        zf.writestr("tests/q1.py", "OK_FORMAT = False\n")
    with pytest.raises(RuntimeError, match="SHA-256"):
        _run_as_colab(_setup_source(MASTERS[0]), tmp_path, monkeypatch)
    assert not (tmp_path / "tests").exists()


# ---- data sets: SHA-256 before anything is opened ---------------------------------------------

class _Payload:
    """Unpickling this creates a directory: the flag that code ran."""

    def __init__(self, flag: Path):
        self.flag = str(flag)

    def __reduce__(self):
        return os.mkdir, (self.flag,)


def _hostile_cifar(flag: Path) -> bytes:
    """A tar.gz laid out like CIFAR-10's python archive whose batches run code when unpickled."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            blob = pickle.dumps({"data": _Payload(flag), "labels": [0]}, protocol=2)
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return buf.getvalue()


def _payload_is_live(archive: bytes, flag: Path) -> None:
    """Loading one batch with plain pickle does run the payload (so the checks below can
    tell whether the loader loaded it)."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        member = tar.extractfile("cifar-10-batches-py/test_batch")
        pickle.load(member, encoding="latin1")
    assert flag.is_dir()
    flag.rmdir()


def test_dataset_pins_are_sha256():
    pins = list(ds.MNIST_FILES.values()) + [ds.CIFAR10_FILE[1]]
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pins), pins


def test_cached_cifar_archive_with_another_sha256_is_deleted_unpickled_never(tmp_path):
    flag = tmp_path / "flag"
    archive = _hostile_cifar(flag)
    _payload_is_live(archive, flag)
    cached = tmp_path / "cache" / "cifar10" / ds.CIFAR10_FILE[0]
    cached.parent.mkdir(parents=True)
    cached.write_bytes(archive)
    with pytest.raises(ValueError, match="SHA-256"):
        ds.load_cifar10(tmp_path / "cache")
    assert not flag.exists(), "the archive was unpickled before its hash was checked"
    assert not cached.exists(), "a file with the wrong hash stays in the cache"


def test_downloaded_cifar_archive_with_another_sha256_is_not_kept(tmp_path, monkeypatch):
    flag = tmp_path / "flag"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / ds.CIFAR10_FILE[0]).write_bytes(_hostile_cifar(flag))
    monkeypatch.setattr(ds, "CIFAR10_MIRRORS", (mirror.as_uri() + "/",))
    with pytest.raises(RuntimeError, match="SHA-256"):
        ds.load_cifar10(tmp_path / "cache", download=True)
    assert not flag.exists()
    assert not list((tmp_path / "cache" / "cifar10").iterdir())


def test_cifar_batches_that_name_other_code_are_refused_even_with_the_right_hash(
        tmp_path, monkeypatch):
    """Second line of defence: the unpickler builds arrays, never calls anything else."""
    flag = tmp_path / "flag"
    archive = _hostile_cifar(flag)
    cached = tmp_path / "cache" / "cifar10" / ds.CIFAR10_FILE[0]
    cached.parent.mkdir(parents=True)
    cached.write_bytes(archive)
    monkeypatch.setattr(ds, "CIFAR10_FILE",
                        (ds.CIFAR10_FILE[0], hashlib.sha256(archive).hexdigest()))
    with pytest.raises(pickle.UnpicklingError, match="mkdir"):
        ds.load_cifar10(tmp_path / "cache")
    assert not flag.exists()


def test_cached_mnist_file_with_another_sha256_is_refused(tmp_path):
    import gzip
    cached = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    cached.parent.mkdir()
    cached.write_bytes(gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0, 1, 7])))
    with pytest.raises(ValueError, match="SHA-256"):
        ds.load_mnist(tmp_path)
    assert not cached.exists()


# ---- Hugging Face models: a pinned revision or nothing -----------------------------------------

@pytest.fixture
def fake_transformers(monkeypatch):
    """A stand-in ``transformers`` that records every ``from_pretrained`` call (no network)."""
    import torch
    calls: list[tuple[str, str, dict]] = []

    class _LM(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None):
            return None

    def loader(kind, make):
        def from_pretrained(name, **kw):
            calls.append((kind, name, kw))
            return make()
        return types.SimpleNamespace(from_pretrained=from_pretrained)

    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = loader("tokenizer", lambda: types.SimpleNamespace(eos_token_id=0))
    fake.AutoModelForCausalLM = loader("model", _LM)
    monkeypatch.setitem(sys.modules, "transformers", fake)
    return calls


@pytest.mark.parametrize("revision", [None, "main", "v1.0", "607a30d", "A" * 40])
def test_hf_loader_refuses_an_unpinned_model(revision, fake_transformers):
    with pytest.raises(ValueError, match="revision"):
        icl_hf.HFCausalLM("EleutherAI/pythia-70m", revision=revision, device="cpu")
    assert fake_transformers == []


def test_hf_loader_refuses_a_moving_revision_of_a_pinned_model(fake_transformers):
    with pytest.raises(ValueError, match="revision"):
        icl_hf.HFCausalLM("gpt2", revision="main", device="cpu")
    assert fake_transformers == []


def test_hf_loader_refuses_before_importing_transformers(monkeypatch):
    """The check needs no ``transformers``: it runs before the import is even tried."""
    monkeypatch.setitem(sys.modules, "transformers", None)     # import would fail
    with pytest.raises(ValueError, match="revision"):
        icl_hf.HFCausalLM("EleutherAI/pythia-70m", device="cpu")


def test_hf_loader_loads_the_pinned_commit_from_safetensors(fake_transformers):
    icl_hf.HFCausalLM("gpt2", device="cpu")
    pin = icl_hf.PINNED_REVISIONS["gpt2"]
    assert COMMIT.fullmatch(pin)
    assert [(k, n) for k, n, _ in fake_transformers] == [("tokenizer", "gpt2"), ("model", "gpt2")]
    for _, _, kw in fake_transformers:
        assert kw["revision"] == pin and kw["trust_remote_code"] is False
    assert fake_transformers[1][2]["use_safetensors"] is True
    other = "b" * 40
    icl_hf.HFCausalLM("EleutherAI/pythia-70m", revision=other, device="cpu")
    assert fake_transformers[-1][2]["revision"] == other
