"""The book's ICL data files and the SST-2 / AG News loaders (exercised on local files only)."""
import hashlib
import io
import zipfile

import numpy as np
import pytest

from dplib.icl import data as D


def test_files_are_the_deterministic_generator_output():
    for task in D.TASKS:
        content = D.make_book_data(task).encode()
        assert content == (D.DATA_DIR / f"icl_{task}.csv").read_bytes()
        assert hashlib.sha256(content).hexdigest() == D.BOOK_SHA256[task]
        assert len(content) < 200_000


def test_book_data_shapes_labels_and_vocabulary():
    vocab = set(D.vocabulary())
    for task, n_cls in (("sentiment", 2), ("topic", 4)):
        ds = D.load_book_data(task)
        assert len(ds.pool_texts) == 1600 and len(ds.test_texts) == 400
        counts = np.bincount(ds.pool_labels, minlength=n_cls)
        assert counts.min() > 0.8 * 1600 / n_cls          # roughly balanced
        words = {w for t in ds.pool_texts + ds.test_texts for w in D.tokenize(t)}
        assert words <= vocab                             # the model's vocabulary is public
        assert ds.subset(10, 5).pool_texts == ds.pool_texts[:10]


def test_missing_files_are_regenerated_in_memory(tmp_path):
    # an installed dplib without the repository's data/ folder gets the same bytes
    ds = D.load_book_data("sentiment", tmp_path)
    assert ds.pool_texts == D.load_book_data("sentiment").pool_texts


def test_checksum_mismatch_is_refused(tmp_path):
    (tmp_path / "icl_topic.csv").write_text(D.make_book_data("topic").replace("pool", "Pool", 1))
    with pytest.raises(ValueError, match="SHA-256"):
        D.load_book_data("topic", tmp_path)


def test_product_reference_and_profiles():
    ds = D.load_book_data("sentiment")
    lean, (a, b) = D.product_reference(ds, "battery")
    pos, neg = set(D.POSITIVE), set(D.NEGATIVE)
    assert {a, b} <= (pos if lean == "positive" else neg)
    labels = ds.pool_labels[[i for i, t in enumerate(ds.pool_texts) if "battery" in t.split()]]
    assert (labels.mean() > 0.5) == (lean == "positive")
    with pytest.raises(ValueError, match="product must be one of"):
        D.product_reference(ds, "toaster")


def test_public_corpus_has_no_private_associations():
    # no product leans either way in the public text (the leaning is private knowledge)
    corpus = D.public_corpus()
    for p in D.PRODUCTS[:4]:
        rows = [set(D.tokenize(t)) for t in corpus if p in t.split()]
        pos = sum(bool(r & set(D.POSITIVE[:D.N_COMMON])) for r in rows)
        neg = sum(bool(r & set(D.NEGATIVE[:D.N_COMMON])) for r in rows)
        assert abs(pos - neg) < 4 * np.sqrt(pos + neg)


def _md5(b: bytes) -> str:
    return hashlib.md5(b).hexdigest()


def test_download_verifies_and_caches(tmp_path):
    src = tmp_path / "remote.csv"
    src.write_bytes(b'"1","t","d"\n')
    cache = tmp_path / "cache"
    path = D.download("agnews_test", cache, url=src.as_uri(), md5=_md5(src.read_bytes()))
    assert path.read_bytes() == src.read_bytes()
    # cached: a broken URL is never touched when the checksum of the cached file is right
    assert D.download("agnews_test", cache, url="file:///nonexistent",
                      md5=_md5(src.read_bytes())) == path
    with pytest.raises(ValueError, match="MD5"):
        D.download("agnews_train", cache, url=src.as_uri(), md5="0" * 32)
    assert not list(cache.glob("*.part")) and not (cache / "ag_news_train.csv").exists()


def test_sst2_and_agnews_loaders_on_local_files(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("SST-2/train.tsv", "sentence\tlabel\n" +
                   "".join(f"good film {i} \t1\nbad film {i} \t0\n" for i in range(30)))
        z.writestr("SST-2/dev.tsv", "sentence\tlabel\nfine\t1\nawful\t0\n")
    zpath = tmp_path / "sst.zip"
    zpath.write_bytes(buf.getvalue())
    ds = D.load_sst2(tmp_path / "c1", n_pool=20, url=zpath.as_uri(),
                     md5=_md5(buf.getvalue()))
    assert len(ds.pool_texts) == 20 and ds.test_texts == ("fine", "awful")
    assert all(("good" in t) == (y == 1) for t, y in zip(ds.pool_texts, ds.pool_labels))

    files = {}
    for name, rows in (("agnews_train", '"3","Stocks up","Wall St rallies"\n"2","Win","Team '
                                        'wins"\n'), ("agnews_test", '"1","Vote","Polls"\n')):
        p = tmp_path / f"{name}.csv"
        p.write_text(rows)
        files[name] = p
    ag = D.load_agnews(tmp_path / "c2", n_pool=None, n_test=None,
                       url={k: v.as_uri() for k, v in files.items()},
                       md5={k: _md5(v.read_bytes()) for k, v in files.items()})
    assert ag.pool_texts == ("Stocks up Wall St rallies", "Win Team wins")
    np.testing.assert_array_equal(ag.pool_labels, [2, 1])
    assert ag.labels[ag.test_labels[0]] == "world"


@pytest.mark.parametrize("call, match", [
    (lambda: D.make_book_data("poetry"), "task must be one of"),
    (lambda: D.load_book_data("sentiment").subset(5000), r"n_pool must be in \[1, 1600\]"),
    (lambda: D.download("imdb"), "name must be one of"),
    (lambda: D.tokenize(3), "text must be a string"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
