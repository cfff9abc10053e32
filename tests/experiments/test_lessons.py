"""vlr_lib.experiments.lessons: the conditions of notebook 12's experiments, their cells, the stored table."""
from __future__ import annotations

import pandas as pd
import pytest

from vlr_lib.report.lessons import lesson_table
from vlr_lib.data.shapes import scene_overlap, split_scenes
from vlr_lib.data import make_shapes
from vlr_lib.experiments import cells, lessons

TINY = {"n_train": 24, "n_val": 12, "n_test": 12, "epochs": 2, "batch_size": 12, "dim": 8, "probe": 12,
        "word_dim": 8, "hidden": 8}


def tiny(**kw) -> lessons.LessonsSpec:
    return lessons.LessonsSpec(fast=True, seeds=(0, 1), difficulties=(0.0, 1.0), warmup_epochs=(1,), showdown=TINY,
                               **kw)


def test_conditions_change_one_thing_each():
    spec = lessons.LessonsSpec(fast=True)
    conds = lessons.conditions(spec)
    by = {c.experiment: [x for x in conds if x.experiment == c.experiment] for c in conds}
    assert list(by) == list(lessons.EXPERIMENTS)
    assert [c.spec.image_encoder for c in by["features"]] == ["random", "pretrained"]
    assert [c.spec.difficulty for c in by["difficulty"]] == [0.0, 0.5, 1.0]
    assert [c.losses()["triplet_hardest"] for c in by["warmup"]] == [
        "triplet_hardest", "warmup:triplet_all:1:triplet_hardest", "warmup:triplet_all:2:triplet_hardest"]
    assert [c.spec.setting for c in by["setting"]] == ["features", "vsepp", "e2e"]
    base = by["features"][1].spec  # pretrained, difficulty 0.5, heads on features: the showdown's spec
    assert base == by["difficulty"][1].spec == by["warmup"][0].spec == by["setting"][0].spec
    # (e): the first warm-up of (c) under each optimizer handling; its first condition is (c)'s own
    optimizer = by["optimizer"]
    assert {c.losses()["triplet_hardest"] for c in optimizer} == {"warmup:triplet_all:1:triplet_hardest"}
    assert optimizer[0].spec == by["warmup"][1].spec and optimizer[0].hardest == by["warmup"][1].hardest
    assert [(c.spec.optimizer_at_switch, c.spec.grad_clip) for c in optimizer] == [
        ("fresh", None), ("carry", None), ("carry", 2.0), ("fresh", 2.0)]
    assert spec.seeds == lessons.LESSON_SEEDS == (0, 1, 2, 3, 4)
    showdown_spec = cells.spec_for("shapes", True, seeds=spec.seeds)
    assert base.key() == showdown_spec.key()  # the showdown's spec, with the lessons' five seeds
    assert all(c.losses()["triplet_all"] == "triplet_all" for c in conds)


@pytest.mark.parametrize("kwargs, match", [
    (dict(seeds=(0, 0)), "seeds must be distinct"),
    (dict(difficulties=(0.5, 2.0)), "difficulties must be numbers in"),
    (dict(warmup_epochs=(0,)), "warmup_epochs"),
    (dict(settings=("clip",)), "settings must be one of"),
    (dict(showdown={"n_trian": 3}), "not fields of ShowdownSpec"),
    (dict(showdown={"setting": "vsepp"}), "which the experiments set themselves"),
])
def test_bad_specs_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lessons.LessonsSpec(**kwargs)


def test_overlap_is_the_test_scenes_mean_scene_overlap_and_grows_with_difficulty():
    conds = [c for c in lessons.conditions(lessons.LessonsSpec(fast=True)) if c.experiment == "difficulty"]
    measured = [lessons.overlap(c.spec) for c in conds]
    assert measured[2:] == sorted(measured[2:]) and measured[-1] > measured[0] + 0.1  # 100 scenes: noisy near 0
    dd, scenes = make_shapes(200, 100, 100, difficulty=1.0, return_scenes=True)
    assert measured[-1] == pytest.approx(float(scene_overlap(scenes["test"]).mean()))
    assert split_scenes(200, 100, 100, 1.0)["test"].attrs.tolist() == scenes["test"].attrs.tolist()


def test_run_trains_each_cell_once_and_stores_the_table(tmp_path):
    spec = tiny()
    done = lessons.run(spec, out=tmp_path)
    runs = done.runs
    n_conditions = len(lessons.conditions(spec))
    assert len(runs) == n_conditions * 4 * 2 and not done.reused
    assert runs.groupby(["experiment", "condition"])["role"].apply(lambda r: sorted(set(r))).map(len).eq(4).all()
    # shared conditions are the same cells: trained once
    base = runs[(runs["experiment"] == "features") & (runs["condition"] == "pretrained encoder")]
    same = runs[(runs["experiment"] == "setting") & (runs["condition"] == "heads on features")]
    assert base["key"].tolist() == same["key"].tolist() and base["sel_rsum"].tolist() == same["sel_rsum"].tolist()
    assert done.meta["n_cells"] == runs["key"].nunique() < len(runs)
    assert done.meta["epochs_trained_now"] == runs["key"].nunique() * TINY["epochs"]
    warm = runs[(runs["experiment"] == "warmup") & (runs["role"] == "triplet_hardest")]
    assert sorted(set(warm["loss"])) == ["triplet_hardest", "warmup:triplet_all:1:triplet_hardest"]
    assert set(runs[runs["experiment"] == "setting"]["setting"]) == {"features", "vsepp", "e2e"}
    again = lessons.run(spec, out=tmp_path)
    assert again.reused
    blank = lambda t: t.astype(object).where(t.notna(), None)  # noqa: E731 (a missing value: None or NaN)
    same_table = lambda a: pd.testing.assert_frame_equal(blank(a), blank(runs), check_dtype=False)  # noqa: E731
    same_table(again.runs)  # rebuilt from the cells and the conditions: the table trained
    # issue 35: a stored table is never shown as edited; what does not fit the spec's conditions is rebuilt
    stored = pd.read_csv(tmp_path / lessons.TABLE_FILE)
    for edit in (lambda t: t.assign(sel_rsum=599.0, overlap=0.0, order=7),
                 lambda t: t.assign(condition="difficulty 9"), lambda t: t.iloc[1:],
                 lambda t: t.assign(role=t["role"].replace({"info_nce": "unified", "unified": "info_nce"}))):
        edit(stored).to_csv(tmp_path / lessons.TABLE_FILE, index=False)
        same_table(lessons.run(spec, out=tmp_path).runs)
    table = lesson_table(again.runs)
    assert set(table["experiment"]) == set(lessons.EXPERIMENTS) and len(table) == n_conditions * 3
    rebuilt = lessons.run(spec, out=tmp_path, force=True)  # from the cached cells: nothing trained
    assert rebuilt.meta["epochs_trained_now"] == 0


def test_a_damaged_stored_table_names_the_file_and_the_fix(tmp_path):
    spec = tiny(settings=("features",))
    lessons.run(spec, out=tmp_path)
    (tmp_path / lessons.META_FILE).write_text("{not json")
    with pytest.raises(Exception, match="lessons.json.*force=True"):
        lessons.run(spec, out=tmp_path)


def _check(spec) -> float | None:
    """The lessons record's check (protocol.check's for the shipped one) for any spec's record."""
    from vlr_lib.experiments import record

    found = lessons.recorded_and_again(spec)
    return None if found is None else record.check_reproduced(found[1], found[2], "the lessons record")


def test_a_recorded_chapter_is_checked_by_retraining_one_of_its_runs(tmp_path, monkeypatch):
    """The check re-trains the pretrained-encoder Triplet-SH run and compares its last and best rsum."""
    from vlr_lib.experiments import record

    monkeypatch.setenv("VLR_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv(record.RECORD_ENV, str(tmp_path / "records"))  # run() writes the record; read() finds it
    spec = tiny(settings=("features",))
    assert _check(spec) is None  # no record yet
    done = lessons.run(spec)
    assert lessons.recorded(spec) is not None
    assert _check(spec) == 0.0  # same machine, same code: bit for bit

    real = lessons.retrain

    def drifted(*args, **kwargs):  # a changed loss or schedule: every epoch 20 rsum points lower
        result = real(*args, **kwargs)
        result.history = [{**r, "rsum": r["rsum"] - 20} for r in result.history]
        return result

    monkeypatch.setattr(lessons, "retrain", drifted)
    monkeypatch.setenv("VLR_FAST", "1")  # the tests' and CI's mode: a drift is an error (full mode warns)
    with pytest.raises(AssertionError, match="make record"):
        _check(spec)
    _forged_records_show_their_cells(spec, done, tmp_path / "records")


def _forged_records_show_their_cells(spec, done, root):
    """Issue 35: the record's runs table was shown as stored. Rewritten by a forger through record.write (every
    hash right), its numbers still come from its cells; labels that do not fit the conditions are damage."""
    from vlr_lib.experiments import record

    blank = lambda t: t.astype(object).where(t.notna(), None)  # noqa: E731
    rec = lessons.recorded(spec).record
    for edit, shown in ((lambda r: {**r, "sel_rsum": 599.0}, True),
                        (lambda r: {**r, "role": {"unified": "info_nce", "info_nce": "unified"}.get(r["role"], r["role"])},
                         False)):
        record.write(rec.name, lessons.record_key(spec), {**rec.tables, "runs": [edit(r) for r in rec.tables["runs"]]},
                     command="forged", title="t", wall_seconds=1, meta=rec.manifest["meta"], root=root)
        if shown:
            again = lessons.recorded(spec)
            assert again.record.manifest["command"] == "forged"
            pd.testing.assert_frame_equal(blank(again.runs), blank(done.runs), check_dtype=False)
        else:
            with pytest.warns(record.RecordWarning, match="does not fit its cells"):
                assert lessons.recorded(spec) is None


def test_without_a_warm_up_there_is_no_optimizer_experiment():
    conds = lessons.conditions(lessons.LessonsSpec(fast=True, warmup_epochs=()))
    assert not [c for c in conds if c.experiment in ("warmup", "optimizer") and c.hardest != "triplet_hardest"]


def test_the_shipped_record_rebuilt_from_its_cells_is_its_runs_table():
    """The chapter's record is shown rebuilt from its cells and the conditions (issue 35): the very table it holds."""
    done = lessons.recorded(lessons.LessonsSpec())
    assert done is not None, "the shipped record of notebook 12 does not match the code (make record)"
    stored = pd.DataFrame(done.record.tables["runs"])
    blank = lambda t: t.astype(object).where(t.notna(), None)  # noqa: E731
    assert list(done.runs.columns) == list(stored.columns)
    pd.testing.assert_frame_equal(blank(done.runs), blank(stored), check_dtype=False)
