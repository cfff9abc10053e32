"""The experiment chapters of the built book (09-12, vlr_lib.book.recorded_chapters()) show the records that
ship with the workbook: each page names its record with the record's date and hardware, shows numbers
computed from the record (chapter 12's reading, chapter 10's table, ...), and none of its outputs reports
fast mode.

The book is `make book`'s (build/book, or $VLR_BOOK_DIR). Without one the tests skip, saying so;
`make test-book` (what CI runs after `make book`) sets VLR_BOOK_DIR, so there a missing book fails. A
build/book left by an older `make book`, or built before the records were regenerated, fails here too:
`make book` rebuilds it.
"""
from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from vlr_lib import book
from vlr_lib.report.layouts import table1
from vlr_lib.report.lessons import lesson_matrix, lesson_table
from vlr_lib.report.summary import summarize, summary_table
from vlr_lib.experiments import lessons, record

ROOT = Path(__file__).resolve().parents[2]
BOOK = Path(os.environ.get("VLR_BOOK_DIR") or ROOT / "build" / "book")
#: The record each experiment chapter opens (on the shapes data, the book's).
RECORDS = {"03_contrastive": "batch-size-shapes-features-full", "09_training": "09_training-shapes-full",
           "10_showdown": "showdown-shapes-features-full", "11_hyperparameters": "11_hyperparameters-shapes-full",
           "12_lessons": "lessons-shapes-full", "13_replication": "replication-shapes-full"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class CellOutputs(HTMLParser):
    """The text inside myst-nb's ``div.cell_output`` elements of a page (what the cells printed and displayed)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside: list[bool] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag not in VOID:
            self.inside.append("cell_output" in (dict(attrs).get("class") or "").split())

    def handle_endtag(self, tag) -> None:
        if tag not in VOID and self.inside:
            self.inside.pop()

    def handle_data(self, data) -> None:
        if any(self.inside):
            self.parts.append(data)


def outputs(html: str) -> str:
    parser = CellOutputs()
    parser.feed(html)
    return "".join(parser.parts)


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    """{chapter: the text of its cells' outputs} for every experiment chapter of the built book."""
    if not (BOOK / "index.html").is_file():
        if os.environ.get("VLR_BOOK_DIR"):
            pytest.fail(f"no built book in {BOOK}: run make book first")
        pytest.skip(f"no built book in {BOOK} (make book builds it; make test-book tests it)")
    return {stem: outputs((BOOK / "notebooks" / f"{stem}.html").read_text(encoding="utf-8"))
            for stem in book.recorded_chapters()}


def shipped(name: str) -> record.Record:
    rec = record.read(name, None)
    assert rec is not None, f"no shipped record {name}"
    return rec


def test_every_experiment_chapter_has_its_record():
    assert set(RECORDS) == set(book.recorded_chapters())


@pytest.mark.parametrize("stem", book.recorded_chapters())
def test_the_page_names_its_record_with_date_and_hardware_and_never_reports_fast_mode(pages, stem):
    text = pages[stem]
    assert book.page_problems(text) == [], f"{BOOK}/notebooks/{stem}.html: {book.page_problems(text)} (make book)"
    rec = shipped(RECORDS[stem])
    lines = {(m["name"], m["date"], m["hardware"]) for m in book.RECORD_LINE.finditer(text)}
    where = f"{rec.manifest['hardware']['cores']}-core {rec.manifest['hardware']['cpu']}"
    assert (rec.name, rec.manifest["date"][:10], where) in {(n, d, h.split(" + ")[0]) for n, d, h in lines}, \
        f"{stem}.html names {lines}, the shipped record is {rec.name} of {rec.manifest['date']} (make book)"


def test_chapter_09_shows_the_recorded_runs(pages):
    runs = record.histories_of(shipped(RECORDS["09_training"]).tables["runs"])
    for seed in (0, 1):
        best = {name: max(r["rsum"] for r in runs[f"usual/{seed}/{name}"])
                for name in ("Triplet-SH", "NT-Xent", "Unified")}
        assert f"seed {seed}: best rsum " + ", ".join(f"{k} {v:.1f}" for k, v in best.items()) in pages["09_training"]


def test_chapter_10_shows_the_recorded_table(pages):
    runs = record.cell_table(record.cells_of(shipped(RECORDS["10_showdown"]).tables))
    table = table1(summarize(runs, prefix="sel_"))
    missing = [cell for cell in table["rsum"] if cell not in pages["10_showdown"]]
    assert len(table) == 24 and missing == []


def test_chapter_11_shows_the_recorded_sweeps(pages):
    runs = record.cell_table(record.cells_of(shipped(RECORDS["11_hyperparameters"]).tables))
    printed = summary_table(summarize(runs), ("rsum", "i2t_r1", "t2i_r1"))
    assert printed in pages["11_hyperparameters"]


def test_chapter_12_shows_the_recorded_reading(pages):
    runs = pd.DataFrame(shipped(RECORDS["12_lessons"]).tables["runs"])
    table = lesson_table(runs)
    for experiment in lessons.EXPERIMENTS:
        cells = lesson_matrix(table, experiment).to_numpy().ravel()
        missing = [cell for cell in cells if cell not in pages["12_lessons"]]
        assert missing == [], (experiment, missing)
