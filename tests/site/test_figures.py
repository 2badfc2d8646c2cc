"""Figures as a textbook has them, readable on a phone; no debug reprs on any page.

Three checks of the built site (``DPBOOK_SITE``, the quick build of ``make test``):

* **Numbered, captioned, described.** Every image of a page's content (a notebook's figure, the
  precomputed frames of an interactive figure, an image of a Markdown page) sits in a
  ``<figure>`` whose ``<figcaption>`` carries a number ("Fig. 6.2") and a caption, and has alt
  text that says what it shows: not empty, not a file name or path, not the caption repeated.
  (The chapters give each figure cell ``mystnb.figure`` {caption, name} and ``mystnb.image.alt``
  metadata; an interactive figure's alt text is its ``interactive_figure(caption=...)``.)
* **Readable at 390 px.** On a 390×844 phone viewport (Chromium), the smallest text of every
  figure must be at least ``MIN_TEXT_PX`` = 9 CSS pixels tall. How this is measured: the page
  shows a PNG of native width W at a displayed width w (``getBoundingClientRect``; frames of an
  interactive figure other than the one on screen at ``min(W, width of its box)``), so every
  length of the image is drawn at w/W. The font size of a text in the PNG, in image pixels, is
  its size in points × dpi / 72; matplotlib knows both when it saves the figure, and the book's
  PNG writer (``dplib.plotting.figure_png`` for every figure a chapter shows, ``compact_png``
  for the frames) stores the smallest over the figure's visible text objects (titles, labels,
  tick labels, legends, annotations) in the PNG's text chunk ``dpbook:min-font-px``. The
  rendered size is then ``min-font-px × w / W``: the em size of the smallest font on the screen,
  exact up to the browser's rounding (a lower bound would need the glyphs; the em size is what
  "a 9 px font" means in CSS, too). A PNG without that chunk fails: nothing then says how small
  its text is. An SVG is measured the same way from its own ``font-size`` values and its
  ``viewBox`` width.
* **No debug output.** No page's text contains a NumPy or PyTorch repr — ``np.float64(…)``,
  ``np.int64(…)``, ``numpy.float32(…)``, ``array([…``, ``tensor(…``: every number a reader
  sees is formatted. Code is not output: code cells' sources and code in the text (listings,
  inline literals) are skipped; everything a cell printed or displayed is checked.
"""
from __future__ import annotations

import base64
import io
import re
import urllib.parse
from pathlib import Path

import pytest

from sitecheck import SITE, chapter_pages, html_pages, serve, soup

MIN_TEXT_PX = 9.0
FONT_KEY = "dpbook:min-font-px"
#: NumPy / PyTorch reprs that mean a raw value reached the page, and an object's default repr
#: (``<matplotlib.legend.Legend at 0x7f...>``: a cell's last value shown by mistake).
REPR = re.compile(r"\b(?:np|numpy)\.(?:float|int|uint|bool|complex|str_|bytes_|longdouble|"
                  r"half|single|double)\w*\(|(?<![\w.])array\(\[|(?<![\w.])tensor\(|"
                  r"<[\w.]+(?: object)? at 0x[0-9a-fA-F]+>")
PATHLIKE = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|svg|gif|webp)$|^[0-9a-f]{32,}|^_images/|"
                      r"^data:|^(figure|image|img|plot|png)\s*\d*$", re.I)


def _content_images(page_soup):
    """The images of a page's article (not the theme's logo and icons)."""
    article = page_soup.select_one("article") or page_soup.select_one("main") or page_soup
    return [img for img in article.find_all("img")]


@pytest.fixture(scope="module")
def pages():
    return [p for p in html_pages(SITE) if p not in ("genindex.html", "search.html")]


def test_every_figure_is_numbered_captioned_and_described(site, pages):
    problems, count = [], 0
    for page in pages:
        for img in _content_images(soup(site / page)):
            count += 1
            where = f"{page}: image {img.get('src', '')[:60]!r}"
            fig = img.find_parent("figure")
            cap = fig.find("figcaption") if fig else None
            if cap is None:
                problems.append(f"{where} is not in a <figure> with a <figcaption>")
                continue
            number = cap.select_one(".caption-number")
            if number is None or not re.search(r"\d", number.get_text()):
                problems.append(f"{where} has no figure number")
            text = cap.select_one(".caption-text")
            caption = text.get_text(" ", strip=True) if text else ""
            if len(caption.split()) < 4:
                problems.append(f"{where} has no caption worth the name: {caption!r}")
            alt = (img.get("alt") or "").strip()
            if len(alt.split()) < 4 or PATHLIKE.search(alt):
                problems.append(f"{where} has alt text that does not describe it: {alt!r}")
            elif caption and alt == caption:
                problems.append(f"{where} repeats its caption as alt text")
    assert count, "no images found on the site"
    assert not problems, "\n".join(problems)


def _png_font_px(data: bytes) -> tuple[float | None, int]:
    from PIL import Image
    with Image.open(io.BytesIO(data)) as im:
        value = im.info.get(FONT_KEY) or getattr(im, "text", {}).get(FONT_KEY)
        return (float(value) if value is not None else None), im.size[0]


def _svg_font_px(text: str) -> tuple[float | None, float | None]:
    sizes = [float(v) for v in re.findall(r"font-size\s*[:=]\s*[\"']?\s*([\d.]+)", text)]
    box = re.search(r"viewBox\s*=\s*[\"']\s*[-\d.]+[ ,]+[-\d.]+[ ,]+([\d.]+)", text)
    return (min(sizes) if sizes else None), (float(box.group(1)) if box else None)


def _image_bytes(site: Path, page: str, src: str) -> bytes:
    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    path = urllib.parse.urlparse(src).path
    return (site / page).parent.joinpath(urllib.parse.unquote(path)).resolve().read_bytes()


_MEASURE = """
const out = [];
for (const img of document.querySelectorAll('article img')) {
  const r = img.getBoundingClientRect();
  const box = img.parentElement.getBoundingClientRect();
  const live = img.closest('.dpbook-live-figure');
  let frames = [];
  if (live) {
    const data = live.querySelector('script.dpbook-live-data');
    if (data) frames = JSON.parse(data.textContent).frames.filter(f => f);
  }
  out.push({src: img.currentSrc || img.src, shown: r.width, natural: img.naturalWidth,
            box: box.width, frames: frames});
}
return out;
"""


@pytest.fixture(scope="module")
def site_url(site):
    with serve(site) as url:
        yield url


@pytest.mark.parametrize("page", chapter_pages() + ["intro.html", "chapters/instructors.html"])
def test_figure_text_is_readable_on_a_phone(site, phone_browser, site_url, page):
    if not (site / page).exists():
        pytest.skip(f"{page} is not built")
    if not _content_images(soup(site / page)):
        pytest.skip(f"{page} has no figures")
    url = site_url
    phone_browser.get(f"{url}/{page}")
    phone_browser.execute_script("return document.fonts.ready")
    found = phone_browser.execute_script(_MEASURE)
    assert found, f"{page}: no image measured"
    problems = []
    for k, f in enumerate(found):
        src = f["src"]
        where = f"{page}: image {k + 1} ({src[:50]!r})"
        local = src.split(f"{url}/", 1)[-1] if not src.startswith("data:") else src
        data = _image_bytes(site, page if src.startswith("data:") else "index.html", local)
        if data.lstrip()[:5] in (b"<?xml", b"<svg ") or b"<svg" in data[:300]:
            font, width = _svg_font_px(data.decode("utf-8", "replace"))
            if font is None or width is None:
                problems.append(f"{where}: an SVG without font-size or viewBox")
                continue
            px = font * f["shown"] / width
        else:
            font, width = _png_font_px(data)
            if font is None:
                problems.append(f"{where}: the PNG does not record its smallest font "
                                f"({FONT_KEY}); was it made by dplib.plotting?")
                continue
            px = font * f["shown"] / width
        if px < MIN_TEXT_PX:
            problems.append(f"{where}: smallest text {px:.1f} px on a 390 px screen "
                            f"(shown {f['shown']:.0f} px wide, native {width} px)")
        for j, frame in enumerate(f["frames"]):   # the frames not on screen
            ffont, fwidth = _png_font_px(base64.b64decode(frame))
            if ffont is None:
                problems.append(f"{where}, frame {j + 2}: no {FONT_KEY}")
                continue
            shown = min(fwidth, f["box"])
            if ffont * shown / fwidth < MIN_TEXT_PX:
                problems.append(f"{where}, frame {j + 2}: smallest text "
                                f"{ffont * shown / fwidth:.1f} px")
    assert not problems, "\n".join(problems)


def test_no_numpy_or_torch_repr_on_any_page(site, pages):
    problems = []
    for page in pages:
        s = soup(site / page)
        article = s.select_one("article") or s
        # Not output: a code cell's source (it may call np.float64(...)), scripts and styles,
        # and code in the text (a solution's listing, `np.int64(1)` inline). Removed first, so
        # the page's text is read in one pass.
        for el in article.select(".cell_input, script, style"):
            el.decompose()
        for el in article.select("code, .highlight"):
            if not el.decomposed and el.find_parent(class_="cell_output") is None:
                el.decompose()
        text = article.get_text()
        for m in REPR.finditer(text):
            problems.append(f"{page}: ...{text[max(0, m.start() - 60):m.end() + 40]!r}...")
    assert not problems, "\n".join(problems[:40])
