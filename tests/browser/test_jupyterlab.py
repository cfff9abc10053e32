"""End to end in a real browser: JupyterLab on localhost, headless Chromium, notebook 04.

It opens notebook 04 in JupyterLab, runs every cell from the Run menu, drags the
"margin m" slider of the first explorer, and checks that the plotly figure in the
page changed. It drives the distribution's Chromium through Playwright (no browser
download) and skips, saying why, only where Chromium or Playwright is missing.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "04_unified_loss.py"
EXPLORER = ".vlr-explorer-unified"
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")

pytestmark = pytest.mark.browser


def _chromium() -> str | None:
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-3000:]
            raise RuntimeError(f"JupyterLab exited early with code {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer at {url} within {timeout} s")


def _write_lab_settings(settings_dir: Path) -> None:
    """Lab settings for the test: render every cell (JupyterLab 4 detaches off-screen cells by
    default, so a widget below the fold would never count as visible) and no news prompt."""
    files = {
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
            "windowingMode": "none",
            "autoStartDefaultKernel": True,  # never stop at the "Select Kernel" dialog
        },
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }
    for rel, content in files.items():
        path = settings_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a fresh copy of notebook 04."""
    root = tmp_path_factory.mktemp("lab")
    ipynb = root / "04_unified_loss.ipynb"
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / "jupytext"), "--quiet", "--to", "notebook", "--output", str(ipynb), str(NOTEBOOK)],
                   check=True)
    _write_lab_settings(root / "settings")
    port, token = _free_port(), "vlr-browser-test"
    env = {**os.environ, "VLR_FAST": "1", "JUPYTER_CONFIG_DIR": str(root / ".jupyter")}
    cmd = [str(bin_dir / "jupyter"), "lab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False",
           "--allow-root", f"--LabApp.user_settings_dir={root / 'settings'}", "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log_path = root / "lab.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_server(f"http://127.0.0.1:{port}/api/status?token={token}", proc, log_path)
        yield f"http://127.0.0.1:{port}/lab/tree/{ipynb.name}?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _figure_state(page) -> str:
    """The data of the explorer's first plotly graph, as the browser holds it."""
    return page.evaluate(
        """(sel) => {
            const gd = document.querySelector(sel + ' .js-plotly-plot');
            if (!gd || !gd.data) return null;
            return JSON.stringify(gd.data.map(t => [t.x, t.y, t.z]));
        }""",
        EXPLORER,
    )


def _accept_kernel_dialog(page) -> None:
    """Under load JupyterLab may still ask which kernel to use; take the preselected Python 3."""
    dialog = page.locator(".jp-Dialog:has-text('Select Kernel')")
    try:
        dialog.wait_for(state="visible", timeout=5_000)
    except Exception:  # no dialog: nothing to accept
        return
    dialog.locator("button.jp-mod-accept").click()


def _diagnose(page, where: Path) -> str:
    """What the page shows when a wait fails: kernel status, error outputs, a screenshot."""
    shot = where / "failure.png"
    page.screenshot(path=str(shot), full_page=True)
    status = page.evaluate(
        "() => { const e = document.querySelector('.jp-Notebook-ExecutionIndicator');"
        " return e ? e.getAttribute('data-status') : 'unknown'; }"
    )
    errors = page.evaluate(
        "() => Array.from(document.querySelectorAll("
        "'[data-mime-type=\"application/vnd.jupyter.stderr\"], .jp-OutputArea-output .ansi-red-fg'))"
        ".map(e => e.innerText.slice(0, 2000))"
    )
    return f"kernel status {status}; screenshot {shot}; error outputs: {errors or 'none'}"


def test_notebook_04_slider_changes_the_figure(lab, tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium); .ci/run installs it")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(lab, timeout=120_000)
            page.wait_for_selector(".jp-NotebookPanel", timeout=120_000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            _accept_kernel_dialog(page)
            page.click("#jp-MainMenu >> text=Run")
            page.click("li.lm-Menu-item:has-text('Run All Cells')")
            _accept_kernel_dialog(page)
            explorer = page.locator(EXPLORER).first
            explorer.wait_for(state="attached", timeout=180_000)
            explorer.scroll_into_view_if_needed()
            explorer.wait_for(state="visible", timeout=30_000)
            page.wait_for_function(
                "(sel) => { const gd = document.querySelector(sel + ' .js-plotly-plot'); return gd && gd.data; }",
                arg=EXPLORER, timeout=60_000,
            )
            before = _figure_state(page)
            slider = explorer.locator(".widget-slider:has(label:text-is('margin m'))").first
            handle = slider.locator(".noUi-handle").first
            box = handle.bounding_box()
            assert box is not None, "the margin slider's handle is not on the page"
            # Drag and release: the explorer's sliders update on release (continuous_update=False).
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] / 2 + 60, box["y"] + box["height"] / 2, steps=8)
            page.mouse.up()
            page.wait_for_function(
                """([sel, before]) => {
                    const gd = document.querySelector(sel + ' .js-plotly-plot');
                    return gd && JSON.stringify(gd.data.map(t => [t.x, t.y, t.z])) !== before;
                }""",
                arg=[EXPLORER, before], timeout=60_000,
            )
            after = _figure_state(page)
            assert after != before
            assert json.loads(after), "the figure has no data after the slider moved"
        except sync_api.TimeoutError as exc:
            pytest.fail(f"{exc.message.splitlines()[0]}\n{_diagnose(page, tmp_path)}")
        finally:
            browser.close()
