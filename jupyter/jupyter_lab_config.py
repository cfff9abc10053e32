"""JupyterLab settings of this project, used by `make lab` (jupyter/lab.py) and the browser tests.

Passed on the command line (``--config``), so nothing in the user's own Jupyter configuration
(~/.jupyter, JUPYTER_CONFIG_DIR, JUPYTERLAB_SETTINGS_DIR) is read for these keys or written:
- the default settings of this project's JupyterLab live in jupyter/settings/overrides.json:
  widget state saved with each notebook (a reopened notebook shows its last figures), no
  "fetch the Jupyter news?" prompt and no update check; a user can still change any of them
  in Settings, which JupyterLab stores in the user's own settings folder, as usual;
- no request to the news feed or the PyPI update check (a classroom may be offline).
"""
from pathlib import Path

c = get_config()  # noqa: F821 (defined by the config loader)

c.LabApp.app_settings_dir = str(Path(__file__).resolve().parent / "settings")
c.LabApp.news_url = None
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"
