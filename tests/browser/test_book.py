r"""The built book in a real browser: headless Chromium opens its pages from the file system and
from a local HTTP server, with every request off the machine counted as a failure.

- the front page lists the chapters in order, and search finds a chapter (Sphinx's search index
  is read from the file system);
- a chapter page draws its plotly figures and its math with the book's own plotly.js and MathJax,
  and moving the plotly slider of an explorer changes the figure's data;
- every chapter page, at 1280x800: no figure and no display equation wider than the text column (an
  equation may scroll inside it, never be cut off), no raw ``$...$`` or ``\(...\)`` left in the rendered
  text, a download button for the chapter's notebook, and search snippets show no raw TeX.

The book is `make book`'s (build/book, or $VLR_BOOK_DIR). Without one the tests skip, saying so;
`make test-book` (what CI runs after `make book`) sets VLR_BOOK_DIR, so there a missing book fails.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = Path(os.environ.get("VLR_BOOK_DIR") or ROOT / "build" / "book")
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
# Raw TeX known to be fixed elsewhere: chapter 10's report prints "$C^q$" as plain text (vlr_lib.report and
# notebook 10 are being changed with chapters 09-12's written findings). Exactly this text is an expected
# failure; anything else fails, and once it is gone the chapter passes (then delete the entry).
KNOWN_RAW: dict[str, list[str]] = {}  # raw TeX a chapter is known to print (none now)
CHAPTER = "notebooks/04_unified_loss.html"  # its first explorer moves the margin m of the unified loss
N_CHAPTERS = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.py")))

pytestmark = pytest.mark.browser

# The data of the first figure that has a plotly slider (an explorer's book version).
EXPLORER_STATE = """() => {
    const gd = [...document.querySelectorAll('.js-plotly-plot')].find(g => g.layout && (g.layout.sliders || []).length);
    return gd ? JSON.stringify(gd.data.map(t => [t.x, t.y, t.z])) : null;
}"""


@pytest.fixture(scope="module")
def book() -> Path:
    if not (BOOK / "index.html").is_file():
        if os.environ.get("VLR_BOOK_DIR"):
            pytest.fail(f"no built book in {BOOK}: run make book first")
        pytest.skip(f"no built book in {BOOK} (make book builds it; make test-book tests it)")
    return BOOK


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no line per request in the test output
        pass


@pytest.fixture(scope="module")
def server(book):
    """`python -m http.server` in a thread: the book's folder on 127.0.0.1, a free port."""
    handler = functools.partial(QuietHandler, directory=str(book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def open_page(browser, url: str, local: str):
    """A page at `url`; the list it returns fills with every request that leaves `local` (file:// or the server)."""
    page = browser.new_page(viewport={"width": 1300, "height": 950})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith((local, "data:", "blob:", "about:")) else None)
    page.goto(url, wait_until="load")
    return page, outside


def test_front_page_lists_the_chapters_and_search_finds_one(browser, book):
    page, outside = open_page(browser, (book / "index.html").as_uri(), "file://")
    try:
        assert "vlr-workbook" in page.title()
        chapters = page.eval_on_selector_all(
            "nav.bd-links a.reference.internal[href^='notebooks/']", "els => els.map(e => e.textContent.trim())")
        assert len(chapters) == N_CHAPTERS and chapters == sorted(chapters), chapters
        course = page.locator("nav.bd-links a.reference.internal[href='docs/course.html']")
        assert course.count() == 1, "the course guide is in the navigation"
        page.goto((book / "search.html").as_uri() + "?q=hardest", wait_until="load")
        page.wait_for_selector("#search-results ul.search li", timeout=30_000)
        hits = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
        assert any("notebooks/02_triplet_losses.html" in h for h in hits), hits
        assert outside == [], f"requests off the machine: {outside}"
    finally:
        page.close()


@pytest.mark.parametrize("via", ["file", "http"])
def test_chapter_draws_figures_and_math_and_its_slider_moves_the_figure(browser, book, server, via):
    url, local = ((book / CHAPTER).as_uri(), "file://") if via == "file" else (f"{server}/{CHAPTER}", server)
    page, outside = open_page(browser, url, local)
    try:
        page.wait_for_function("() => window.Plotly && document.querySelectorAll('.js-plotly-plot').length > 1",
                               timeout=60_000)
        page.wait_for_function("() => document.querySelectorAll('.MathJax, .MathJax_Display').length > 10",
                               timeout=60_000)
        assert "Math Processing Error" not in page.inner_text("main")
        assert page.locator(".js-plotly-plot .modebar").count() > 0, "figures have plotly's zoom/pan bar"
        before = page.evaluate(EXPLORER_STATE)
        assert before is not None, "no explorer with a plotly slider on the page"
        rail = page.locator(".js-plotly-plot .slider-rail-rect").first
        rail.scroll_into_view_if_needed()
        box = rail.bounding_box()
        page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)  # the last value
        page.wait_for_function(f"(before) => ({EXPLORER_STATE})() !== before", arg=before, timeout=30_000)
        after = json.loads(page.evaluate(EXPLORER_STATE))
        assert after and after != json.loads(before)
        assert outside == [], f"requests off the machine: {outside}"
    finally:
        page.close()


# Every figure and display equation whose box leaves the article's column, or whose content is cut off (wider
# than its box without a scroll bar); and the rendered text outside code that still holds TeX delimiters.
LAYOUT = r"""() => {
    const article = document.querySelector('article.bd-article') || document.querySelector('main');
    const column = article.getBoundingClientRect();
    const wide = [];
    const selector = '.js-plotly-plot, .MathJax_Display, .MathJax_SVG_Display, div.math, .cell_output table';
    for (const el of article.querySelectorAll(selector)) {
        const r = el.getBoundingClientRect();
        const what = el.className.toString().split(' ')[0] + ': ' + (el.textContent || '').trim().slice(0, 50);
        if (r.width > 0 && (r.right > column.right + 1 || r.left < column.left - 1)) {
            wide.push(`${what} spans ${Math.round(r.left)}-${Math.round(r.right)} px, the column ` +
                      `${Math.round(column.left)}-${Math.round(column.right)} px`);
        }
        const scrolls = ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
        if (el.scrollWidth > el.clientWidth + 1 && !scrolls && !el.closest('.js-plotly-plot')) {
            wide.push(`${what} is cut off: ${el.scrollWidth} px of content in ${el.clientWidth} px`);
        }
    }
    const text = article.cloneNode(true);
    text.querySelectorAll('pre, code, script, style, .highlight, .MathJax, .MathJax_Display, .MathJax_Preview, ' +
                          'script[type^="math"]').forEach(e => e.remove());
    const raw = (text.textContent.match(/\$[^$\s][^$\n]{0,80}?\$|\\\([^)]{0,80}?\\\)/g) || []).slice(0, 5);
    const clipped = [...article.querySelectorAll('div.cell_input div.highlight pre')]
        .filter(p => p.scrollWidth > p.clientWidth + 1)
        .map(p => p.textContent.split('\n').reduce((a, l) => (l.length > a.length ? l : a), '').slice(0, 60));
    return {wide, raw, clipped, download: article.querySelectorAll('.vlr-download a.download').length};
}"""


def typeset(page) -> None:
    """Wait for the page's figures and for MathJax to finish typesetting (where the page has math)."""
    page.wait_for_load_state("load")
    page.wait_for_function("() => !document.querySelector('.plotly-graph-div') || "
                           "document.querySelectorAll('.js-plotly-plot .main-svg').length > 0", timeout=60_000)
    page.evaluate("() => new Promise(done => (window.MathJax && MathJax.Hub) ? MathJax.Hub.Queue(done) : done())")


@pytest.mark.parametrize("stem", CHAPTERS)
def test_every_chapter_fits_its_column_and_renders_its_math(browser, book, stem):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((book / "notebooks" / f"{stem}.html").as_uri(), wait_until="load")
        typeset(page)
        found = page.evaluate(LAYOUT)
        assert found["wide"] == [], f"{stem}: " + "; ".join(found["wide"][:5])
        assert found["download"] == 1, f"{stem}: no download button for its notebook"
        # every notebook is formatted at 88 characters (tests/notebooks/test_format.py)
        assert found["clipped"] == [], f"{stem}: code lines wider than the column: {found['clipped'][:3]}"
        if found["raw"] and found["raw"] == KNOWN_RAW.get(stem):
            pytest.xfail(f"{stem}: raw {found['raw']} in its output, fixed with chapter {stem[:2]}'s findings")
        assert found["raw"] == [], f"{stem}: raw TeX in the rendered text: {found['raw']}"
    finally:
        page.close()


def test_search_snippets_show_no_raw_tex(browser, server):
    """Over HTTP (from file:// the browser fetches no page, so no snippet shows), a search whose hits hold math."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(f"{server}/search.html?q=temperature", wait_until="load")
        page.wait_for_selector("#search-results ul.search li p.context", timeout=60_000)
        page.wait_for_timeout(2_000)  # the other snippets arrive one page at a time
        snippets = page.eval_on_selector_all("#search-results p.context", "els => els.map(e => e.textContent)")
        assert snippets and not [s for s in snippets if "\\(" in s or "\\)" in s or "\\gamma" in s], snippets[:3]
    finally:
        page.close()


def test_the_layout_check_catches_a_wide_figure_a_cut_equation_and_raw_tex(browser):
    """LAYOUT on a page made to fail: a figure wider than the column, an equation cut off, raw $...$ and \\(...\\)."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.set_content(
            "<main><article class='bd-article' style='width:600px'>"
            "<div class='js-plotly-plot' style='width:900px;height:10px'></div>"
            "<div class='MathJax_Display' style='width:600px;overflow:hidden;white-space:nowrap'>"
            + "x + " * 400 + "</div><p>the loss $C^q$ and \\(\\gamma\\)</p><pre>$ echo ok $</pre></article></main>")
        found = page.evaluate(LAYOUT)
        assert any(w.startswith("js-plotly-plot") and "spans" in w for w in found["wide"]), found["wide"]
        assert any(w.startswith("MathJax_Display") and "is cut off" in w for w in found["wide"]), found["wide"]
        assert found["raw"] == ["$C^q$", "\\(\\gamma\\)"] and found["download"] == 0
    finally:
        page.close()


@pytest.mark.parametrize("stem", ["04_unified_loss", "07_goal"])
def test_an_explorers_dropdown_shows_another_view_drawn_to_the_column(browser, book, stem):
    """Chapter 04 ("raise γ to 10³") and 07 (exercise 5: (T^con, P^con) and its margin): choosing the drop-down's
    second view shows it, hides the first, and its figures are drawn at the column's width."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((book / "notebooks" / f"{stem}.html").as_uri(), wait_until="load")
        typeset(page)
        select = page.locator("select.vlr-book-select").first
        select.scroll_into_view_if_needed()
        select.select_option(index=1)
        views = page.locator(".vlr-book-explorer").filter(has=select).locator(".vlr-book-view")
        assert views.nth(0).is_hidden() and views.nth(1).is_visible()
        plot = views.nth(1).locator(".js-plotly-plot").first
        page.wait_for_timeout(500)  # Plotly.Plots.resize after the view is shown
        width = plot.evaluate("g => g.getBoundingClientRect().width")
        column = page.evaluate("() => document.querySelector('article.bd-article').getBoundingClientRect().width")
        assert column * 0.8 < width <= column + 1
    finally:
        page.close()


def test_the_landing_page_is_for_students_and_figures_follow_dark_mode(browser, book):
    """The front page: what the book is, how to read it, the chapter map (a link to every chapter), and the
    developers' README behind "Contributing / running it yourself"; a chapter's figures invert in dark mode, and
    neither they nor its explorers keep the theme's light frame there."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((book / "index.html").as_uri(), wait_until="load")
        text = page.inner_text("article.bd-article")
        assert "What this is." in text and "How to read it." in text and "The chapter map." in text
        mapped = page.eval_on_selector_all("article.bd-article table a[href^='notebooks/']",
                                           "els => els.map(e => e.getAttribute('href'))")
        assert sorted(mapped) == [f"notebooks/{stem}.html" for stem in CHAPTERS]
        assert "make test" not in text, "the developers' README is not the landing page"
        page.goto((book / "contributing.html").as_uri(), wait_until="load")
        assert "make test" in page.inner_text("article.bd-article")
        page.goto((book / "notebooks" / "02_triplet_losses.html").as_uri(), wait_until="load")
        typeset(page)
        plot = page.locator(".js-plotly-plot").first
        assert "invert" not in plot.evaluate("g => getComputedStyle(g).filter")
        page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; }")
        assert "invert" in plot.evaluate("g => getComputedStyle(g).filter")
        # no light card around a figure or an explorer in dark mode (the theme's for HTML outputs)
        for selector in (".js-plotly-plot", ".vlr-book-explorer"):
            card = page.locator(f"div.cell_output .text_html:has({selector})").first
            assert card.evaluate("e => getComputedStyle(e).backgroundColor") in ("rgba(0, 0, 0, 0)", "transparent")
    finally:
        page.close()
