"""Render plotly figures in headless Chromium with the plotly.js that ships with plotly, and measure them.

No JupyterLab and no network: a blank page loads plotly.min.js from the installed plotly package,
draws a figure in a container of a given width with the mode bar always shown, and returns the box
of everything a reader reads -- title, annotations (subplot titles), axis titles, tick labels,
colour bars, legend, mode bar, plot areas -- and the font size of every text. `problems` turns
those boxes into readable complaints: overlaps, text cut off at the figure's edge, text under 11 px.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import plotly

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
MIN_FONT_PX = 11.0
TOLERANCE = 1.0  # px: boxes that touch are not overlapping

# Every box a reader reads, in page coordinates relative to the figure; font sizes of all texts.
MEASURE = """async ([fig, width]) => {
    const host = document.getElementById('host');
    host.style.width = width + 'px';
    Plotly.purge(host);
    await Plotly.newPlot(host, fig.data, fig.layout, {displayModeBar: true, responsive: false});
    const origin = host.getBoundingClientRect();
    const items = [];
    const add = (kind, el, owner) => {
        const r = el.getBoundingClientRect();
        if (r.width < 0.5 || r.height < 0.5) return;
        items.push({kind, owner, text: (el.textContent || '').trim().slice(0, 60),
                    x0: r.left - origin.left, x1: r.right - origin.left, y0: r.top - origin.top, y1: r.bottom - origin.top});
    };
    host.querySelectorAll('.g-gtitle text, .g-gtitle-subtitle text').forEach(e => add('title', e, 'title'));
    host.querySelectorAll('.annotation').forEach((e, i) => add('annotation', e.querySelector('.annotation-text-g') || e, 'a' + i));
    host.querySelectorAll('g[class^="g-"][class$="title"]').forEach(g => {
        const cls = g.getAttribute('class');
        if (cls === 'g-gtitle' || cls === 'g-gtitle-subtitle') return;
        g.querySelectorAll('text').forEach(e => add('axis title', e, cls.slice(2, -5)));
    });
    host.querySelectorAll('g[class*="axislayer"] g[class$="tick"] text').forEach(e => {
        add('tick label', e, e.parentNode.getAttribute('class').split(' ')[0].replace('tick', ''));
    });
    host.querySelectorAll('g.colorbar').forEach((e, i) => add('colour bar', e, 'c' + i));
    host.querySelectorAll('g.legend').forEach((e, i) => {
        const bg = e.querySelector('rect.bg');
        add('legend', bg || e, 'legend' + i);
    });
    host.querySelectorAll('.modebar').forEach(e => add('mode bar', e, 'modebar'));
    host.querySelectorAll('.nsewdrag').forEach(e => add('plot area', e, e.getAttribute('data-subplot')));
    const full = host._fullLayout;
    const fonts = Array.from(host.querySelectorAll('svg text')).filter(t => (t.textContent || '').trim())
        .map(t => ({px: parseFloat(getComputedStyle(t).fontSize), text: t.textContent.trim().slice(0, 40),
                    where: (t.closest('g[class]') || t).getAttribute('class') || ''}));
    return {width: full.width, height: full.height, items, fonts};
}"""

# Which kinds must never overlap each other (a pair listed once; same-kind pairs included when listed).
EXCLUSIVE = {
    ("title", "title"), ("title", "annotation"), ("title", "axis title"), ("title", "tick label"),
    ("title", "colour bar"), ("title", "legend"), ("title", "mode bar"), ("title", "plot area"),
    ("annotation", "annotation"), ("annotation", "axis title"), ("annotation", "tick label"),
    ("annotation", "colour bar"), ("annotation", "legend"), ("annotation", "mode bar"),
    ("axis title", "axis title"), ("axis title", "tick label"), ("axis title", "colour bar"),
    ("axis title", "legend"), ("axis title", "plot area"),
    ("tick label", "colour bar"), ("tick label", "legend"), ("tick label", "plot area"),
    ("colour bar", "colour bar"), ("colour bar", "legend"), ("colour bar", "plot area"), ("colour bar", "mode bar"),
    ("legend", "mode bar"), ("legend", "plot area"),
}


@dataclass
class Measured:
    name: str
    width: float
    height: float
    items: list[dict]
    fonts: list[dict]


def _overlap(a: dict, b: dict) -> bool:
    return (min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > TOLERANCE
            and min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > TOLERANCE)


def _label(item: dict) -> str:
    return f"{item['kind']} {item['text']!r}" if item["text"] else f"{item['kind']} ({item['owner']})"


def _same_axis(a: dict, b: dict) -> bool:
    """A tick label against its own axis's labels or plot area is plotly's business, not ours."""
    return a["kind"] == b["kind"] == "tick label" and a["owner"] == b["owner"]


def problems(m: Measured) -> list[str]:
    """Every overlap of EXCLUSIVE kinds, every text outside the figure, every font under MIN_FONT_PX."""
    out = []
    items = m.items
    for i, a in enumerate(items):
        if a["kind"] != "plot area" and (a["x0"] < -TOLERANCE or a["y0"] < -TOLERANCE
                                         or a["x1"] > m.width + TOLERANCE or a["y1"] > m.height + TOLERANCE):
            out.append(f"{_label(a)} is cut off by the figure's edge")
        for b in items[i + 1:]:
            pair = (a["kind"], b["kind"])
            if (pair in EXCLUSIVE or pair[::-1] in EXCLUSIVE) and not _same_axis(a, b) and _overlap(a, b):
                if {a["kind"], b["kind"]} == {"tick label", "plot area"} and _own_area(a, b):
                    continue
                out.append(f"{_label(a)} overlaps {_label(b)}")
    for f in m.fonts:
        if f["px"] < MIN_FONT_PX - 0.01:
            out.append(f"text {f['text']!r} ({f['where']}) is {f['px']:g} px, under {MIN_FONT_PX:g}")
    return sorted(set(out))


def _own_area(a: dict, b: dict) -> bool:
    """Tick labels may sit inside their own subplot (e.g. heatmap categories), never inside another one."""
    tick, area = (a, b) if a["kind"] == "tick label" else (b, a)
    subplot = area["owner"] or ""
    return "y" in subplot and tick["owner"] in (subplot[:subplot.index("y")], subplot[subplot.index("y"):])


def open_page(browser):
    """A blank page holding plotly.js (from the plotly package: nothing is fetched)."""
    page = browser.new_page(viewport={"width": 1700, "height": 1200})
    page.set_content("<!doctype html><html><body style='margin:0'><div id='host'></div></body></html>")
    page.add_script_tag(path=str(PLOTLY_JS))
    return page


def measure(page, name: str, fig, width: int) -> Measured:
    """Draw `fig` `width` px wide (the mode bar shown) and measure what it shows."""
    out = page.evaluate(MEASURE, [json.loads(fig.to_json()), width])
    return Measured(name, out["width"], out["height"], out["items"], out["fonts"])
