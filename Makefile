# vlr-workbook: two commands do all set-up on a fresh machine.
#   make lab   - virtual environment, install, notebooks, JupyterLab on the first notebook
#   make test  - the same set-up when missing, then the unit tests and nbval over the notebooks
#   (make test-browser: every notebook in JupyterLab and Chromium, the run left out of make test for time)
# Both are idempotent: the install re-runs only when pyproject.toml changes.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Extra pip options, e.g. PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"
# for a CPU-only torch (smaller download).
PIP_EXTRA ?=
STAMP := $(VENV)/.installed
NOTEBOOK_SOURCES := $(sort $(wildcard notebooks/[0-9][0-9]_*.py))
PYTEST_ARGS ?=

.PHONY: help setup notebooks lab student-bundle test test-unit test-notebooks test-browser test-portable test-book book book-student test-book-student record bench bench-train bench-gpu bench-batched bench-widgets clean

help:
	@echo "make lab          set up (first time) and open the workbook in JupyterLab"
	@echo "make test         set up (first time), the unit tests (one notebook in JupyterLab among them), nbval over every notebook"
	@echo "make test-browser every notebook run in JupyterLab and Chromium, every explorer moved (4-7 min; CI runs it)"
	@echo "make test-portable  notebooks 03 and 09-13 again under torch's portable kernels (another CPU's rounding)"
	@echo "make record       regenerate the recorded runs notebooks 03 and 09-13 open in full mode (one process per core; it prints the expected time)"
	@echo "make book         the static HTML book in build/book (03, 09-13 from their records, the rest in fast mode)"
	@echo "make book-student the student edition in build/book-student: make book's chapters without solutions"
	@echo "                  (VLR_EDITION=student make lab: the notebooks without solutions, in build/student)"
	@echo "make student-bundle  the student notebooks, the vlr_lib wheel and a README, to hand out (build/student-bundle)"
	@echo "make bench        loss speed benchmark (ratios against the matmul that makes S)"
	@echo "make bench-train  trainer throughput against a plain DataLoader loop"
	@echo "make bench-gpu    the Flickr30K path on a GPU: extraction, one epoch, the showdown, against targets"
	@echo "make bench-batched  runs trained together (fit_many, heads stacked) against one by one (fit)"
	@echo "make bench-widgets  server-side redraw time of every explorer against the 150 ms target"

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(PIP_EXTRA) -e ".[dev,book]"
	touch $(STAMP)

# The jupytext .py files are the source of truth; the .ipynb are generated (and git-ignored), in the edition
# VLR_EDITION names: instructor (the default, with the solutions) or student (without them; vlr_lib.book).
# The instructor notebooks are written beside their sources in notebooks/ (jupytext pairs each with its .py);
# the student notebooks into STUDENT_DIR, a folder that holds them and nothing else, so no solution is one
# click away (the .py sources hold every solution). The stamp in the folder names the edition last written
# there: a notebooks/ that an older make filled with student notebooks is written again.
VLR_EDITION ?= instructor
STUDENT_DIR ?= build/student
NOTEBOOK_DIR := $(if $(filter student,$(VLR_EDITION)),$(STUDENT_DIR),notebooks)
NOTEBOOKS := $(patsubst notebooks/%.py,$(NOTEBOOK_DIR)/%.ipynb,$(NOTEBOOK_SOURCES))
FIRST_NOTEBOOK := $(firstword $(NOTEBOOKS))
EDITION_STAMP := $(NOTEBOOK_DIR)/.edition-$(VLR_EDITION)
$(EDITION_STAMP):
	mkdir -p $(@D)
	rm -f $(@D)/.edition-*
	touch $@

# vlr_lib.book.write_notebook writes a notebook atomically and leaves an instructor notebook's .py exactly as
# recent as it: jupytext opens neither file with its "more recent than" dialog, and make sees the pair as current.
$(NOTEBOOK_DIR)/%.ipynb: notebooks/%.py $(STAMP) $(EDITION_STAMP)
	VLR_EDITION=$(VLR_EDITION) $(PY) -m vlr_lib.book $< $@

# The same rule for all of them at once: every notebook that is missing or older than its source, the install or
# the edition is written by one Python (vlr_lib.book.write_notebook), which imports the library once instead of
# once per notebook (half a minute in a fresh clone).
notebooks: $(STAMP) $(EDITION_STAMP)
	@stale="$$(for py in $(NOTEBOOK_SOURCES); do nb="$(NOTEBOOK_DIR)/$$(basename "$${py%.py}").ipynb"; \
	    if [ ! -e "$$nb" ] || [ "$$py" -nt "$$nb" ] || [ $(STAMP) -nt "$$nb" ] || [ $(EDITION_STAMP) -nt "$$nb" ]; \
	    then echo "$$py"; fi; done)"; \
	if [ -n "$$stale" ]; then \
	    echo "writing the $(VLR_EDITION) notebooks of" $$stale "into $(NOTEBOOK_DIR)/"; \
	    VLR_EDITION=$(VLR_EDITION) $(PY) -c 'import os, sys; from vlr_lib.book import write_notebook; \
	        [write_notebook(py, os.path.join(sys.argv[1], os.path.basename(py)[:-3] + ".ipynb")) for py in sys.argv[2:]]' \
	        $(NOTEBOOK_DIR) $$stale; \
	fi

# Containers often run as root, which JupyterLab refuses without --allow-root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

# jupyter/lab.py prints the address and how to stop the server, and starts JupyterLab with the
# project's settings (jupyter/: widget state saved, no news prompt, no update check), passed on the
# command line: the user's own Jupyter configuration is neither read for them nor written.
# The instructor edition serves the repository (notebooks/ paired with their .py by jupytext); the student
# edition serves STUDENT_DIR alone, with jupytext off (--no-pairing), as the student bundle's JupyterLab does.
lab: setup notebooks
ifeq ($(NOTEBOOK_DIR),notebooks)
	$(PY) jupyter/lab.py $(if $(FIRST_NOTEBOOK),$(FIRST_NOTEBOOK)) $(LAB_ARGS)
else
	cd $(NOTEBOOK_DIR) && $(abspath $(PY)) $(CURDIR)/jupyter/lab.py --no-pairing \
	    $(if $(FIRST_NOTEBOOK),$(notdir $(FIRST_NOTEBOOK))) $(LAB_ARGS)
endif

# The student bundle (jupyter/student_bundle.py): the vlr_lib wheel, the student notebooks and a README saying
# how to install and open them, as a folder and a .zip in build/student-bundle/, to hand out instead of the
# repository (which holds every solution). docs/course.md, "Handing out the student edition".
student-bundle: setup
	$(PY) jupyter/student_bundle.py

# The tests run on TEST_WORKERS parallel workers (pytest-xdist; auto: one per core). TEST_WORKERS=0 runs them in
# one process, one after another. tests/conftest.py says what keeps the unit tests right on several workers.
TEST_WORKERS ?= auto

# The tests marked `lab` (pyproject.toml: whole-workbook JupyterLab runs) are make test-browser's; make test-unit
# runs every other test, and make test runs them with nbval over the notebooks. pytest keeps only the last -m it is
# given, so a marker expression of your own goes in TEST_MARK (each target then runs `<its own> and (TEST_MARK)`),
# never in PYTEST_ARGS, where it would replace the target's own: that stops with one line before anything runs.
TEST_MARK ?=

# $(call run-tests,MARKEXPR[,MORE PATHS AND OPTIONS[,PREFIX]]): the tests under tests/ (and MORE) that MARKEXPR
# selects, on the workers, the command after PREFIX.
# pytest exits 5 when it collects nothing or deselects everything: that is a failure here, tests must exist
# (with workers too). --dist loadgroup: each test on its own, except the modules tests/conftest.py keeps together
# on one worker.
define run-tests
$(if $(filter -m -m%,$(PYTEST_ARGS)),@echo 'make: a -m in PYTEST_ARGS would replace -m "$(1)": put the marker expression in TEST_MARK' >&2; exit 2)
$(3) $(PY) -m pytest tests $(2) -n $(TEST_WORKERS) --dist loadgroup -m "$(1)$(if $(strip $(TEST_MARK)), and ($(TEST_MARK)))" $(PYTEST_ARGS) || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests" >&2; exit $$rc; }
endef

test-unit: setup
	$(call run-tests,not lab)

# A command prefix: VLR_RUNS and VLR_CACHE in fresh temp folders (removed after) and VLR_FAST=1 unless set, so the
# notebooks train what they check and never read what an older version left behind.
FRESH_RUNS = runs=$$(mktemp -d) && cache=$$(mktemp -d) && trap 'rm -rf "$$runs" "$$cache"' EXIT && \
	VLR_RUNS="$$runs" VLR_CACHE="$$cache" VLR_FAST=$${VLR_FAST:-1}

test-notebooks: setup notebooks
ifneq ($(NOTEBOOKS),)
	$(FRESH_RUNS) $(PY) -m pytest --nbval-lax --nbval-cell-timeout=300 -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile $(NOTEBOOKS)
else
	@echo "no notebooks yet: nothing for nbval to run"
endif

# make test: the unit tests (not lab) and nbval over every notebook in one pytest session on the same workers, so
# neither waits for the other's start or last test (tests/conftest.py keeps each notebook's cells on one worker).
test: setup notebooks
	$(call run-tests,not lab,$(if $(NOTEBOOKS),$(NOTEBOOKS) --nbval-lax --nbval-cell-timeout=300),$(FRESH_RUNS))

# The whole-workbook JupyterLab run (tests/browser/test_jupyterlab.py: every notebook executed in JupyterLab and
# Chromium, every explorer moved), about 4-7 min on 2 cores, kept out of make test for time; make test keeps a
# smoke test of it (tests/browser/test_lab_smoke.py). CI runs it right after make test.
test-browser: setup
	$(call run-tests,lab)

# Notebooks 03 and 09-13 check their numbers against the records that ship with the workbook. Under torch's portable
# kernels (ATEN_CPU_CAPABILITY=default) this CPU rounds like another one, so a drift a student's CPU would show
# fails here first (CI runs it after make test).
RECORD_NOTEBOOKS := $(filter $(addprefix $(NOTEBOOK_DIR)/,03_% 09_% 10_% 11_% 12_% 13_%),$(NOTEBOOKS))
test-portable: setup
	ATEN_CPU_CAPABILITY=default $(MAKE) --no-print-directory test-notebooks NOTEBOOKS="$(RECORD_NOTEBOOKS)"

# The full-size runs that ship in vlr_lib/recorded/ (vlr_lib.experiments.record); cells are reused from $$VLR_RUNS.
# One process per core, each on one thread as the records were made (RECORD_JOBS=1: one step after another).
RECORD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
record: setup
	OMP_NUM_THREADS=1 $(PY) -m vlr_lib record --jobs $(RECORD_JOBS)

# The book: every notebook executed (03 and 09-13 from their shipped records, the others in fast mode), then
# Sphinx; a failing cell stops it, naming the notebook and the cell, and the previous book stays as it
# was. BOOK_ARGS e.g. "--jobs 1".
BOOK_ARGS ?=
book: setup
	$(PY) book/build.py $(BOOK_ARGS)

# The student edition: make book's executed chapters (build/book-executed) with every solution removed (code,
# outputs and derivations), so nothing runs twice; run make book first.
book-student: setup
	$(PY) book/build.py --edition student

# The tests of the built book (CI runs them after `make book`): every chapter page in a browser, and the experiment
# chapters' pages against the shipped records.
test-book: setup
	VLR_BOOK_DIR=$(CURDIR)/build/book $(PY) -m pytest tests/browser/test_book.py tests/book/test_pages.py -p no:cacheprovider || { rc=$$?; [ $$rc -ne 5 ] || echo "pytest collected no tests" >&2; exit $$rc; }

# The student edition's tests (CI runs them after make book-student): no solution on any page or in any
# notebook offered for download.
test-book-student: setup
	VLR_BOOK_STUDENT_DIR=$(CURDIR)/build/book-student $(PY) -m pytest tests/book/test_student_book.py -p no:cacheprovider

bench: setup
	$(PY) benchmarks/bench_losses.py

bench-train: setup
	$(PY) benchmarks/bench_train.py

bench-gpu: setup
	$(PY) benchmarks/bench_gpu.py

bench-batched: setup
	$(PY) benchmarks/bench_batched.py

bench-widgets: setup
	$(PY) benchmarks/bench_widgets.py

clean:
	rm -rf $(VENV) notebooks/*.ipynb notebooks/.edition-* .pytest_cache .hypothesis build/book build/book-student build/book-executed \
	    $(STUDENT_DIR) build/student-bundle
