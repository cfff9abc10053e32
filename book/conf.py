"""Sphinx configuration of the static book (`make book`; book/build.py assembles the sources).

Sphinx + myst-nb + sphinx-book-theme, everything served from the book's own folder: plotly.js
once in _static (pages with a figure load it), MathJax 2 from the jupyter-server-mathjax
package with SVG output (no web fonts, which browsers refuse to load from file:// pages),
Sphinx's own search index, and no ipywidgets JavaScript (explorers show their plotly-native
version, vlr_lib.widgets._core). The notebooks arrive executed: myst-nb does not run them.
"""
from __future__ import annotations

project = "vlr-workbook"
author = "the vlr-workbook authors"
copyright = "the vlr-workbook authors, MIT licence"

extensions = ["myst_nb", "sphinx.ext.mathjax"]
root_doc = "index"
exclude_patterns = ["README.md", "_build", "notebooks/_download"]  # _download: the notebooks offered for download
suppress_warnings = ["mystnb.unknown_mime_type"]  # plotly's JSON beside its HTML, JupyterLab-only

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
myst_update_mathjax = False  # the MathJax 2 configuration below is the one in force

nb_execution_mode = "off"  # book/build.py executed every notebook already, and stops on an error
nb_ipywidgets_js = {}  # widget JavaScript would come from a CDN; explorers are plotly figures here
nb_code_prompt_show = "Show solution"  # the only hidden cells are the exercises' solutions
nb_code_prompt_hide = "Hide solution"
nb_merge_streams = True

# MathJax 2 as jupyter-server-mathjax ships it (relative to _static, copied there by book/build.py):
# one combined file with the TeX input and the HTML-CSS output, and the STIX-Web fonts (the only ones
# the package ships).
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    # a display equation wider than the column breaks its line (the rest scrolls, _static/vlr.css)
    "HTML-CSS": {"availableFonts": [], "webFont": "STIX-Web", "imageFont": None, "preferredFont": None,
                 "linebreaks": {"automatic": True}},
    "SVG": {"linebreaks": {"automatic": True}},
    "showMathMenu": False,
    "messageStyle": "none",
}

html_theme = "sphinx_book_theme"
html_title = "vlr-workbook"
html_static_path = ["_static"]
html_css_files = ["vlr.css"]  # wide equations, tables and figures stay in their column; dark-mode figures
html_js_files = ["vlr-search.js"]  # search snippets show math as text, not as raw \( \gamma \)
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,
    "use_fullscreen_button": True,
}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False

PLOTLY_JS = "plotly.min.js"


def _plotly_where_needed(app, pagename, templatename, context, doctree) -> None:
    """Load plotly.js only on pages that draw a figure (the others stay small)."""
    if "plotly-graph-div" in context.get("body", ""):
        app.add_js_file(PLOTLY_JS, priority=200)


def setup(app) -> None:
    app.connect("html-page-context", _plotly_where_needed)
