"""vlr_lib.experiments.record: recorded runs are exact, checked by hash, never drawn when damaged, and not stale."""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from vlr_lib import losses
from vlr_lib.report.labels import hyperparameters
from vlr_lib.experiments import (batch_size, cells, difficulty, grid, lessons, optimizer, preregistration, record,
                                 replication, showdown, tuned)

from tests.train.toy import toy_features

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {"experiment": "test", "epochs": 2, "losses": {"Triplet-SH": ["triplet_hardest", {"margin": 0.2}]}}
ROWS = [{"run": 0, "epoch": 1, "rsum": 101.30000000000001, "test": {"rsum": 99.5, "C": {"W": float("nan")}},
         "steps": 3, "name": "a/b", "flag": True, "none": None, "empty": {}},
        {"run": 0, "epoch": 2, "rsum": 1e-300, "steps": 3}]  # the second row lacks keys: they stay absent


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, and of the same types."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def test_tables_round_trip_every_value_exactly_and_bytes_are_deterministic():
    data = record.encode_table(ROWS)
    assert all(same(a, b) for a, b in zip(ROWS, record.decode_table(data)))
    assert data == record.encode_table(ROWS)  # gzip without a timestamp: the same rows, the same sha256
    with pytest.raises(ValueError, match="cannot contain"):
        record.encode_table([{"a/b": 1}])


def test_write_then_read_only_for_the_same_settings(tmp_path):
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="cmd", title="a test", wall_seconds=1.25,
                       train_seconds=1.0, root=tmp_path)
    found = record.read("exp", json.loads(json.dumps(SETTINGS)), root=tmp_path)  # tuples or lists: the same JSON
    assert found is not None and found.path == path and all(same(a, b) for a, b in zip(ROWS, found.tables["epochs"]))
    m = found.manifest
    assert m["settings_sha256"] == record.settings_hash(SETTINGS) and m["command"] == "cmd"
    assert m["hardware"]["cores"] == os.cpu_count() and m["library"]["torch"] == torch.__version__
    assert "Opened from the record exp" in found.line() and "VLR_RERUN=1" in found.line()
    assert record.read("exp", {**SETTINGS, "epochs": 3}, root=tmp_path) is None  # other settings: quietly None
    assert record.read("exp", None, root=tmp_path) is not None  # no settings: integrity only
    assert record.read("missing", SETTINGS, root=tmp_path) is None
    assert record.problems(path, SETTINGS) == []
    assert "stale" in record.problems(path, {"other": 1})[0]


def test_write_replaces_the_old_record_and_leaves_no_temp_folder(tmp_path):
    record.write("exp", SETTINGS, {"epochs": ROWS}, command="old", title="t", wall_seconds=1, root=tmp_path)
    record.write("exp", SETTINGS, {"epochs": ROWS[:1]}, command="new", title="t", wall_seconds=1, root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".exp.lock", "exp"]  # the writers' lock file stays
    assert record.read("exp", SETTINGS, root=tmp_path).manifest["command"] == "new"


def _damage(path: Path, how: str) -> None:
    table, manifest = path / "epochs.csv.gz", path / record.MANIFEST
    if how == "truncated":
        table.write_bytes(table.read_bytes()[:-20])
    elif how == "edited number":
        text = gzip.decompress(table.read_bytes()).decode().replace("99.5", "99.6")
        table.write_bytes(gzip.compress(text.encode(), mtime=0))
    elif how == "missing table":
        table.unlink()
    elif how == "edited settings":
        m = json.loads(manifest.read_text())
        m["settings"]["epochs"] = 3
        manifest.write_text(json.dumps(m))
    elif how == "garbage manifest":
        manifest.write_text("{not json")


@pytest.mark.parametrize("how", ["truncated", "edited number", "missing table", "edited settings", "garbage manifest"])
def test_a_damaged_or_hand_edited_record_warns_and_is_not_used(tmp_path, how):
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1, root=tmp_path)
    _damage(path, how)
    with pytest.warns(record.RecordWarning, match="make record"):
        assert record.read("exp", SETTINGS, root=tmp_path) is None
    assert record.problems(path)


def test_keep_writes_only_where_vlr_record_asks(tmp_path, monkeypatch):
    monkeypatch.delenv(record.RECORD_ENV, raising=False)
    assert record.keep("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1) is None
    monkeypatch.setenv(record.RECORD_ENV, str(tmp_path))
    assert record.keep("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1) == tmp_path / "exp"
    monkeypatch.setenv(record.RECORD_ENV, "relative/path")
    with pytest.raises(ValueError, match=record.RECORD_ENV):
        record.destination()


def test_check_reproduced_states_the_gap_and_names_the_fix():
    assert record.check_reproduced([100.0, 200.0], [101.0, 199.5], "x", strict=True) == 1.0
    with pytest.raises(AssertionError, match=rf"x: .* > {record.RSUM_TOLERANCE} rsum points.*make record"):
        record.check_reproduced([100.0, 200.0], [100.0, 200.0 + 2 * record.RSUM_TOLERANCE], "x", strict=True)
    with pytest.raises(AssertionError, match="2 epochs"):
        record.check_reproduced([100.0, 200.0], [100.0], "x", strict=False)
    with pytest.raises(AssertionError):
        record.check_reproduced([100.0], [float("nan")], "x", strict=True)


def test_each_record_has_its_measured_tolerance():
    from vlr_lib.experiments import protocol

    assert {p.name for p in SHIPPED} == set(protocol.EXPERIMENTS)  # every shipped record is an experiment's, once
    for name, entry in protocol.EXPERIMENTS.items():
        assert protocol.tolerance(name) == entry.tolerance and 0 < entry.tolerance
    assert protocol.tolerance("made-elsewhere") == protocol.tolerance(None) == record.RSUM_TOLERANCE
    limit = protocol.EXPERIMENTS["09_training-shapes-full"].tolerance
    assert record.check_reproduced([100.0], [100.0 + limit], "x", limit, strict=True) == limit
    with pytest.raises(AssertionError, match=f"> {limit} rsum points"):
        record.check_reproduced([100.0], [100.0 + limit + 0.01], "x", limit, strict=True)


@pytest.mark.parametrize("env, strict", [({}, False), ({"VLR_FAST": "1"}, True), ({"VLR_BOOK": "1"}, True),
                                         ({"VLR_FAST": "0", "VLR_BOOK": "0"}, False)])
def test_a_drift_fails_the_tests_and_the_book_and_warns_a_student_in_full_mode(monkeypatch, env, strict):
    for name in ("VLR_FAST", "VLR_BOOK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert record.strict_checks() is strict
    far = [100.0 + 3 * record.RSUM_TOLERANCE]
    if strict:
        with pytest.raises(AssertionError, match="regenerate it with make record"):
            record.check_reproduced([100.0], far, "notebook 09's record")
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gap = record.check_reproduced([100.0], far, "notebook 09's record")  # the chapter goes on
    assert gap == 3 * record.RSUM_TOLERANCE
    (w,) = [w for w in caught if issubclass(w.category, record.RecordDriftWarning)]
    text = str(w.message)
    assert "notebook 09's record" in text and f"{gap:.2f}" in text and "goes on with the recorded numbers" in text


def test_a_record_of_another_shapes_encoder_is_not_opened(tmp_path, monkeypatch):
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1, root=tmp_path)
    assert json.loads((path / record.MANIFEST).read_text())["shapes_encoder"] == record.encoder_sha256()
    monkeypatch.setattr(record, "encoder_sha256", lambda: "f" * 64)  # the encoder was re-trained since
    with pytest.warns(record.RecordWarning, match="made with the shapes encoder"):
        assert record.read("exp", SETTINGS, root=tmp_path) is None


def test_a_grid_recorded_and_read_back_is_the_grid_runs_table(tmp_path):
    img, txt, c2i = toy_features(16, 2, 12)
    out = tmp_path / "grid"
    runs = grid(["triplet_hardest", "info_nce"], seeds=[0, 1], train=(img, txt, c2i), val=(img, txt, c2i), out=out,
                epochs=2, batch_size=8, dim=8, lr=5e-3, probe_batch=0, progress=False).runs
    cells = record.grid_cells(out, runs["key"])
    record.write("g", SETTINGS, record.cell_rows(cells), command="c", title="t", wall_seconds=1,
                 train_seconds=record.train_seconds(record.cell_rows(cells)["epochs"]), root=tmp_path)
    back = record.cells_of(record.read("g", SETTINGS, root=tmp_path).tables)
    pd.testing.assert_frame_equal(record.cell_table(back), runs)
    assert record.cell_history(back, {"loss": "info_nce"}, 1) == cells[3]["history"]
    with pytest.raises(KeyError, match="seed 7"):
        record.cell_history(back, {"loss": "info_nce"}, 7)


# --------------------------------------------------------------------------- the records that ship

SHIPPED = sorted(p for p in record.RECORDED.glob("*") if (p / record.MANIFEST).exists())


def test_records_ship_as_package_data_within_the_size_budget():
    assert SHIPPED, "no recorded runs in vlr_lib/recorded (make record writes them)"
    size = sum(f.stat().st_size for p in SHIPPED for f in p.iterdir())
    assert size < 5_000_000, f"the records take {size / 1e6:.1f} MB"
    assert '"recorded/*/*.csv.gz"' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_recorded_table_matches_its_manifest_hash(path):
    assert record.problems(path) == [], f"{path}: {record.problems(path)}; regenerate with {record.REGENERATE}"
    m = json.loads((path / record.MANIFEST).read_text())
    assert {"command", "date", "hardware", "library", "wall_seconds", "train_seconds"} <= m.keys()
    # a shipped record is made with the shipped encoder and covers its own manifest (an edited date is caught)
    assert m["shapes_encoder"] == record.encoder_sha256() and m[record.MANIFEST_HASH] == record.manifest_hash(m)
    assert record.read(path.name, None) is not None


def _notebook_key(stem: str, tmp_path: Path) -> tuple[str, dict]:
    """NAME and KEY of a notebook's opening code cells in full mode (its imports, hidden in the book, then its
    settings; nothing is trained there): every code cell up to the one that sets KEY."""
    source = next((ROOT / "notebooks").glob(f"{stem}_*.py")).read_text()
    cells = re.split(r"^# %%.*$", source, flags=re.M)
    headers = re.findall(r"^# %%.*$", source, flags=re.M)
    code = [body for header, body in zip(headers, cells[1:]) if "[markdown]" not in header]
    upto = next(i for i, body in enumerate(code) if re.search(r"^KEY\s*=", body, flags=re.M))
    first = "\n".join(code[: upto + 1])
    code = first + "\nimport json\nprint(json.dumps({'name': NAME, 'key': KEY}))"
    env = {**os.environ, "VLR_FAST": "0", "VLR_RERUN": "0", "VLR_DATA": "shapes", "VLR_DEVICE": "cpu",
           "VLR_RUNS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=ROOT / "notebooks")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["name"], out["key"]


def _current(name: str, tmp_path: Path) -> dict:
    """What the code would record now under `name` (the settings a notebook in full mode looks the record up by)."""
    for setting in ("features", "vsepp"):
        spec = cells.spec_for("shapes", False, setting)
        if name == spec.out.name:
            return showdown.record_key(spec)
    if name == lessons.LessonsSpec().out.name:
        return lessons.record_key(lessons.LessonsSpec())
    if name == tuned.out_dir(tuned.spec_for()).name:
        return tuned.record_key(tuned.spec_for())
    if name == batch_size.out_dir(batch_size.spec_for()).name:
        return batch_size.record_key(batch_size.spec_for())
    if name == difficulty.out_dir().name:
        return difficulty.record_key()
    if name == replication.NAME:
        return replication.record_key(preregistration.load())
    if name == optimizer.NAME:
        return optimizer.record_key(preregistration.load_optimizer())
    # the notebook whose number starts the name first (each notebook's settings cell runs in its own Python)
    for stem in sorted(("09", "11"), key=lambda s: not name.startswith(f"{s}_")):
        nb_name, key = _notebook_key(stem, tmp_path)
        if nb_name == name:
            return key
    raise AssertionError(f"the record {name} belongs to no experiment of the code: delete it")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_no_record_is_stale(path, tmp_path):
    """The code's current settings of each experiment hash to its record's: a change needs `make record`."""
    manifest = json.loads((path / record.MANIFEST).read_text())
    current = _current(path.name, tmp_path)
    assert record.settings_hash(current) == manifest["settings_sha256"], (
        f"the record {path.name} is stale: the settings in the code changed since it was made "
        f"({manifest['date']}); regenerate it with {record.REGENERATE} --only <step>")


def test_a_changed_loss_default_makes_the_records_stale(monkeypatch):
    """Keys hold every resolved hyperparameter (registry.resolved): a new default of Triplet-SH's margin is a key the
    shipped showdown record was not made under, so it is not opened (the old numbers never show under the new
    label), and the record checker says "stale"."""
    spec = cells.spec_for("shapes", False, "features")
    path = record.RECORDED / spec.out.name
    assert record.read(spec.out.name, showdown.record_key(spec)) is not None
    monkeypatch.setattr(losses.triplet_hardest, "__defaults__", (0.3, "sum", None))
    assert record.read(spec.out.name, showdown.record_key(spec)) is None
    assert [p for p in record.problems(path, showdown.record_key(spec)) if p.startswith("stale")]
    assert "margin=0.3" in hyperparameters("triplet_hardest")  # the label moved with it


# --------------------------------------------------------------------------- issue 23: the manifest as a whole


def _edit(path: Path, change, rehash: bool) -> None:
    """Apply `change` to the manifest; with `rehash`, as a forger who also recomputes the manifest's own hash
    (so that only the check under test can catch it)."""
    manifest = path / record.MANIFEST
    m = json.loads(manifest.read_text())
    change(m, path)
    if rehash and isinstance(m, dict):
        m[record.MANIFEST_HASH] = record.manifest_hash(m)
    manifest.write_text(json.dumps(m))


def _foreign(m: dict, path: Path) -> None:
    """Point the table at another record's file, with that file's sha256 and row count."""
    other = record.write("other", SETTINGS, {"epochs": ROWS[:1]}, command="c", title="t", wall_seconds=1,
                         root=path.parent)
    m["tables"]["epochs"] = {**json.loads((other / record.MANIFEST).read_text())["tables"]["epochs"],
                             "file": "../other/epochs.csv.gz"}


MANIFEST_CASES = [  # (name, change, rehash, the problem it must be reported as)
    ("edited date", lambda m, p: m.update(date="2020-01-01T00:00:00+00:00"), False, "date, hardware, meta"),
    ("edited hardware", lambda m, p: m["hardware"].update(cpu="a faster CPU"), False, "date, hardware, meta"),
    ("edited meta", lambda m, p: m["meta"].update(note="best ever"), False, "date, hardware, meta"),
    ("missing rows", lambda m, p: m["tables"]["epochs"].pop("rows"), True, "table epochs: rows is missing"),
    ("text rows", lambda m, p: m["tables"]["epochs"].update(rows="2"), True, "table epochs: rows is a str"),
    ("tables a list", lambda m, p: m.update(tables=[]), True, "tables is a list"),
    ("tables empty", lambda m, p: m.update(tables={}), True, "tables is empty"),
    ("no hardware", lambda m, p: m.pop("hardware"), True, "hardware is missing"),
    ("hardware without cores", lambda m, p: m["hardware"].pop("cores"), True, "hardware has no cores"),
    ("another record's table", _foreign, True, "not a plain file name inside the record's folder"),
    ("a hidden file", lambda m, p: m["tables"]["epochs"].update(file=".epochs.csv.gz"), True, "not a plain file"),
    # issue 35: deleting the hash turned the edit check off, and a forged date, CPU and meta were shown as fact
    ("no manifest hash", lambda m, p: m.pop(record.MANIFEST_HASH), False, "manifest_sha256 is missing"),
    ("forged, then no hash", lambda m, p: (m.update(date="2020-01-01T00:00:00+00:00", meta={"note": "forged"}),
                                           m["hardware"].update(cpu="Cray-1", cores=2), m.pop(record.MANIFEST_HASH)),
     False, "manifest_sha256 is missing"),
    ("hash a number", lambda m, p: m.update(manifest_sha256=0), False, "manifest_sha256 is a int"),
]


@pytest.mark.parametrize("change, rehash, problem", [c[1:] for c in MANIFEST_CASES], ids=[c[0] for c in MANIFEST_CASES])
def test_a_manifest_edited_or_malformed_anywhere_warns_and_is_not_used(tmp_path, change, rehash, problem):
    """Was: an edited date/hardware/meta shown as fact, a KeyError ('rows'), an AttributeError (tables []), and
    another record's rows opened through '../'."""
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1, root=tmp_path)
    _edit(path, change, rehash)
    with pytest.warns(record.RecordWarning, match=problem):
        assert record.read("exp", SETTINGS, root=tmp_path) is None


@pytest.mark.parametrize("which", ["epochs.csv.gz", record.MANIFEST])
def test_a_fifo_in_a_record_is_refused_without_reading_it(tmp_path, which):
    """Was: read() hung forever on a table file that is a FIFO."""
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1, root=tmp_path)
    (path / which).unlink()
    os.mkfifo(path / which)
    with pytest.warns(record.RecordWarning, match="is not a regular file"):
        assert record.read("exp", SETTINGS, root=tmp_path) is None


DEEP = 10**5
NESTED = {  # issue 35: each raised RecursionError out of read() and grid_or_train()
    "a list": "[" * DEEP + "]" * DEEP,
    "an object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "deep settings": json.dumps({"format": record.FORMAT})[:-1] + ', "settings": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}",
}


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_a_manifest_nested_too_deep_warns_and_is_re_trained(tmp_path, text, monkeypatch):
    path = record.write("exp", SETTINGS, {"epochs": ROWS}, command="c", title="t", wall_seconds=1, root=tmp_path)
    (path / record.MANIFEST).write_text(text)
    with pytest.warns(record.RecordWarning, match="manifest.json unreadable"):
        assert record.read("exp", SETTINGS, root=tmp_path) is None
    assert record.problems(path)
    monkeypatch.setattr(record, "RECORDED", tmp_path)  # grid_or_train reads the shipped records' folder
    monkeypatch.delenv(record.RECORD_ENV, raising=False)
    trained = grid_result(pd.DataFrame({"key": ["k"]}))
    with pytest.warns(record.RecordWarning, match="RecursionError"):
        runs, rec = record.grid_or_train("exp", SETTINGS, lambda: trained)
    assert rec is None and runs is trained.runs


def grid_result(runs: pd.DataFrame):
    """What grid() returns, for grid_or_train (no folder: nothing to keep)."""
    from vlr_lib.experiments.grid_search import GridResult

    return GridResult(runs, pd.DataFrame())


#: A writer that SIGKILLs itself right after the rename number `argv[2]` of atomic_dir (1: the old record moved
#: aside, 2: the new one moved in), replacing the record in `argv[1]`.
KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from vlr_lib import _io
from vlr_lib.experiments import record

root, after = Path(sys.argv[1]), int(sys.argv[2])
real, renames = os.replace, []

def replace(src, dst):
    real(src, dst)
    if Path(dst).parent == root:  # atomic_dir's renames, not the files written inside the new folder
        renames.append(dst)
        if len(renames) == after:
            os.kill(os.getpid(), signal.SIGKILL)

_io.os.replace = replace
settings = {"experiment": "test", "epochs": 2, "losses": {"Triplet-SH": ["triplet_hardest", {"margin": 0.2}]}}
record.write("exp", settings, {"epochs": [{"run": 0, "epoch": 1, "rsum": 1.0}]}, command="new", title="t",
             wall_seconds=1, root=root)
"""


@pytest.mark.parametrize("after, command", [(1, "old"), (2, "new")])
def test_a_write_killed_between_its_renames_leaves_the_old_or_the_new_record(tmp_path, after, command):
    """Was: killed after the first rename, no record at all (only .old-PID and .tmp leftovers), read() None."""
    record.write("exp", SETTINGS, {"epochs": ROWS}, command="old", title="t", wall_seconds=1, root=tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(tmp_path), str(after)], env=env, timeout=120,
                          capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    found = record.read("exp", SETTINGS, root=tmp_path)
    assert found is not None and found.manifest["command"] == command
    record.write("exp", SETTINGS, {"epochs": ROWS}, command="again", title="t", wall_seconds=1, root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".exp.lock", "exp"]  # the next write tidies up


def test_a_record_says_how_many_of_its_runs_were_still_rising(tmp_path):
    """run "a" peaks at epoch 2 of 3, run "b" at its last epoch; a tie keeps the first epoch of the best value."""
    epochs = [{"run": r, "epoch": e, "rsum": v} for r, vs in (("a", (1.0, 5.0, 4.0)), ("b", (1.0, 2.0, 3.0)),
                                                             ("c", (1.0, 3.0, 3.0))) for e, v in enumerate(vs, 1)]
    record.write("exp", SETTINGS, {"epochs": epochs}, command="cmd", title="t", wall_seconds=1.0, root=tmp_path)
    found = record.read("exp", SETTINGS, root=tmp_path)
    assert found.last_epoch_share() == pytest.approx(1 / 3)
    assert "33% of its runs select their last epoch" in found.line()
    record.write("other", SETTINGS, {"runs": [{"x": 1}]}, command="cmd", title="t", wall_seconds=1.0, root=tmp_path)
    assert record.read("other", SETTINGS, root=tmp_path).last_epoch_share() is None  # no per-epoch table
