"""Every figure the notebooks draw, measured in Chromium at 900 and 1,600 px: nothing a reader reads overlaps,
nothing is cut off at the figure's edge, no text is under 11 px (tests/browser/figures.py says what is measured).

The figures are the notebooks' own (tests/viz/cases.py): the static figures, and every explorer's
figures with each control at both ends of its range (the ends at 900 px only, where text crowds). No JupyterLab and no network: plotly.js comes
from the plotly package. Skips, saying why, only where Chromium or Playwright is missing.
"""
from __future__ import annotations

import pytest

from tests.browser import figures, lab
from tests.viz.cases import explorer_figures, static_cases
from tests.widgets.cases import cases

pytestmark = pytest.mark.browser

WIDTHS = (900, 1600)  # px of notebook output width: a laptop with the file browser open, a wide screen


@pytest.fixture(scope="module")
def page():
    sync_api = lab.require_browser("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=lab.chromium(), headless=True, args=["--no-sandbox"])
        yield figures.open_page(browser)
        browser.close()


def _problems(page, name: str, fig, widths=WIDTHS) -> list[str]:
    out = []
    for width in widths:
        m = figures.measure(page, name, fig, width)
        assert m.width == width, f"{name}: drawn {m.width} px wide in a {width} px output (a fixed width?)"
        out += [f"{name} at {width} px: {p}" for p in figures.problems(m)]
    return out


@pytest.mark.parametrize("name", sorted(static_cases()))
def test_static_figure_reads_well(page, name):
    problems = _problems(page, name, static_cases()[name]())
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"{c.notebook}-{c.name}")
def test_explorer_figures_read_well_at_every_end_of_their_controls(page, case):
    problems = []
    for n, (name, figs) in enumerate(explorer_figures(case)):
        for k, fig in enumerate(figs):  # the ends at the narrow width only, where text crowds (keeps CI short)
            problems += _problems(page, f"{name} [{k}]", fig, WIDTHS if n == 0 else WIDTHS[:1])
    assert not problems, "\n".join(problems[:20])


# The legend's and the book slider's boxes (page px) of a figure drawn at `width`.
LEGEND_AND_SLIDER = """async ([fig, width]) => {
    const host = document.getElementById('host');
    host.style.width = width + 'px';
    Plotly.purge(host);
    await Plotly.newPlot(host, fig.data, fig.layout, {responsive: false});
    const boxes = (sel) => [...host.querySelectorAll(sel)].map(e => e.getBoundingClientRect())
        .filter(r => r.height > 0.5).map(r => ({top: r.top, bottom: r.bottom}));
    return {legend: boxes('g.legend'), slider: boxes('g.slider-group text, g.slider-group rect')};
}"""


@pytest.mark.parametrize("case", cases(), ids=lambda c: f"{c.notebook}-{c.name}")
def test_a_book_explorers_legend_stays_clear_of_its_slider(page, case):
    """The book's explorers (widgets._core.frames_figure) keep the legend under the slider's tick labels, in the
    book's 688 px column (chapter 02's two-row legend sat on them)."""
    import json

    import plotly.io as pio

    from vlr_lib.widgets import _core

    box = case.build()
    for fig in _core.book_figures(box, steps=3)[1]:
        if not fig.layout.sliders:
            continue
        found = page.evaluate(LEGEND_AND_SLIDER, [json.loads(pio.to_json(fig)), 688])
        if found["legend"] and found["slider"]:
            slider_bottom = max(r["bottom"] for r in found["slider"])
            assert min(r["top"] for r in found["legend"]) >= slider_bottom - 1, f"{case.name}: legend over the slider"
