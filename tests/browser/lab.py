"""Drive the workbook in JupyterLab and headless Chromium, as a student would (shared by the browser tests).

One JupyterLab server (started with the project's own settings, jupyter/lab.py, like `make lab`)
serves fresh .ipynb copies of the notebooks; each notebook gets its own page, workspace and kernel.
A page runs every cell, then moves one control of each explorer (the ipywidgets boxes carrying
the CSS class ``vlr-explorer``; or of the first few only, ``max_moves``) and times the
release-to-redraw latency in the page itself. Every request the page makes is recorded, so a test
can fail on any that leaves the machine. :func:`run_in_lab` does all of it for a list of notebooks.

Playwright drives the distribution's Chromium (no browser download); the tests skip, saying why,
only where Chromium or Playwright is missing (:func:`require_browser`).
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
VIEWPORT = {"width": 1280, "height": 800}  # a laptop, the file browser open beside the notebook
TOKEN = "vlr-browser-test"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}

# Test-only JupyterLab settings, on top of the project's (jupyter/settings): render every cell
# (JupyterLab 4 detaches off-screen cells by default, so a widget below the fold would never be
# measured) and never stop at the "Select Kernel" dialog.
TEST_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none", "autoStartDefaultKernel": True},
}


def chromium() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def require_browser(api: str = "playwright.async_api"):
    """Skip the calling test, saying why, where Chromium or Playwright is missing; else Playwright's `api` module."""
    import pytest

    if chromium() is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); .ci/run installs it")
    return pytest.importorskip(api, reason="playwright is not installed")


def launcher():
    """jupyter/lab.py as a module: the one place that knows how the project starts JupyterLab."""
    spec = importlib.util.spec_from_file_location("vlr_lab_launcher", ROOT / "jupyter" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_cells(source: str) -> list[str]:
    """The code cells of a jupytext percent notebook, without comment lines."""
    cells, current, in_code = [], [], False
    for line in source.splitlines() + ["# %%"]:
        if line.startswith("# %%"):
            if in_code:
                cells.append("\n".join(current))
            current, in_code = [], "[markdown]" not in line
        elif in_code and not line.lstrip().startswith("#"):
            current.append(line)
    return cells


EXPLORER_CALL = re.compile(r"\bwidgets\.\w+\.\w+\(")


def explorer_calls(path: Path) -> int:
    """How many explorers a notebook builds (calls ``widgets.<topic>.<explorer>(...)`` in its code)."""
    return sum(len(EXPLORER_CALL.findall(cell)) for cell in code_cells(path.read_text()))


def to_ipynb(source: Path, target: Path) -> None:
    """The notebook `make lab` writes (instructor edition), in this process: no jupytext start per notebook."""
    from vlr_lib import book

    book.write_notebook(str(source), str(target), "instructor")


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited early with code {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer at {url} within {timeout} s")


def _first_port() -> int:
    """8900, plus a block of 50 ports per pytest-xdist worker: servers of two workers start at once and share
    the token, so the same free port picked twice would hand one test the other's server (and then lose it)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return 8900 + 50 * (int(worker) if worker.isdigit() else 0)


@contextmanager
def lab_server(root: Path, env: dict[str, str] | None = None, pairing: bool = True, state: Path | None = None):
    """JupyterLab on 127.0.0.1 serving `root` with the project's settings (+ TEST_SETTINGS); yields its base URL.
    Without `pairing`, jupytext is off (as ``VLR_EDITION=student make lab`` starts it). The server's settings,
    workspaces and log go to `state` (default: `root`, where the log is one more file in the file browser)."""
    state = state or root
    settings = state / ".user-settings"
    for rel, content in TEST_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    lab = launcher()
    port = lab.free_port(_first_port())
    cmd = lab.command(port, TOKEN, root, ["--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
                                          f"--LabApp.user_settings_dir={settings}",
                                          f"--LabApp.workspaces_dir={state / '.workspaces'}",
                                          "--LabApp.expose_app_in_browser=True"], pairing)
    env = {**os.environ, "VLR_FAST": "1", "JUPYTER_CONFIG_DIR": str(state / ".jupyter"), **(env or {})}
    log_path = state / "lab.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_for_server(f"{base}/api/status?token={TOKEN}", proc, log_path)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def shutdown_kernels(base: str) -> None:
    """Stop every kernel of the server (a finished notebook's kernel only holds memory)."""
    with urllib.request.urlopen(f"{base}/api/sessions?token={TOKEN}", timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        req = urllib.request.Request(f"{base}/api/sessions/{s['id']}?token={TOKEN}", method="DELETE")
        with urllib.request.urlopen(req, timeout=10):
            pass


# --------------------------------------------------------------------------- in the page

# What every plotly graph inside `root` shows (traces and images alike), as the browser holds it.
# The traces' data, the layout's shapes (e.g. a threshold line) and the title count as what a reader sees.
FIGURE_STATE = """(root) => Array.from(root.querySelectorAll('.js-plotly-plot')).map(gd =>
    JSON.stringify([(gd.data || []).map(t => [t.x, t.y, t.z, t.source, t.visible, t.text]),
                    (gd.layout || {}).shapes, ((gd.layout || {}).title || {}).text])).join('|')"""

PROMPTS = """() => Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt'))
    .map(e => e.innerText.trim())"""

ERRORS = """() => Array.from(document.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
    .map(e => e.innerText).filter(t => /Error|Traceback/.test(t)).map(t => t.slice(-1500))"""

KERNEL_READY = """() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
    return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
}"""

# Where each plotly graph ends against the notebook's visible area (the scrolled panel).
FIT = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer')
        || document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook');
    const box = panel.getBoundingClientRect();
    const right = box.left + panel.clientWidth;  // without the vertical scroll bar
    return Array.from(document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .js-plotly-plot')).map(gd => {
        const svg = gd.querySelector('.main-svg');
        const r = (svg || gd).getBoundingClientRect();
        const cell = gd.closest('.jp-Cell');
        const prompt = cell ? cell.querySelector('.jp-InputArea-prompt') : null;
        return {left: r.left, right: r.right, width: r.width, height: r.height, panelRight: right,
                title: gd._fullLayout && gd._fullLayout.title ? String(gd._fullLayout.title.text || '') : '',
                cell: prompt ? prompt.innerText.trim() : ''};
    });
}"""

# Resolves with the ms from the last release (pointerup / change in the page) to the first animation
# frame in which the explorer's figures hold different data.
WATCH = """([root, before]) => new Promise(resolve => {
    const state = () => Array.from(root.querySelectorAll('.js-plotly-plot')).map(gd =>
        JSON.stringify([(gd.data || []).map(t => [t.x, t.y, t.z, t.source, t.visible, t.text]),
                        (gd.layout || {}).shapes, ((gd.layout || {}).title || {}).text])).join('|');
    const tick = () => {
        if (window.__vlrRelease !== undefined && state() !== before) {
            resolve(performance.now() - window.__vlrRelease);
        } else {
            requestAnimationFrame(tick);
        }
    };
    tick();
})"""

MARK_RELEASE = """() => {
    delete window.__vlrRelease;
    if (window.__vlrListening) return;
    window.__vlrListening = true;
    const mark = () => { window.__vlrRelease = performance.now(); };
    document.addEventListener('pointerup', mark, true);
    document.addEventListener('change', mark, true);
}"""


@dataclass
class Move:
    """One control of one explorer moved in the browser."""

    explorer: str
    control: str
    changed: bool
    latency_ms: float | None
    error: str = ""


@dataclass
class NotebookRun:
    """What the browser saw of one notebook."""

    name: str
    seconds: float = 0.0
    prompts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    explorers: int = 0
    expected_explorers: int = 0
    moves: list[Move] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # requests that left the machine
    failure: str = ""
    screenshots: list[str] = field(default_factory=list)

    @property
    def all_ran(self) -> bool:
        return bool(self.prompts) and all(re.fullmatch(r"\[\d+\]:", p) for p in self.prompts)


async def _control(explorer):
    """The first control of an explorer a student would move: an enabled slider, else toggle buttons,
    a dropdown or a checkbox. Returns (kind, locator, label)."""
    sliders = explorer.locator(".widget-slider:not(.jp-mod-disabled):has(.noUi-handle:not([disabled]))")
    for i in range(await sliders.count()):
        s = sliders.nth(i)
        if await s.locator(".noUi-target[disabled]").count() == 0:
            return "slider", s, (await s.locator("label").first.inner_text()).strip()
    toggles = explorer.locator(".widget-toggle-buttons button:not(.mod-active):not([disabled])")
    if await toggles.count():
        b = toggles.first
        return "toggle", b, (await b.inner_text()).strip()
    selects = explorer.locator(".widget-dropdown select:not([disabled])")
    if await selects.count():
        s = selects.first
        return "dropdown", s, await s.evaluate("e => e.closest('.widget-dropdown').innerText.trim()")
    boxes = explorer.locator(".widget-checkbox input:not([disabled])")
    if await boxes.count():
        return "checkbox", boxes.first, await boxes.first.evaluate("e => e.closest('.widget-checkbox').innerText")
    return None, None, ""


async def _move(page, kind: str, control) -> None:
    """Move `control` as a hand would: drag a slider's handle well along its track and release."""
    if kind == "slider":
        track = await control.locator(".noUi-target").first.bounding_box()
        handle = await control.locator(".noUi-handle").first.bounding_box()
        if track is None or handle is None:
            raise AssertionError("the slider is not on the screen")
        x0, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
        frac = (x0 - track["x"]) / max(track["width"], 1)
        x1 = track["x"] + track["width"] * (0.8 if frac < 0.5 else 0.2)
        await page.mouse.move(x0, y)
        await page.mouse.down()
        await page.mouse.move(x1, y, steps=8)
        await page.mouse.up()
    elif kind == "toggle" or kind == "checkbox":
        await control.click()
    elif kind == "dropdown":
        options = await control.evaluate("s => Array.from(s.options).map(o => o.value)")
        current = await control.evaluate("s => s.value")
        await control.select_option(next(v for v in options if v != current))


async def move_each_explorer(page, run: NotebookRun, shots: Path | None, max_moves: int | None = None) -> None:
    """Move one control of each explorer on the page (of the first `max_moves` only, if given)."""
    explorers = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .vlr-explorer")
    run.explorers = await explorers.count()
    await page.evaluate(MARK_RELEASE)
    for i in range(run.explorers if max_moves is None else min(max_moves, run.explorers)):
        explorer = explorers.nth(i)
        name = await explorer.evaluate(
            "e => Array.from(e.classList).find(c => c.startsWith('vlr-explorer-')) || 'vlr-explorer'")
        name = f"{i}:{name.removeprefix('vlr-explorer-')}"
        await explorer.scroll_into_view_if_needed()
        await page.wait_for_function("(e) => e.querySelector('.js-plotly-plot') && "
                                     "Array.from(e.querySelectorAll('.js-plotly-plot')).every(g => g.data)",
                                     arg=await explorer.element_handle(), timeout=60_000)
        kind, control, label = await _control(explorer)
        if kind is None:
            run.moves.append(Move(name, "", False, None, "no control found"))
            continue
        root = await explorer.element_handle()
        before = await page.evaluate(FIGURE_STATE, root)
        await page.evaluate(MARK_RELEASE)
        watch = asyncio.ensure_future(page.evaluate(WATCH, [root, before]))
        try:
            await control.scroll_into_view_if_needed()
            await _move(page, kind, control)
            latency = await asyncio.wait_for(watch, timeout=60)
            run.moves.append(Move(name, f"{kind} {label}", True, float(latency)))
        except Exception as exc:  # noqa: BLE001 (reported per explorer, the test fails on it)
            watch.cancel()
            run.moves.append(Move(name, f"{kind} {label}", False, None, f"{type(exc).__name__}: {exc}"[:300]))
        if shots is not None:
            await explorer.scroll_into_view_if_needed()
            path = shots / f"{run.name}-explorer-{i}.png"
            await page.screenshot(path=str(path))
            run.screenshots.append(str(path))


async def run_notebook(browser, base: str, name: str, shots: Path | None = None, timeout_s: float = 240,
                       max_moves: int | None = None) -> NotebookRun:
    """Open `name`.ipynb in its own workspace, run all cells, check the figures and move every explorer
    (the first `max_moves` only, if given)."""
    run = NotebookRun(name, expected_explorers=explorer_calls(NOTEBOOKS / f"{name}.py"))
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    page.on("request", lambda r: _record_outside(run, r.url))
    page.on("websocket", lambda ws: _record_outside(run, ws.url))
    start = time.monotonic()
    try:
        await page.goto(f"{base}/lab/workspaces/{name}/tree/{name}.ipynb?reset&token={TOKEN}", timeout=120_000)
        await page.wait_for_selector(".jp-NotebookPanel", timeout=120_000)
        await page.locator(".jp-NotebookPanel .jp-Cell").first.click()  # the notebook becomes the current widget
        await page.wait_for_function(KERNEL_READY, timeout=120_000, polling=250)
        await page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # Done when every code cell has its execution count, or when a cell failed and nothing is queued.
        await page.wait_for_function(
            """() => {
                const prompts = Array.from(document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt'))
                    .map(p => p.innerText.trim());
                if (prompts.length && prompts.every(p => /^\\[\\d+\\]:$/.test(p))) return true;
                const failed = document.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
                return failed && /Error|Traceback/.test(failed.innerText) && !prompts.some(p => p.includes('*'));
            }""", timeout=timeout_s * 1000, polling=500)
        run.prompts = await page.evaluate(PROMPTS)
        run.errors = await page.evaluate(ERRORS)
        await page.wait_for_timeout(500)  # the last figures' first layout pass
        run.figures = await page.evaluate(FIT)
        if shots is not None:
            await screenshot_figures(page, run, shots)
        if run.all_ran:
            await move_each_explorer(page, run, shots, max_moves)
    except Exception as exc:  # noqa: BLE001 (the test reports it with the page's state)
        run.failure = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        if shots is not None:
            await page.screenshot(path=str(shots / f"{name}-failure.png"), full_page=True)
        run.errors = run.errors or await page.evaluate(ERRORS)
    finally:
        run.seconds = time.monotonic() - start
        await context.close()
    return run


async def screenshot_figures(page, run: NotebookRun, shots: Path) -> None:
    graphs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .js-plotly-plot")
    for i in range(await graphs.count()):
        g = graphs.nth(i)
        await g.scroll_into_view_if_needed()
        path = shots / f"{run.name}-figure-{i}.png"
        await page.screenshot(path=str(path))
        run.screenshots.append(str(path))


def _record_outside(run: NotebookRun, url: str) -> None:
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https", "ws", "wss") and parsed.hostname not in LOCAL_HOSTS:
        run.outside.append(url)


async def run_notebooks(base: str, names: list[str], workers: int = 2, shots: Path | None = None,
                        max_moves: int | None = None) -> list[NotebookRun]:
    """Run `names` in headless Chromium, `workers` pages at a time; kernels are stopped as notebooks finish."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        queue: asyncio.Queue[str] = asyncio.Queue()
        for n in names:
            queue.put_nowait(n)
        results: dict[str, NotebookRun] = {}

        async def worker() -> None:
            while not queue.empty():
                name = queue.get_nowait()
                results[name] = await run_notebook(browser, base, name, shots, max_moves=max_moves)
                await asyncio.to_thread(_stop_kernel_of, base, f"{name}.ipynb")

        await asyncio.gather(*(worker() for _ in range(max(1, workers))))
        await browser.close()
    return [results[n] for n in names]


def _stop_kernel_of(base: str, path: str) -> None:
    with urllib.request.urlopen(f"{base}/api/sessions?token={TOKEN}", timeout=10) as r:
        sessions = json.load(r)
    for s in sessions:
        if s.get("path") == path:
            req = urllib.request.Request(f"{base}/api/sessions/{s['id']}?token={TOKEN}", method="DELETE")
            with urllib.request.urlopen(req, timeout=10):
                pass


# --------------------------------------------------------------------------- opening a notebook, running nothing

# "dialog" when JupyterLab shows one (jupytext's "File Load Error", "Select Kernel", ...), "ready" when the
# notebook at `path` is loaded and has its kernel (past the point where JupyterLab would ask for one), else false.
OPENED = """(path) => {
    if (document.querySelector('.jp-Dialog')) return 'dialog';
    const app = window.jupyterapp;
    const panel = app && Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
    const session = panel && panel.sessionContext.session;
    return panel && panel.context.isReady && session && session.kernel ? 'ready' : false;
}"""

DIALOGS = """() => Array.from(document.querySelectorAll('.jp-Dialog')).map(d => d.innerText.trim().slice(0, 3000))"""

NOTEBOOK_JSON = """(path) => Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path).context.model.toJSON()"""

LISTING = """() => Array.from(document.querySelectorAll('.jp-DirListing-content .jp-DirListing-itemText'))
    .map(e => e.innerText.trim())"""


@dataclass
class Opened:
    """What the browser showed when it opened one notebook: any dialog, the notebook as JupyterLab holds it, and
    the file browser's listing of the server's root."""

    path: str
    dialogs: list[str] = field(default_factory=list)
    notebook: dict | None = None
    listing: list[str] = field(default_factory=list)
    failure: str = ""


async def _open(page, path: str, settle_ms: int) -> Opened:
    """Open `path` as a double click in the file browser does (docmanager:open), look, then close it."""
    opened = Opened(path)
    try:
        await page.evaluate("(p) => { window.jupyterapp.commands.execute('docmanager:open', {path: p}); }", path)
        await page.wait_for_function(OPENED, arg=path, timeout=120_000, polling=100)
        await page.wait_for_timeout(settle_ms)  # a dialog that would come after the kernel (none should)
        opened.dialogs = await page.evaluate(DIALOGS)
        if not opened.dialogs:
            opened.notebook = await page.evaluate(NOTEBOOK_JSON, path)
        opened.listing = await page.evaluate(LISTING)
    except Exception as exc:  # noqa: BLE001 (the test reports it)
        opened.failure = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        opened.dialogs = opened.dialogs or await page.evaluate(DIALOGS)
    for _ in range(await page.locator(".jp-Dialog").count()):  # dismissed, so the next notebook starts clean
        await page.keyboard.press("Escape")
    # Disposed, not closed: a notebook without language_info in its metadata gets it from the kernel, which
    # JupyterLab counts as a change, and closing would ask whether to save it.
    await page.evaluate("""(path) => Array.from(window.jupyterapp.shell.widgets('main'))
        .filter(w => w.context && w.context.path === path).forEach(w => w.dispose())""", path)
    return opened


async def open_notebooks(base: str, paths: list[str], settle_ms: int = 500) -> list[Opened]:
    """Open each notebook of `paths` (relative to the server's root) in one JupyterLab page, one after another,
    running no cell; each is closed and its kernel stopped before the next."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), headless=True, args=["--no-sandbox"])
        page = await browser.new_page(viewport=VIEWPORT)
        await page.goto(f"{base}/lab?reset&token={TOKEN}", timeout=120_000)
        await page.wait_for_selector(".jp-DirListing-content .jp-DirListing-item", timeout=120_000)
        results = []
        for path in paths:
            results.append(await _open(page, path, settle_ms))
            await asyncio.to_thread(shutdown_kernels, base)
        await browser.close()
    return results


def run_in_lab(root: Path, names: list[str], workers: int = 2, shots: Path | None = None,
               max_moves: int | None = None) -> list[NotebookRun]:
    """Fresh .ipynb copies of `names` in `root`, one JupyterLab server on them, each run in its own page
    (:func:`run_notebooks`); prints what each run saw. VLR_RUNS is a fresh folder, as nbval's: the runs
    train what they show; the feature caches are the user's."""
    for name in names:
        to_ipynb(NOTEBOOKS / f"{name}.py", root / f"{name}.ipynb")
    with lab_server(root, {"VLR_RUNS": str(root / "runs")}) as base:
        results = asyncio.run(run_notebooks(base, names, workers, shots, max_moves))
    for run in results:
        print(describe(run))
    return results


def describe(run: NotebookRun) -> str:
    """One line: the notebook's time, its figures, and each moved explorer's release-to-redraw latency."""
    moves = ", ".join(f"{m.explorer} {m.latency_ms:.0f} ms" if m.changed else f"{m.explorer} FAILED" for m in run.moves)
    return f"{run.name}: {run.seconds:.0f} s, {len(run.figures)} figures; {moves or 'no explorers'}"
