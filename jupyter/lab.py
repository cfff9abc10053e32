"""Start JupyterLab on the workbook with this project's settings: what `make lab` runs.

    python jupyter/lab.py [--no-pairing] [NOTEBOOK] [extra jupyter-lab options]

It picks a free port (8888 or the next free one; LAB_PORT chooses), makes a token, prints the
address to open and how to stop the server, then replaces itself with ``jupyter lab`` reading
jupyter/jupyter_lab_config.py: widget state saved with the notebooks, no news prompt, no update
check. Nothing is written to, or changed in, the user's own Jupyter configuration. JupyterLab's
root is the current folder.

``--no-pairing`` turns jupytext's server extension off: every notebook is a plain .ipynb, paired with
no .py whatever a jupytext configuration says, as in the JupyterLab a student installs from the
student bundle. ``VLR_EDITION=student make lab`` starts it so in build/student/, which holds the
student notebooks and nothing else.
"""
from __future__ import annotations

import os
import secrets
import socket
import sys
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "jupyter_lab_config.py"
FIRST_PORT = 8888


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(first: int = FIRST_PORT, tries: int = 50) -> int:
    """`first` or the next free port after it (what Jupyter itself would pick, but known in advance)."""
    for port in range(first, first + tries):
        if port_is_free(port):
            return port
    raise SystemExit(f"lab: no free port in {first}-{first + tries - 1}; set LAB_PORT to a free one")


#: What turns jupytext's contents manager off (its server extension, which pairs an .ipynb with a .py).
NO_PAIRING = "--ServerApp.jpserver_extensions=jupyterlab_jupytext=False"


def command(port: int, token: str, root_dir: Path, extra: list[str] = (), pairing: bool = True) -> list[str]:
    """The ``jupyter lab`` command line with the project's settings (also used by the browser tests); without
    `pairing`, jupytext's server extension is off."""
    return [sys.executable, "-m", "jupyterlab", f"--config={CONFIG}", f"--port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
            *([] if pairing else [NO_PAIRING]), *extra]


def banner(url: str) -> str:
    return "\n".join([
        "",
        "JupyterLab for vlr-workbook",
        f"  open:  {url}",
        "  stop:  Ctrl-C twice in this terminal (or File > Shut Down in JupyterLab)",
        f"  settings: {CONFIG.parent.name}/ (this project only; your own Jupyter settings are left as they are)",
        "",
    ])


def main(argv: list[str]) -> None:
    pairing = "--no-pairing" not in argv[:1]
    argv = argv[0 if pairing else 1:]
    notebook = argv[0] if argv and not argv[0].startswith("-") else None
    extra = argv[1:] if notebook else argv
    port_env = os.environ.get("LAB_PORT", "").strip()
    if port_env and not (port_env.isdigit() and 0 < int(port_env) < 65536):
        raise SystemExit(f"lab: LAB_PORT must be a port number, got {port_env!r}")
    port = int(port_env) if port_env else free_port()
    if port_env and not port_is_free(port):
        raise SystemExit(f"lab: port {port} (LAB_PORT) is in use; choose another or unset LAB_PORT")
    token = secrets.token_hex(24)
    root = Path.cwd()
    path = f"tree/{quote(notebook)}" if notebook else "tree"
    print(banner(f"http://localhost:{port}/lab/{path}?token={token}"), flush=True)
    cmd = command(port, token, root, ([notebook] if notebook else []) + extra, pairing)
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
