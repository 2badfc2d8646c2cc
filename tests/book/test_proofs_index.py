"""The proofs layer, the index and one meaning per symbol, checked on the sources.

* Every ``{prf:theorem}``, ``{prf:proposition}``, ``{prf:lemma}`` and ``{prf:corollary}`` of the
  chapters and of the appendix is followed by a proof, links to one in the appendix
  (chapters/proofs.md), or carries a citation with the number of the result in the source.
* The appendix's proof links resolve, and each linked section contains a proof.
* The index page is in the table of contents and links the generated index (genindex); every
  glossary term, every theorem-like statement and every ``dplib`` function a chapter calls has an
  index entry in the sources (and, when a built site is at hand, in the generated index itself).
* No symbol of notation.md is *defined* twice with different meanings in one chapter.
* The constants quoted in the appendix's proofs are recomputed.

``python tests/book/test_proofs_index.py --write`` regenerates the list of ``dplib`` functions
by chapter in chapters/book_index.md (the part between the two marker comments).
"""
from __future__ import annotations

import ast
import math
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
PROOFS = ROOT / "chapters" / "proofs.md"
INDEX_PAGE = ROOT / "chapters" / "book_index.md"
GLOSSARY = ROOT / "chapters" / "glossary.md"
NOTATION = ROOT / "chapters" / "notation.md"

STATEMENT_KINDS = ("theorem", "proposition", "lemma", "corollary")
DIRECTIVE = re.compile(
    r"^(?P<fence>:{3,}|`{3,})\{prf:(?P<kind>\w+)\}(?P<title>[^\n]*)\n(?P<body>(?:.*\n)*?)(?P=fence)[ \t]*$",
    re.M)
# "Theorem 3.20", "Lemma 4", "Proposition 12", "Corollary 3.2", "Theorem A.1", "Prop. 7", "Thm 8"
NUMBERED = re.compile(r"\b(?:Theorems?|Lemmas?|Propositions?|Corollary|Corollaries|Prop\.|Thm\.?)"
                      r"\s+[A-Z]?\d+(?:\.\d+)*")
PROOF_LINK = re.compile(r"\{ref\}`(?:[^`<]*<)?(proof-[\w-]+)>?`")
BEGIN, END = "<!-- dplib functions: begin (generated) -->", "<!-- dplib functions: end -->"


def _markdown(path: Path) -> str:
    if path.suffix == ".md":
        return path.read_text(encoding="utf-8")
    nb = nbformat.read(path, as_version=4)
    return "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def _sources() -> list[Path]:
    return [*CHAPTERS, *sorted((ROOT / "chapters").glob("*.md"))]


def _statements(text: str):
    """(kind, title, label, directive text, text that follows it) for every theorem-like box."""
    for m in DIRECTIVE.finditer(text):
        if m.group("kind") not in STATEMENT_KINDS:
            continue
        label = re.search(r":label:\s*(\S+)", m.group("body"))
        yield (m.group("kind"), m.group("title").strip(), label.group(1) if label else None,
               m.group(0), text[m.end():], text[:m.start()])


def _following_paragraph(after: str) -> str:
    """The first paragraph after a directive (stopping at the next directive or heading)."""
    rest = after.lstrip("\n")
    para = re.split(r"\n\s*\n|\n(?=[:`]{3,}\{|#)", rest, maxsplit=1)[0]
    return para


def _proof_sections() -> dict[str, str]:
    """label -> text of the appendix section that the label opens."""
    text = PROOFS.read_text(encoding="utf-8")
    parts = re.split(r"^\((proof-[\w-]+)\)=\n", text, flags=re.M)
    sections = {}
    for label, body in zip(parts[1::2], parts[2::2]):
        sections[label] = re.split(r"^\([\w-]+\)=\n", body, maxsplit=1, flags=re.M)[0]
    return sections


def _justification(directive: str, after: str) -> str | None:
    """Why a statement needs no proof in place, or None."""
    rest = after.lstrip("\n")
    if re.match(r"[:`]{3,}\{prf:proof\}", rest) or rest.startswith("*Proof.*"):
        return "proof follows"
    links = PROOF_LINK.findall(directive)
    sections = _proof_sections()
    if links and all(label in sections and "{prf:proof}" in sections[label] for label in links):
        return "proved in the appendix"
    if "{cite" in directive and (NUMBERED.search(directive)
                                 or NUMBERED.search(_following_paragraph(after))):
        return "cited with its number"
    return None


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_every_statement_is_proved_or_cited_with_its_number(path):
    missing = []
    for kind, title, label, directive, after, _ in _statements(_markdown(path)):
        if _justification(directive, after) is None:
            missing.append(f"{kind} {label or title!r}")
    assert not missing, (
        f"{path.name}: statements with neither a proof (a {{prf:proof}} right after it, or a "
        f"{{ref}}`proof-...` link to chapters/proofs.md) nor a citation with a theorem number: "
        f"{missing}")


def test_justification_check_can_fail():
    """The check above rejects a bare statement and a citation without a number."""
    bare = ":::{prf:theorem} Something\n:label: thm-x\n\nA claim.\n:::\n"
    cited = ":::{prf:theorem} Something {cite:p}`DworkRoth2014`\n:label: thm-y\n\nA claim.\n:::\n"
    numbered = cited.replace("A claim.", "A claim (Theorem 3.20 of the reference).")
    proved = bare + "\n:::{prf:proof}\nIt is so.\n:::\n"
    linked = bare.replace("A claim.", "A claim. Proved in {ref}`proof-thm-comp-basic`.")
    broken = bare.replace("A claim.", "A claim. Proved in {ref}`proof-nowhere`.")
    verdict = {name: _justification(*next(_statements(text))[3:5])
               for name, text in [("bare", bare), ("cited", cited), ("numbered", numbered),
                                  ("proved", proved), ("linked", linked), ("broken", broken)]}
    assert verdict == {"bare": None, "cited": None, "numbered": "cited with its number",
                       "proved": "proof follows", "linked": "proved in the appendix",
                       "broken": None}


def test_appendix_proves_the_core_results():
    """The appendix has a proof section for each result the book promises to prove, and every
    chapter statement it names exists."""
    sections = _proof_sections()
    promised = ["post-processing", "thm-comp-basic", "thm-comp-advanced", "thm-gauss-classic",
                "thm-gauss-analytic", "thm-comp-rdp-rules", "thm-comp-pld", "thm-sgm-rdp",
                "thm-group", "thm-amplification"]
    for label in promised:
        assert f"proof-{label}" in sections, f"no section (proof-{label})= in proofs.md"
    labels = set()
    for path in _sources():
        labels.update(re.findall(r":label:\s*(\S+)", _markdown(path)))
    refs = set(re.findall(r"\{prf:ref\}`(?:[^`<]*<)?([\w-]+)>?`", PROOFS.read_text()))
    assert refs <= labels, f"proofs.md refers to unknown labels: {sorted(refs - labels)}"
    # every link from a chapter to the appendix has its target
    for path in CHAPTERS:
        for label in PROOF_LINK.findall(_markdown(path)):
            assert label in sections, f"{path.name}: link to missing appendix section {label}"


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_appendix_and_index_page_are_in_the_navigation():
    files = _toc_files()
    assert "chapters/proofs" in files
    assert "chapters/book_index" in files
    page = INDEX_PAGE.read_text(encoding="utf-8")
    assert re.search(r"\{ref\}`(?:[^`]*<)?genindex>?`", page), "the index page must link genindex"


def glossary_terms() -> list[str]:
    text = GLOSSARY.read_text(encoding="utf-8")
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert block, "glossary.md has no {glossary} directive"
    return [line.strip() for line in block.group(1).splitlines()
            if line and not line[0].isspace()]


def _index_entries(text: str) -> list[str]:
    """The terms of every {index} directive and role in a source text."""
    entries = []
    for arg in re.findall(r"^[`:]{3,}\{index\}\s*(.+)$", text, re.M):
        entries.append(arg)
    for arg in re.findall(r"\{index\}`([^`]*)`", text):
        entries.append(arg)
    terms = []
    for entry in entries:
        entry = re.sub(r"^.*<(.*)>$", r"\1", entry)
        kind, _, rest = entry.partition(":")
        if kind.strip() not in ("single", "pair", "triple", "see", "seealso"):
            rest = entry
        terms.extend(t.strip() for t in rest.split(";") if t.strip())
    return terms


def test_every_glossary_term_is_in_the_index():
    """Sphinx's {glossary} directive makes an index entry of every term, so each term must be a
    top-level line of that directive; if a built site is at hand (DPBOOK_SITE or _build/html),
    the generated index must list every term."""
    terms = glossary_terms()
    assert len(terms) >= 20 and len(set(terms)) == len(terms), terms
    site = Path(os.environ.get("DPBOOK_SITE", ROOT / "_build" / "html"))
    genindex = site / "genindex.html"
    if not genindex.exists():
        pytest.skip(f"no built index at {genindex}; the terms are indexed by the glossary directive")
    html = genindex.read_text(encoding="utf-8")
    import html as _html
    names = {_html.unescape(re.sub(r"<[^>]+>", "", n)).strip().lower()
             for n in re.findall(r"<a [^>]*>(.*?)</a>", html, re.S)}
    missing = [t for t in terms if t.lower() not in names]
    assert not missing, f"glossary terms missing from the generated index: {missing}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.name)
def test_every_statement_has_an_index_entry(path):
    missing = []
    for kind, title, label, directive, after, before in _statements(_markdown(path)):
        tail = before.rstrip("\n").rsplit("\n", 3)
        if not re.search(r"\{index\}", "\n".join(tail[-2:])):
            missing.append(label or title)
    assert not missing, f"{path.name}: statements without an {{index}} entry just before: {missing}"


# --- dplib functions by chapter -------------------------------------------------------------

def chapter_title(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^# (.+)$", cell.source, re.M)
            if m:
                return m.group(1).strip()
    return path.stem


def dplib_functions(path: Path) -> list[str]:
    """Dotted names of the dplib functions and classes a chapter's code imports or calls
    (constants, written in capitals, are left out)."""
    nb = nbformat.read(path, as_version=4)
    names = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = "\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!")))
        tree = ast.parse(src)
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dplib":
                for a in node.names:
                    names.add(f"{node.module}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "dplib":
                        aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "dplib"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                parts, f = [], node.func
                while isinstance(f, ast.Attribute):
                    parts.append(f.attr)
                    f = f.value
                if isinstance(f, ast.Name) and f.id in aliases and parts:
                    names.add(".".join([aliases[f.id], *reversed(parts)]))
    return sorted(n for n in names if not n.rsplit(".", 1)[1].isupper())


def function_entry(name: str) -> str:
    module, func = name.rsplit(".", 1)
    return f"{func}() ({module})"


def functions_section() -> str:
    lines = [BEGIN, ""]
    for path in CHAPTERS:
        funcs = dplib_functions(path)
        lines += [f"({'index-' + path.stem.replace('_', '-')})=",
                  f"### {{doc}}`{path.stem}`", ""]
        for name in funcs:
            lines.append(f"```{{index}} single: {function_entry(name)}; {chapter_title(path)}\n```")
        lines += ["", ", ".join(f"`{n}`" for n in funcs) + ".", ""]
    lines.append(END)
    return "\n".join(lines)


def test_every_dplib_function_a_chapter_calls_is_indexed():
    page = INDEX_PAGE.read_text(encoding="utf-8")
    assert BEGIN in page and END in page, "chapters/book_index.md lost its generated section"
    current = page[page.index(BEGIN):page.index(END) + len(END)]
    entries = set(_index_entries(current))
    missing = []
    for path in CHAPTERS:
        funcs = dplib_functions(path)
        assert funcs, f"{path.name}: found no dplib calls; the scanner is broken"
        missing += [f"{path.stem}: {n}" for n in funcs if function_entry(n) not in entries]
    assert not missing, ("dplib functions without an index entry (run `python "
                         f"tests/book/test_proofs_index.py --write`): {missing}")


# --- one meaning per symbol -----------------------------------------------------------------

STOP = {"a", "an", "the", "of", "for", "in", "on", "to", "and", "or", "its", "their", "each",
        "one", "this", "that", "is", "be", "as", "with", "by", "at", "from", "here", "now", "all",
        "any", "some", "our", "we", "it"}
# words that name the same thing
SYNONYMS = {"probability": "rate", "fraction": "rate", "count": "number", "examples": "records",
            "example": "records", "record": "records", "people": "records", "persons": "records",
            "respondents": "records", "points": "records"}
# Explicit definitions: "let $m$ be ...", "write $m$ for ...", "$m$ denotes ...", "$m$ stands
# for ...", "$m$ is the number of ...", "where $m$ is ...", "with $m$ the ...".
DEFINITION = re.compile(
    r"(?:\b[Ll]et\s+\$(?P<a>[^$]+)\$\s+(?:be|denote)\s+"
    r"|\b[Ww]rit(?:e|es|ing)\s+\$(?P<b>[^$]+)\$\s+for\s+"
    r"|\$(?P<c>[^$]+)\$\s+(?:denotes|stands\s+for)\s+"
    r"|\$(?P<d>[^$]+)\$\s+is\s+(?=the\s+number\s+of)"
    r"|\b(?:where|with)\s+\$(?P<e>[^$=<>]+)\$\s+(?:is\s+|the\s+|denoting\s+)"
    r")(?P<phrase>[^.;:$]{3,80})")


def notation_rows() -> dict[str, str]:
    """symbol -> the text of its row(s) in notation.md (meaning and the chapters' exceptions)."""
    rows: dict[str, str] = {}
    for line in NOTATION.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 4 or cells[1] in ("symbol", "---", ""):
            continue
        for math_ in re.findall(r"\$([^$]+)\$", cells[1]):
            for sym in math_.split(","):
                sym = _normal(sym)
                if sym:
                    rows[sym] = rows.get(sym, "") + " " + " ".join(cells[2:])
    return rows


def notation_symbols() -> set[str]:
    return set(notation_rows())


def _normal(sym: str) -> str:
    sym = re.sub(r"\\(?:mathrm|operatorname|text)\{([^}]*)\}", r"\1", sym)
    return re.sub(r"\s+", "", sym).replace("\\varepsilon", "ε").replace("\\delta", "δ")


def _words(phrase: str) -> set[str]:
    words = re.findall(r"[a-zA-Zα-ω]+", phrase.lower())
    return {SYNONYMS.get(w, w) for w in words[:6] if w not in STOP}


def symbol_definitions(text: str, symbols: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for m in DEFINITION.finditer(text):
        sym = _normal(next(g for g in m.group("a", "b", "c", "d", "e") if g))
        phrase = re.sub(r"\s+", " ", m.group("phrase")).strip()
        if sym in symbols and not re.match(r"[(\d]|\S*-DP\b|\S*-RDP\b", phrase):
            found.setdefault(sym, []).append(phrase)  # a meaning, not a property ("be ε-DP")
    return found


def conflicting_definitions(text: str, symbols: set[str]) -> dict[str, list[str]]:
    """Symbols with two definitions that share no content word among their first six words."""
    conflicts = {}
    for sym, phrases in symbol_definitions(text, symbols).items():
        groups = [_words(p) for p in phrases]
        if any(not (g & h) for i, g in enumerate(groups) for h in groups[i + 1:]):
            conflicts[sym] = phrases
    return conflicts


def test_symbol_check_can_fail():
    text = ("Let $m$ be the number of shadow models. Later, let $m$ denote the number of "
            "shadow models trained. Write $m$ for the canaries planted in one run.")
    assert conflicting_definitions(text, {"m"}) == {
        "m": ["the number of shadow models", "the number of shadow models trained",
              "the canaries planted in one run"]}
    assert conflicting_definitions("Let $q$ be the sampling rate. Write $q$ for the probability "
                                   "that a record is sampled.", {"q"}) == {}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_notation_symbol_is_defined_twice_in_a_chapter(path):
    symbols = notation_symbols()
    assert {"m", "q", "n", "T"} <= symbols, "the notation table was not read"
    conflicts = conflicting_definitions(_markdown(path), symbols)
    assert not conflicts, (f"{path.name}: symbols of notation.md defined twice with different "
                           f"meanings: {conflicts}")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_definitions_agree_with_notation(path):
    """A chapter that defines a symbol of notation.md either gives it the meaning of notation.md
    (a content word in common) or is named in that symbol's row, which records the exception."""
    rows = notation_rows()
    odd = []
    for sym, phrases in symbol_definitions(_markdown(path), set(rows)).items():
        row = rows[sym]
        if f"{{doc}}`{path.stem}`" in row or re.search(rf"\bchapters? [0-9–, ]*\b{int(path.stem[:2])}\b", row):
            continue
        meaning = _words(row) | {SYNONYMS.get(w, w) for w in re.findall(r"[a-zα-ω]+", row.lower())}
        odd += [f"${sym}$: {p!r}" for p in phrases if not (_words(p) & meaning)]
    assert not odd, (f"{path.name}: definitions that differ from notation.md without the chapter "
                     f"being named in the symbol's row: {odd}")


# Counts: "$k$ records", "$m$ canaries", "$T$ steps". A count symbol followed by plural nouns of
# two different kinds in one chapter counts two different things there.
COUNT_SYMBOLS = {"k", "K", "m", "M", "n", "N", "T", "d"}
COUNT = re.compile(r"\$([a-zA-Z])\$\s+([a-z][a-z-]*[^s]s)\b")
# third-person verbs and other words that follow a symbol without being what it counts
NOT_NOUNS = set("grows gives belongs balances buys clips does exceeds saves lands makes passes "
                "disappears moves holds attains costs shows finds releases lets trains guesses gets "
                "differs keeps plus its outputs counts equals becomes takes uses needs means stays "
                "remains sets yields divides".split())
# nouns that count the same kind of thing (a noun may be in several classes)
COUNT_CLASSES = [
    {"records", "respondents", "answers", "reports", "values", "instances", "examples", "people",
     "points", "exemplars", "demonstrations"},
    {"records", "relatives", "people", "members"},              # a group (group privacy)
    {"steps", "times", "runs", "mechanisms", "iterations", "compositions", "answers", "reports",
     "queries", "releases", "tokens"},                            # repetitions (composition)
    {"subsets", "prompts", "teachers", "voters"},                # an ensemble
    {"copies", "gradients", "augmentations", "times"},          # augmentation multiplicity
    {"dimensions", "coordinates", "features", "parameters"},
]


def count_nouns(text: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for m in COUNT.finditer(text):
        sym, noun = m.group(1), m.group(2)
        if sym in COUNT_SYMBOLS and noun not in NOT_NOUNS:
            found.setdefault(sym, set()).add(noun)
    return found


def count_conflicts(text: str) -> dict[str, list[str]]:
    def same(a, b):
        return a == b or any(a in c and b in c for c in COUNT_CLASSES)
    out = {}
    for sym, nouns in count_nouns(text).items():
        nouns = sorted(nouns)
        if any(not same(a, b) for i, a in enumerate(nouns) for b in nouns[i + 1:]):
            out[sym] = nouns
    return out


def test_count_check_can_fail():
    assert count_conflicts("train $m$ shadow models; plant $m$ canaries") == {}  # "shadow" ≠ noun
    assert count_conflicts("plant $m$ canaries and query $m$ augmentations") == {
        "m": ["augmentations", "canaries"]}
    assert count_conflicts("$n$ records, then $n$ respondents; $T$ steps, $T$ times") == {}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_count_symbols_count_one_thing_in_a_chapter(path):
    conflicts = count_conflicts(_markdown(path))
    assert not conflicts, (f"{path.name}: a count symbol of notation.md counts different things "
                           f"in this chapter: {conflicts}")


# --- constants quoted in the appendix ---------------------------------------------------------

def test_constants_of_the_classic_gaussian_proof():
    from scipy.stats import norm
    # case split at c = 1.02: δ = 1.25·exp(−1.02²/2) ≈ 0.743
    assert round(1.25 * math.exp(-1.02**2 / 2), 3) == 0.743
    assert 1.02 - 1 / 2.04 > 0.529
    assert math.exp(0.5) / (1.25 * math.sqrt(2 * math.pi) * 0.529) < 0.995
    assert math.sqrt(2 * math.log(1.25)) > 0.668
    assert 0.668 - 1 / 1.336 > -0.081
    assert norm.sf(-0.081) < 0.533 < 0.743
    # the conclusion itself, on a grid: Pr[L > ε] ≤ δ at the classic σ, for ε < 1, δ ∈ (0, 1)
    for eps in (0.01, 0.3, 0.7, 0.999):
        for delta in (1e-12, 1e-5, 0.1, 0.5, 0.74, 0.75, 0.9, 0.999):
            c = math.sqrt(2 * math.log(1.25 / delta))
            tail = norm.sf(c - eps / (2 * c))
            assert tail <= delta, (eps, delta, tail)


def test_the_improved_conversion_constant():
    """max over x > e^ε of (x − e^ε)/x^α is e^{−(α−1)ε}(1 − 1/α)^{α−1}/α (proofs.md), and the
    resulting δ is the one dplib's rdp_to_delta uses."""
    import numpy as np
    from dplib.accounting import rdp_to_delta
    for alpha, eps in ((1.5, 0.3), (2.0, 1.0), (8.0, 2.5), (64.0, 0.1)):
        x = np.exp(eps) * (1 + np.logspace(-6, 3, 200001))
        numeric = np.max((x - np.exp(eps)) / x**alpha)
        closed = math.exp(-(alpha - 1) * eps) * (1 - 1 / alpha) ** (alpha - 1) / alpha
        assert numeric == pytest.approx(closed, rel=1e-6)
        r = 0.05 * alpha
        delta, _ = rdp_to_delta([alpha], [r], eps, method="improved")
        expect = min(math.exp((alpha - 1) * r) * closed, 1.0)
        tv = math.sqrt(1 - math.exp(-r))
        assert delta == pytest.approx(min(expect, tv), rel=1e-9)


def test_sampled_gaussian_expansion_matches_the_integral():
    """The binomial expansion of the appendix equals the integral defining A_α (integer α)."""
    import numpy as np
    from scipy import integrate
    from scipy.special import comb
    from dplib.accounting import subsampled_gaussian_rdp
    for q, sigma, alpha in ((0.01, 1.1, 2), (0.1, 0.8, 5), (0.3, 2.0, 12)):
        def integrand(z):
            ratio = 1 - q + q * np.exp((2 * z - 1) / (2 * sigma**2))
            return ratio**alpha * np.exp(-z**2 / (2 * sigma**2)) / math.sqrt(2 * math.pi * sigma**2)
        integral = integrate.quad(integrand, -40 * sigma, 40 * sigma + alpha, limit=400)[0]
        series = sum(comb(alpha, k) * (1 - q) ** (alpha - k) * q**k
                     * math.exp((k * k - k) / (2 * sigma**2)) for k in range(alpha + 1))
        assert series == pytest.approx(integral, rel=1e-8)
        rdp = subsampled_gaussian_rdp([alpha], sigma, q)[0]
        assert rdp == pytest.approx(math.log(series) / (alpha - 1), rel=1e-9)


def _write_index_page() -> None:
    page = INDEX_PAGE.read_text(encoding="utf-8")
    section = functions_section()
    if BEGIN in page:
        page = page[:page.index(BEGIN)] + section + page[page.index(END) + len(END):]
    else:
        page = page.rstrip("\n") + "\n\n" + section + "\n"
    INDEX_PAGE.write_text(page, encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv:
        _write_index_page()
        print(f"wrote {INDEX_PAGE.relative_to(ROOT)}")


def _remove_delta(p, q, eps):
    """The construction of lem-app-remove-delta (chapters/proofs.md) on a finite output space."""
    import numpy as np
    p0 = np.minimum(np.maximum(p, np.exp(-eps) * q), np.exp(eps) * q)
    s = p0.sum() - 1.0
    if abs(s) < 1e-15:  # round-off only (ε = 0 makes p0 = q)
        return p0
    if s <= 0:
        room = np.exp(eps) * q - p0
        return p0 + (-s) * room / room.sum() if room.sum() > 0 else p0
    room = p0 - np.exp(-eps) * q
    return p0 - s * room / room.sum()


def test_the_remove_delta_and_kl_lemmas_on_random_pairs():
    """On random pairs of laws: δ is the larger hockey-stick divergence of the two orders; the
    construction of the appendix lands in the band e^{−ε}q ≤ p′ ≤ e^{ε}q with TV(P, P′) ≤ δ, and
    KL(P′‖Q) ≤ ε(e^ε − 1) (lem-app-kl-bound)."""
    import numpy as np
    rng = np.random.default_rng(20261129)
    for _ in range(2000):
        k = int(rng.integers(2, 12))
        p, q = rng.dirichlet(np.ones(k) * 0.7), rng.dirichlet(np.ones(k) * 0.7)
        eps = float(rng.choice([0.0, 0.05, 0.5, 1.0, 3.0]))
        delta = max(np.clip(p - np.exp(eps) * q, 0, None).sum(),
                    np.clip(q - np.exp(eps) * p, 0, None).sum())
        p1 = _remove_delta(p, q, eps)
        assert p1.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(p1 >= np.exp(-eps) * q - 1e-12) and np.all(p1 <= np.exp(eps) * q + 1e-12)
        assert 0.5 * np.abs(p - p1).sum() <= delta + 1e-12
        kl = float(np.sum(p1 * np.log(np.where(p1 > 0, p1 / q, 1.0))))
        assert kl <= eps * np.expm1(eps) + 1e-12


def test_sampled_gaussian_reverse_direction_is_not_larger():
    """B_α(t) ≤ A_α(t) ≤ A_α(1) for t ≤ 1 (the step of the appendix that cites Theorem 5 of
    Mironov, Talwar & Zhang 2019, and the monotonicity in the shift), by quadrature."""
    import numpy as np
    from scipy import integrate

    def moments(q, sigma, alpha, t):
        # with r = P_t/Q_0: A = E_{Q_0}[r^α] and B = E_{P_t}[r^{−α}] = E_{Q_0}[r^{1−α}]
        def log_r(z):
            return np.logaddexp(math.log1p(-q), math.log(q) + (2 * z * t - t * t) / (2 * sigma**2))

        def log_q0(z):
            return -z * z / (2 * sigma**2) - 0.5 * math.log(2 * math.pi * sigma**2)
        lo, hi = -12 * sigma, 12 * sigma + alpha * t
        a = integrate.quad(lambda z: np.exp(alpha * log_r(z) + log_q0(z)), lo, hi, limit=400)[0]
        b = integrate.quad(lambda z: np.exp((1 - alpha) * log_r(z) + log_q0(z)), lo, hi,
                           limit=400)[0]
        return a, b

    for q, sigma, alpha in ((0.01, 1.0, 2), (0.2, 0.9, 4), (0.5, 1.5, 8), (0.9, 2.0, 3)):
        a1, _ = moments(q, sigma, alpha, 1.0)
        for t in (0.3, 0.7, 1.0):
            a, b = moments(q, sigma, alpha, t)
            assert b <= a * (1 + 1e-9) and a <= a1 * (1 + 1e-9), (q, sigma, alpha, t, a, b, a1)
