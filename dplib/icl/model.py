"""Language models for in-context learning behind one interface.

Every model here answers two questions about a :class:`~dplib.icl.prompts.PromptBatch`:

* ``label_logprobs(batch)`` — for each prompt, log-probabilities of the task's labels as the next
  word (classification by scoring the label words, as done with GPT-3 in DP-ICL);
* ``next_token_logprobs(batch)`` — for each prompt (demonstrations + a prefix), the log-probability
  of every token of the model's vocabulary coming next (generation, one token at a time);

plus ``vocabulary``, ``encode``/``decode`` for token ids. DP-ICL and private few-shot generation
(:mod:`~dplib.icl.aggregation`, :mod:`~dplib.icl.fewshot`) only use this interface, so they run
unchanged on either implementation:

:class:`OfflineICL` — a small in-context learner that runs anywhere, offline, on a CPU
    It is **a stand-in for a large language model, not one.** What it shares with an LLM doing
    ICL: its weights are fixed (word vectors and a bigram "grammar" estimated once from a public
    corpus, :func:`dplib.icl.data.public_corpus`); its output is a function of the prompt alone —
    instruction, demonstrations, query — and changes when the demonstrations change; it has some
    zero-shot knowledge (common words, label names) and learns the rest of the task from the
    demonstrations: its accuracy grows with their number (the tests check it), it copies the
    labels of demonstrations that resemble the query, and, like GPT-3, it is biased toward the
    labels that are frequent in its prompt.

    *Classification* adds to a zero-shot score one attention read-out over the prompt: the
    query attends to every demonstration with a weight that grows with their similarity and reads
    out its label (the formula is in :class:`OfflineICL`). Reading labels off demonstrations by
    attention is what trained transformers were found to do in context: linear attention over
    (x_i, y_i) pairs computes one step of gradient descent on the demonstrations (von Oswald et
    al. 2023, "Transformers learn in-context by gradient descent", ICML); the stand-in uses
    softmax attention.

    *Generation* copies patterns from the demonstrations as induction heads do (Olsson et al.
    2022, "In-context learning and induction heads"): the next word after the context (u, v)
    follows the trigram statistics of the demonstrations, smoothed toward the public grammar,

        p(w | u, v, prompt) ∝ c_demos(u, v, w) + κ·p(w | v, prompt),  backing off to the
        demonstrations' bigrams and then to the public trigram/bigram model (details in
        :meth:`OfflineICL.next_token_logprobs`).

    What it lacks: world knowledge beyond its small public corpus, long-range context (two words
    of history in generation), and any understanding beyond shared words and co-occurrence. The
    privacy mechanisms do not care: they treat the model as a black box.

:class:`~dplib.icl.hf.HFCausalLM` (in :mod:`dplib.icl.hf`, importable from here too) — any
    Hugging Face causal LM (GPT-2, Llama, …) when ``transformers`` is installed and the weights
    can be loaded (e.g. in Colab). It renders each prompt to text, runs the model, and scores the
    first token of each label word.
"""
from __future__ import annotations

import functools
import math
import zlib
from typing import Sequence

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from .._constraints import Integer, Interval, constrained, unconstrained
from .._validate import as_generator
from ._params import COUNT, NONNEG, POSITIVE
from .data import STOPWORDS, public_corpus, tokenize, vocabulary
from .hf import PINNED_REVISIONS, HFCausalLM, transformers_available  # re-exported
from .prompts import PromptBatch

__all__ = ["HashingEmbedder", "WordVectors", "OfflineICL", "HFCausalLM", "transformers_available",
           "generate", "EOS", "PINNED_REVISIONS"]

#: The token that starts and ends every text (as GPT-2's ``<|endoftext|>``).
EOS = "</s>"
UNK = "<unk>"


class HashingEmbedder:
    """A fixed text embedding of any text: signed hashed words, weighted, ℓ2-normalised.

    Feature j of a text sums weight(w)·sign(w) over its words w with crc32(w) mod ``n_features``
    = j, the sign being one more bit of the hash (Weinberger et al. 2009, "Feature hashing for
    large scale multitask learning", ICML). crc32 is stable across runs and machines (Python's
    ``hash`` is not). ``weights`` maps a word to its weight (e.g. an IDF; words missing from it
    get ``default_weight``); ``stopwords`` are dropped. Cosine similarity = dot product.
    """

    @constrained(n_features=Integer(min=16), default_weight=POSITIVE)
    def __init__(self, n_features: int = 2**14, *, weights: dict[str, float] | None = None,
                 default_weight: float = 1.0, stopwords: frozenset = frozenset()):
        self.n_features = n_features
        self.weights = dict(weights or {})
        self.default_weight = default_weight
        self.stopwords = frozenset(stopwords)
        self._hash: dict[str, tuple[int, float]] = {}

    def _feature(self, word: str) -> tuple[int, float]:
        hit = self._hash.get(word)
        if hit is None:
            h = zlib.crc32(word.encode())
            w = self.weights.get(word, self.default_weight)
            hit = (h % self.n_features, w if (h >> 31) & 1 == 0 else -w)
            self._hash[word] = hit
        return hit

    @unconstrained("embeds a list of texts; tokenize refuses a non-string")
    def embed(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """A sparse (len(texts), n_features) matrix with unit-norm rows (empty texts: zero).
        A copy of the cached matrix: a caller that writes into it cannot change later calls."""
        return self._embed_cached(tuple(texts)).copy()

    @functools.lru_cache(maxsize=64)
    def _embed_cached(self, texts: tuple[str, ...]) -> sparse.csr_matrix:
        rows, cols, vals = [], [], []
        for r, text in enumerate(texts):
            for g in tokenize(text):
                if g in self.stopwords:
                    continue
                j, v = self._feature(g)
                rows.append(r)
                cols.append(j)
                vals.append(v)
        m = sparse.csr_matrix((np.asarray(vals, float), (rows, cols)),
                              shape=(len(texts), self.n_features))
        m.sum_duplicates()
        norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
        norms[norms == 0] = 1.0
        return sparse.csr_matrix(sparse.diags(1.0 / norms) @ m)

    @unconstrained("two calls of embed, which tokenize checks")
    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Dense cosine similarities between two lists of texts, shape (len(a), len(b))."""
        return np.asarray((self.embed(a) @ self.embed(b).T).todense())


class WordVectors:
    """"Pretrained" word vectors: a truncated SVD of the positive pointwise mutual information of
    word co-occurrence in sentences of a public corpus (Levy & Goldberg 2014, "Neural word
    embedding as implicit matrix factorization", NeurIPS; Bullinaria & Levy 2007).

    A text's vector is the IDF-weighted sum of its known content words' vectors, normalised;
    unknown words are ignored. Words that share contexts in the corpus get similar vectors — the
    toy model's only "world knowledge".
    """

    @constrained(dim=COUNT)
    def __init__(self, corpus: Sequence[str], *, dim: int = 16,
                 stopwords: frozenset = frozenset()):
        docs = [[w for w in tokenize(t) if w not in stopwords] for t in corpus]
        self.words = tuple(sorted({w for d in docs for w in d}))
        self.index = {w: i for i, w in enumerate(self.words)}
        v = len(self.words)
        occ = np.zeros((len(docs), v))
        for r, d in enumerate(docs):
            occ[r, [self.index[w] for w in d]] = 1.0
        df = occ.sum(axis=0)
        #: inverse document frequency log(N/(1+df)) of every known word (unknown: log N)
        self.idf = dict(zip(self.words, np.log(len(docs) / (1.0 + df))))
        self.max_idf = math.log(len(docs))
        co = occ.T @ occ
        np.fill_diagonal(co, 0.0)
        total = co.sum()
        pw = co.sum(axis=1) / total
        with np.errstate(divide="ignore"):
            pmi = np.log(co / total) - np.log(np.outer(pw, pw))
        ppmi = np.where(np.isfinite(pmi), np.maximum(pmi, 0.0), 0.0)
        u, sv, _ = np.linalg.svd(ppmi, hermitian=True)
        k = min(dim, v)
        vec = u[:, :k] * np.sqrt(sv[:k])
        vec = vec * np.sign(vec[np.argmax(np.abs(vec), axis=0), np.arange(k)])  # fix SVD signs
        self.vectors = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
        self.stopwords = frozenset(stopwords)

    @unconstrained("embeds a list of texts; tokenize refuses a non-string")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm text vectors, shape (len(texts), dim) (zero for texts with no known word).
        A copy of the cached array: a caller that writes into it cannot change later calls."""
        return self._embed_cached(tuple(texts)).copy()

    @functools.lru_cache(maxsize=64)
    def _embed_cached(self, texts: tuple[str, ...]) -> np.ndarray:
        out = np.zeros((len(texts), self.vectors.shape[1]))
        for r, t in enumerate(texts):
            for w in tokenize(t):
                j = self.index.get(w)
                if j is not None and w not in self.stopwords:
                    out[r] += self.idf[w] * self.vectors[j]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


@functools.lru_cache(maxsize=1)
def _pretrained() -> tuple[WordVectors, HashingEmbedder]:
    """The toy model's fixed "weights", computed once from the public corpus."""
    wv = WordVectors(public_corpus(), stopwords=STOPWORDS)
    lex = HashingEmbedder(weights=wv.idf, default_weight=wv.max_idf, stopwords=STOPWORDS)
    return wv, lex


@functools.lru_cache(maxsize=2)
def _public_ngrams(vocab: tuple[str, ...]) -> tuple[np.ndarray, sparse.csr_matrix]:
    """Counts of the public corpus: the bigram probabilities p_public(w | v), add-0.01 smoothed
    (a dense (V, V) matrix), and the trigram counts as a sparse (V², V) matrix with row u·V + v.
    ``</s>`` (id 0) pads every sentence; unknown words map to id 1."""
    index = {w: i for i, w in enumerate(vocab)}
    u, v, w = [], [], []
    for text in public_corpus():
        ids = [0, 0] + [index.get(t, 1) for t in tokenize(text)] + [0]
        u.extend(ids[:-2])
        v.extend(ids[1:-1])
        w.extend(ids[2:])
    n = len(vocab)
    u, v, w = (np.asarray(x, np.int64) for x in (u, v, w))
    bi = np.bincount(v * n + w, minlength=n * n).reshape(n, n) + 0.01
    tri = sparse.csr_matrix((np.ones(u.size), (u * n + v, w)), shape=(n * n, n))
    tri.sum_duplicates()
    return bi / bi.sum(axis=1, keepdims=True), tri


def _public_trigram(vocab: tuple[str, ...], u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """p_public(w | u, v) = (c(u, v, w) + p_public(w | v)) / (c(u, v) + 1), shape (B, V)."""
    bi, tri = _public_ngrams(vocab)
    c = tri[u * len(vocab) + v].toarray()
    return (c + bi[v]) / (c.sum(axis=1, keepdims=True) + 1.0)


class OfflineICL:
    """The book's offline in-context learner (see the module docstring for what it is and is not).

    Classification logit of label c for a prompt with query q and demonstrations (x_i, y_i):

        logit_c = β₀·cos_sem(q, ℓ_c) + λ·Σ_{i: y_i = c} a_i(q),
        a_i(q) = exp(β·sim(q, x_i)) / (exp(β·s₀) + Σ_j exp(β·sim(q, x_j))),
        sim(q, x) = (1 − μ)·cos_lex(q, x) + μ·cos_sem(q, x),

    with ℓ_c the label's name (and description), cos_sem the cosine of the public word-vector
    embeddings (:class:`WordVectors`) and cos_lex that of IDF-weighted hashed content words
    (:class:`HashingEmbedder`). The read-out is softmax attention with keys x_i and values y_i
    plus a "sink" of score s₀ that lets the query attend to nothing. Three behaviours of LLM
    in-context learning follow: a zero-shot prior from pretraining (β₀), copying the labels of
    similar demonstrations (λ, an induction-head-like lookup), and a pull toward the labels that
    are frequent among the demonstrations, since every demonstration gets some attention (the
    "majority label bias" of Zhao et al. 2021, "Calibrate before use", ICML). The last one makes
    prompts with different demonstrations disagree — the variance an ensemble of prompts
    averages away.

    Parameters
    ----------
    zero_shot_strength : β₀ ≥ 0, weight of the pretrained knowledge of the label names.
    copy_strength : λ ≥ 0, weight of a demonstration's similarity to the query.
    sharpness : β > 0, inverse temperature of the attention over the demonstrations.
    sink : s₀ ∈ [-1, 1], the score of attending to nothing.
    semantic_mix : μ ∈ [0, 1], how much of the similarity is semantic rather than lexical.
    grammar_strength : κ > 0, how strongly generation falls back on the public grammar.
    copy_bias : γ ≥ 0, how strongly generation favours words present in the demonstrations.
    """

    @constrained(zero_shot_strength=NONNEG, copy_strength=NONNEG, sharpness=POSITIVE,
                 sink=Interval(-1.0, 1.0, closed="both"),
                 semantic_mix=Interval(0.0, 1.0, closed="both"),
                 grammar_strength=POSITIVE, copy_bias=NONNEG)
    def __init__(self, *, zero_shot_strength: float = 4.0, copy_strength: float = 3.0,
                 sharpness: float = 8.0, sink: float = 0.5, semantic_mix: float = 0.3,
                 grammar_strength: float = 0.1, copy_bias: float = 2.0):
        self.zero_shot_strength, self.copy_strength = zero_shot_strength, copy_strength
        self.sharpness, self.sink, self.semantic_mix = sharpness, sink, semantic_mix
        self.grammar_strength, self.copy_bias = grammar_strength, copy_bias
        self.word_vectors, self.lexical = _pretrained()
        self.vocabulary: tuple[str, ...] = (EOS, UNK) + vocabulary()
        self._index = {w: i for i, w in enumerate(self.vocabulary)}
        _public_ngrams(self.vocabulary)            # build the public n-gram counts once

    # -- tokens ---------------------------------------------------------------------------------
    @property
    def eos_id(self) -> int:
        return 0

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm lexical embeddings of ``texts``, shape (len(texts), d): what ESA compares.

        Every model of this package has ``embed``; here it is the hashed TF-IDF words of the
        public corpus (:class:`HashingEmbedder`), a function of each text alone.
        """
        return self.lexical.embed(list(texts)).toarray()

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def encode(self, text: str) -> list[int]:
        """Word ids of ``text`` (unknown words map to ``<unk>``)."""
        return [self._index.get(w, 1) for w in tokenize(text)]

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def decode(self, ids: Sequence[int]) -> str:
        """The text of a sequence of ids (``</s>`` ends it)."""
        out = []
        for i in ids:
            if int(i) == self.eos_id:
                break
            out.append(self.vocabulary[int(i)])
        return " ".join(out)

    # -- classification -------------------------------------------------------------------------
    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def label_logits(self, batch: PromptBatch) -> np.ndarray:
        """The logits above for every prompt of the batch, shape (B, C). Vectorised: the
        similarities of the distinct queries to the used exemplars are computed once (a sparse
        and a dense product), then gathered for every demonstration slot."""
        if batch.pool_labels is None and (batch.demos >= 0).any():
            raise ValueError("label_logits needs labelled demonstrations (pool_labels is None)")
        tpl = batch.template
        c = len(tpl.labels)
        uq, inv = np.unique(np.asarray(list(batch.queries), dtype=str), return_inverse=True)
        inv = inv.ravel()
        names = [f"{lab} {d}" for lab, d in zip(tpl.labels, tpl.descriptions)] \
            if tpl.descriptions else list(tpl.labels)
        q_sem = self.word_vectors.embed(list(uq))
        logits = self.zero_shot_strength * (q_sem @ self.word_vectors.embed(names).T)[inv]
        demos = batch.demos
        used = np.unique(demos[demos >= 0])
        if used.size:
            # embed the whole pool once (memoised on the pool), then keep the used columns
            pool = tuple(batch.pool_texts)
            mu = self.semantic_mix
            lex = self.lexical.embed(pool)[used]
            sem = self.word_vectors.embed(pool)[used]
            sim = (1.0 - mu) * np.asarray((self.lexical.embed(list(uq)) @ lex.T).todense()) \
                + mu * (q_sem @ sem.T)                                       # (U, |used|)
            col = np.searchsorted(used, np.where(demos >= 0, demos, used[0]))
            # softmax attention over the demonstrations plus a sink with score s₀
            score = np.where(demos >= 0, self.sharpness * sim[inv[:, None], col], -np.inf)
            top = np.maximum(score.max(axis=1, keepdims=True), self.sharpness * self.sink)
            w = np.exp(score - top)
            attn = w / (np.exp(self.sharpness * self.sink - top) + w.sum(axis=1, keepdims=True))
            labels = np.asarray(batch.pool_labels)[np.where(demos >= 0, demos, 0)]
            onehot = labels[..., None] == np.arange(c)                       # (B, k, C)
            logits = logits + self.copy_strength * np.einsum("bk,bkc->bc", attn,
                                                             onehot.astype(float))
        return logits

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def label_logprobs(self, batch: PromptBatch) -> np.ndarray:
        """log p(label | prompt) = log-softmax of :meth:`label_logits`, shape (B, C)."""
        z = self.label_logits(batch)
        return z - logsumexp(z, axis=1, keepdims=True)

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def predict(self, batch: PromptBatch) -> np.ndarray:
        """The most likely label of every prompt (ties: the lowest label index)."""
        return np.argmax(self.label_logits(batch), axis=1)

    # -- generation -----------------------------------------------------------------------------
    @functools.lru_cache(maxsize=16)
    def _pool_trigrams(self, pool: tuple[str, ...]) -> tuple[np.ndarray, ...]:
        """All trigrams (u, v, w) of the pool texts, padded ``</s> </s> text </s>``, grouped by
        text (CSR: start and length of each text's run)."""
        u, v, w, starts = [], [], [], [0]
        for text in pool:
            ids = [self.eos_id, self.eos_id] + self.encode(text) + [self.eos_id]
            u.extend(ids[:-2])
            v.extend(ids[1:-1])
            w.extend(ids[2:])
            starts.append(len(u))
        st = np.asarray(starts, np.int64)
        return (np.asarray(u, np.int64), np.asarray(v, np.int64), np.asarray(w, np.int64),
                st[:-1], np.diff(st))

    def _context(self, prefix: str) -> tuple[int, int]:
        ids = [self.eos_id, self.eos_id] + self.encode(prefix)
        return ids[-2], ids[-1]

    @unconstrained("the model interface, called by the DP-ICL functions with the texts, ids "
                   "and PromptBatch they built")
    def next_token_logprobs(self, batch: PromptBatch) -> np.ndarray:
        """log p(next word | prompt) for every prompt, shape (B, V).

        Context: the last two words (u, v) of the prefix (``</s>``-padded). Hierarchical Dirichlet
        smoothing, most specific first — trigram counts of the demonstrations, then their bigram
        counts, then the public trigram model reweighted toward the words the demonstrations
        contain (a copy bias γ, as LLMs copy tokens from their context) — each level with
        strength κ:

            p(w|u,v) = (c₃(u,v,w) + κ·p₂(w|v)) / (c₃(u,v) + κ),
            p₂(w|v)  = (c₂(v,w) + κ·p_copy(w|u,v)) / (c₂(v) + κ),
            p_copy(w|u,v) ∝ p_public(w|u,v)·(1 + γ·c₁(w)),

        with c₁(w) the number of occurrences of w in the demonstrations.

        Vectorised over prompts and demonstration slots: every slot's trigrams are expanded from
        a CSR index, matched against the prompt's context and counted with ``bincount``.
        """
        vsz = len(self.vocabulary)
        b = len(batch)
        ctx = np.array([self._context(q) for q in batch.queries], dtype=np.int64).reshape(b, 2)
        cu, cv = ctx[:, 0], ctx[:, 1]
        tu, tv, tw, start, length = self._pool_trigrams(tuple(batch.pool_texts))
        rows, slots = np.nonzero(batch.demos >= 0)
        ex = batch.demos[rows, slots]
        n_each = length[ex]
        rep = np.repeat(rows, n_each)
        offs = np.arange(n_each.sum()) - np.repeat(np.cumsum(n_each) - n_each, n_each)
        pos = np.repeat(start[ex], n_each) + offs
        hit2 = tv[pos] == cv[rep]
        hit3 = hit2 & (tu[pos] == cu[rep])
        c1 = np.bincount(rep * vsz + tw[pos], minlength=b * vsz).reshape(b, vsz)
        c2 = np.bincount(rep[hit2] * vsz + tw[pos[hit2]], minlength=b * vsz).reshape(b, vsz)
        c3 = np.bincount(rep[hit3] * vsz + tw[pos[hit3]], minlength=b * vsz).reshape(b, vsz)
        kappa = self.grammar_strength
        pub = _public_trigram(self.vocabulary, cu, cv) * (1.0 + self.copy_bias * c1)
        pub /= pub.sum(axis=1, keepdims=True)
        p2 = (c2 + kappa * pub) / (c2.sum(axis=1, keepdims=True) + kappa)
        p3 = (c3 + kappa * p2) / (c3.sum(axis=1, keepdims=True) + kappa)
        return np.log(p3)


@constrained(max_tokens=COUNT, temperature=NONNEG)
def generate(model, batch: PromptBatch, max_tokens: int = 8, *, temperature: float = 0.0,
             rng=None) -> list[str]:
    """Continue every prompt's prefix with any model of this module (non-private; one text per
    prompt). ``temperature = 0`` decodes greedily; > 0 samples from p^(1/T) (needs ``rng``).
    Stops at the end-of-text token or after ``max_tokens`` tokens; returns prefix + continuation.
    """
    temp = temperature
    gen = None if temp == 0 else as_generator(rng)
    ids: list[list[int]] = [model.encode(q) for q in batch.queries]
    done = np.zeros(len(batch), bool)
    for _ in range(max_tokens):
        step = PromptBatch(batch.template, batch.pool_texts, batch.pool_labels, batch.demos,
                           [model.decode(x) for x in ids], generation=True)
        lp = np.asarray(model.next_token_logprobs(step), dtype=float)
        if gen is None:
            tok = np.argmax(lp, axis=1)
        else:
            z = lp / temp
            p = np.exp(z - z.max(axis=1, keepdims=True))
            cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
            tok = np.minimum((cdf < gen.random((len(batch), 1))).sum(axis=1), lp.shape[1] - 1)
        for i, t in enumerate(tok):
            if done[i]:
                continue
            if int(t) == model.eos_id:
                done[i] = True
            else:
                ids[i].append(int(t))
        if done.all():
            break
    return [model.decode(x) for x in ids]
