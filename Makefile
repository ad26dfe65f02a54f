# Two commands on a fresh machine (Python 3.11+ with venv, and npm):
#   make book   -> .venv + requirements + mixlib (editable), executes every notebook, builds _build/html
#   make test   -> same environment, pytest (unit tests + every notebook in fast mode)
# Other targets: make bench, make site-check, make vendor, make clean, make help.

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# re-install when requirements.txt or pyproject.toml change
STAMP := $(VENV)/.mixbook-installed

# Browser-side assets served by the book itself (equations and saved widget states render
# offline). Fetched with npm into a git-ignored folder; see .ci/fetch_vendor.sh.
MATHJAX_VERSION := 3.2.2
HTML_MANAGER_VERSION := 1.0.15
# the kernel-free charts (mixlib.interactive): vega-lite as Altair 6.3 writes it (altair.vegalite.v6.display), vega 6 and vega-embed 7 (the newest)
VEGA_VERSION := 6.4.0
VEGA_LITE_VERSION := 6.4.1
VEGA_EMBED_VERSION := 7.3.0
VENDOR := book/_static/vendor
VENDOR_STAMP := $(VENDOR)/.stamp-$(MATHJAX_VERSION)-$(HTML_MANAGER_VERSION)-$(VEGA_VERSION)-$(VEGA_LITE_VERSION)-$(VEGA_EMBED_VERSION)

BUILD_LOG := _build/build.log
# every figure the notebooks render is measured: text under MIN_TEXT_PX px as the site's 688 px column shows it
# is a warning in the cell's output (mixlib.plots.watch_text_sizes), and the build fails on it; both values are
# mixlib.plots.MIN_TEXT_PX and SMALL_TEXT_WARNING (tests/test_plots.py keeps them equal)
MIN_TEXT_PX := 10
SMALL_TEXT := figure text too small on the site
# pytest workers; 2 = this machine's cores (override: make test PYTEST_WORKERS=0 for no xdist)
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?= --durations=15

# The kernel's debugger warns about frozen modules on every start; it is noise in the logs.
export PYDEVD_DISABLE_FILE_VALIDATION := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: help env vendor book book-student colab fork assign grade-env autograder grade test-grade test test-paper test-colab test-py313 bench site-check clean clean-cache placeholders

help:
	@echo "make book        build the executed book into _build/html (creates .venv on first use)"
	@echo "make book-student the site without solutions (Colab buttons open the student edition) into $(STUDENT_SITE)/html, after make book"
	@echo "make colab       regenerate the Colab and student editions, notebooks/colab/ and notebooks/student/, from the chapters (commit them)"
	@echo "make fork URL=https://github.com/OWNER/NAME   point a fork at itself: every copy of the repository URL, the chapters' install cell, the Colab edition"
	@echo "make assign      the student edition: every chapter as a Colab notebook without solutions, in notebooks/student/ (OUT=dir: a copy there)"
	@echo "make autograder CHAPTER=10   the chapter's otter-grader autograder zip, checked on the reference and the student edition"
	@echo "make grade CHAPTER=10 SUBMISSIONS=folder-or-zip   grade submitted notebooks offline: grades.csv and feedback/"
	@echo "make test        run pytest (unit tests + every notebook in fast mode)"
	@echo "make test-paper  the CLI and every notebook (fast mode) on a random-weight stand-in for bert-base-uncased"
	@echo "make test-grade  grading end to end on chapter 0 with otter-grader (in .venv-grade)"
	@echo "make test-colab  a replica of Colab's runtime: its install cell must replace nothing; then the chapters there"
	@echo "make test-py313  the unit tests on Python 3.13 (Colab's) without torch (what needs it is listed); PY313_TORCH=1: with torch too"
	@echo "make bench       run benchmarks/*.py (prints speed ratios)"
	@echo "make site-check  open every built page in headless Chromium and move every chart's controls (after make book)"
	@echo "make clean       remove _build/ and the execution cache (.jupyter_cache/)"
	@echo "make clean-cache remove only the execution cache (after changing mixlib/ or data/)"
	@echo "make env         only create .venv and install requirements.txt + mixlib"
	@echo "make vendor      only fetch MathJax, the ipywidgets HTML manager and vega into book/_static/vendor/"

$(PY):
	$(PYTHON) -m venv $(VENV)

# pip compiles every installed file on one core (about two thirds of an install from pip's cache: 138 -> 51 s for
# the Python 3.13 set of .ci/test_py313.sh); compileall does it on all cores. Compiled before any test: a first
# import that compiles is slow, and timed starts (Ray's node, a notebook's cell) must not pay for it.
COMPILE = $(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
$(STAMP): requirements.txt pyproject.toml | $(PY)
	$(PY) -m pip install --disable-pip-version-check -q --no-compile -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-compile --no-deps -e .
	@# (a file a package ships for other Python versions fails to compile, as under pip: it is never imported)
	$(COMPILE)
	touch $@

env: $(STAMP)

$(VENDOR_STAMP):
	bash .ci/fetch_vendor.sh $(VENDOR) $(MATHJAX_VERSION) $(HTML_MANAGER_VERSION) $(VEGA_VERSION) $(VEGA_LITE_VERSION) $(VEGA_EMBED_VERSION)
	touch $@

vendor: $(VENDOR_STAMP)

# Pages that other chapters' authors have not written yet get a one-line stub so that the
# table of contents resolves; an existing file is never touched. tests/test_book.py fails
# while any PLACEHOLDER remains.
placeholders:
	@for f in book/history.md book/beyond.md; do \
	    if [ ! -e $$f ]; then printf '# %s\n\nPLACEHOLDER: this page is being written.\n' "$$(basename $$f .md)" > $$f; \
	        echo "created placeholder $$f"; fi; \
	done

# -W: any warning (failed notebook, broken cross-reference, missing citation) fails the build;
# --keep-going reports all of them before failing. Notebooks run in full mode (MIXLIB_FAST unset).
# .ci/build_book.py is the jupyter-book command plus a fix for a missed wake-up that stalled
# widget cells for the whole per-cell timeout (see .ci/nbexec_fix.py).
# Sphinx's saved environment goes stale when the table of contents changes (a KeyError at the next
# build): drop it then. Executed notebooks stay cached in .jupyter_cache/. The book's own CSS and JS are
# here too: with no page out of date Sphinx writes nothing, not even the changed static files.
# mixlib/_search.py too: the search index is only added to for changed pages, never split again; and
# mixlib/_figures.py, whose figures are made when a page is read.
_build/.toc-stamp: _toc.yml _config.yml $(wildcard book/_static/*.css book/_static/*.js book/_templates/*.html) \
                   mixlib/_search.py mixlib/_figures.py mixlib/_weight.py
	rm -rf _build/.doctrees
	@mkdir -p _build && touch $@

# .ci/execute_book.py first executes the notebooks the cache lacks, BOOK_JOBS at a time (myst-nb would run them one
# after another while Sphinx reads them; most keep only one core busy), so the build finds every one in the cache.
BOOK_JOBS ?= 2
book: env vendor placeholders _build/.toc-stamp
	@mkdir -p _build
	@start=$$(date +%s); rc=0; \
	env -u MIXLIB_FAST MIXLIB_MIN_TEXT_PX=$(MIN_TEXT_PX) $(PY) .ci/execute_book.py --jobs $(BOOK_JOBS) 2>&1 | tee $(BUILD_LOG) || rc=$$?; \
	[ $$rc -ne 0 ] || env -u MIXLIB_FAST MIXLIB_MIN_TEXT_PX=$(MIN_TEXT_PX) $(PY) .ci/build_book.py build . --builder html -W --keep-going 2>&1 | tee -a $(BUILD_LOG) || rc=$$?; \
	echo "build time: $$(( $$(date +%s) - start )) s (exit $$rc; log: $(BUILD_LOG))"; \
	exit $$rc
	@$(PY) .ci/report_build.py .jupyter_cache
	@if grep -rl "missing from font" $(BUILD_LOG) _build/jupyter_execute >/dev/null 2>&1; then \
	    echo "error: a figure uses a character the Japanese font lacks ('Glyph ... missing from font'):"; \
	    grep -rl "missing from font" $(BUILD_LOG) _build/jupyter_execute; exit 1; fi
	@if grep -rl "$(SMALL_TEXT)" $(BUILD_LOG) _build/jupyter_execute >/dev/null 2>&1; then \
	    echo "error: a figure's text is under $(MIN_TEXT_PX) px on the site (mixlib.plots.watch_text_sizes):"; \
	    grep -rho "$(SMALL_TEXT)[^\"]*" $(BUILD_LOG) _build/jupyter_execute | sort -u | head -20; exit 1; fi
	@echo "The book is at: $(CURDIR)/_build/html/index.html"

# The Colab edition (what Colab opens): every chapter's MyST turned into Markdown Colab renders, its prose numbers
# shown by folded cells from the student's own run (mixlib/_edition.py). tests/test_edition.py fails when it is stale.
colab: env
	$(PY) -m mixlib._edition

# The site without solutions, for a course that shares the book before an assignment is due: the book's
# configuration with sphinx-exercise's hide_solutions and the Colab buttons on the student edition (mixlib/_assign.py
# site_config), built from the book's execution cache (run make book first, or every notebook executes here), then
# checked: no solution on any page, every Colab button on the student edition (.ci/check_student_site.py).
# GitHub Pages publishes it under student/ of the book's site (.github/workflows/pages.yml).
STUDENT_SITE := _build/student/_build
book-student: env vendor placeholders
	@start=$$(date +%s); rc=0; rm -rf _build/student; \
	$(PY) -m mixlib._assign --site-config _build/student/_config.yml && \
	env -u MIXLIB_FAST MIXLIB_MIN_TEXT_PX=$(MIN_TEXT_PX) $(PY) .ci/build_book.py build . --config _build/student/_config.yml \
	    --path-output _build/student --builder html -W --keep-going > _build/student/build.log 2>&1 || { rc=$$?; tail -30 _build/student/build.log; }; \
	[ $$rc -ne 0 ] || $(PY) .ci/check_student_site.py $(STUDENT_SITE)/html --book _build/html || rc=$$?; \
	echo "make book-student: $$(( $$(date +%s) - start )) s (exit $$rc; site: $(STUDENT_SITE)/html, log: _build/student/build.log)"; \
	exit $$rc

# The student edition (mixlib/_assign.py): the Colab edition of every chapter without its solutions, to hand out
# as an assignment; tests/test_assign.py checks that no line of a solution or of a reference is in it.
assign: env
	$(PY) -m mixlib._assign $(if $(OUT),--out "$(OUT)")

# The grading machine's environment: the book's .venv (read through a .pth, never changed) plus otter-grader in a
# venv of its own (`pip install -e .[grade]`). Otter is never installed where a student runs the book: on Colab it
# would replace ipywidgets 7.7.1 (mixlib/_grade.py; book/teaching.md).
GRADE_VENV ?= .venv-grade
GRADE_PY := $(GRADE_VENV)/bin/python
GRADE_STAMP := $(GRADE_VENV)/.mixbook-grade-installed

$(GRADE_STAMP): pyproject.toml $(STAMP)
	rm -rf $(GRADE_VENV)
	$(PYTHON) -m venv $(GRADE_VENV)
	site=$$($(GRADE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	book=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
	echo "import site; site.addsitedir('$$book')" > "$$site/book-venv.pth"
	$(GRADE_PY) -m pip install --disable-pip-version-check -q --no-compile --no-build-isolation -e ".[grade]"
	$(GRADE_PY) -m compileall -q -j 0 "$$($(GRADE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
	touch $@

grade-env: $(GRADE_STAMP)

# make autograder CHAPTER=10: the chapter's otter autograder zip (for `otter run` or Gradescope), checked on the
# reference solutions (full marks) and the untouched student edition (0). make grade CHAPTER=10 SUBMISSIONS=dir|zip:
# every submitted notebook graded offline into _build/grade/CHAPTER/ (grades.csv, feedback/).
autograder: $(GRADE_STAMP)
	@if [ -z "$(CHAPTER)" ]; then echo "usage: make autograder CHAPTER=10"; exit 2; fi
	$(GRADE_PY) -m mixlib._grade autograder "$(CHAPTER)" $(GRADE_ARGS)

grade: $(GRADE_STAMP)
	@if [ -z "$(CHAPTER)" ] || [ -z "$(SUBMISSIONS)" ]; then echo "usage: make grade CHAPTER=10 SUBMISSIONS=folder-or-zip [GRADE_ARGS=--jobs 2]"; exit 2; fi
	$(GRADE_PY) -m mixlib._grade grade "$(CHAPTER)" "$(SUBMISSIONS)" $(GRADE_ARGS)

# CI's grading stage: the autograder of chapter 0 built and checked, then a batch of right, wrong, endless and hostile
# submissions graded (tests/test_grade_run.py; the rest of the grading code is tested in make test)
test-grade: $(GRADE_STAMP)
	@start=$$(date +%s); rc=0; \
	MIXLIB_REQUIRE_OTTER=1 $(GRADE_PY) -m pytest -p no:cacheprovider tests/test_grade_run.py $(PYTEST_ARGS) || rc=$$?; \
	echo "make test-grade: $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc

# A lecturer's fork: every copy of the repository URL (and its GitHub Pages site) rewritten from URL, the install cell
# written into every chapter, the Colab edition regenerated (mixlib/_fork.py; book/teaching.md).
fork: env
	@if [ -z "$(URL)" ]; then echo "usage: make fork URL=https://github.com/OWNER/NAME"; exit 2; fi
	$(PY) -m mixlib._fork "$(URL)"

test: env
	@start=$$(date +%s); \
	if [ "$(PYTEST_WORKERS)" = "0" ]; then xdist=""; else xdist="-n $(PYTEST_WORKERS) --dist worksteal"; fi; \
	rc=0; $(PY) -m pytest $$xdist $(PYTEST_ARGS) || rc=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	exit $$rc

# The paper model's branch, offline: tests/standin.py builds (once, into a cache folder outside the tree) a
# stand-in for bert-base-uncased -- its configuration and MLM head with random weights, the packaged tokenizer --
# in a Hugging Face cache layout, and prints HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE / MIXLIB_MODEL for it.
# Under that environment every notebook runs in fast mode on "bert-base-uncased", so each IS_PAPER_MODEL
# branch, chapter 8's MLM head and the 12-layer layouts execute. The numbers mean nothing; nothing asserts them.
test-paper: env
	@start=$$(date +%s); \
	standin_env=$$($(PY) tests/standin.py --print-env); eval "$$standin_env"; export MIXLIB_TEST_PAPER=1; \
	if [ "$(PYTEST_WORKERS)" = "0" ]; then xdist=""; else xdist="-n $(PYTEST_WORKERS) --dist worksteal"; fi; \
	rc=0; $(PY) -m pytest $$xdist $(PYTEST_ARGS) tests/test_standin.py tests/test_notebooks.py::test_notebook_runs_in_fast_mode || rc=$$?; \
	echo "make test-paper: $$(( $$(date +%s) - start )) s (exit $$rc; model: $$MIXLIB_MODEL stand-in in $$HF_HOME)"; \
	exit $$rc

# Colab's runtime (.ci/colab/pip-freeze.txt) replicated in $(COLAB_VENV): the notebooks' install cell run as
# Colab runs it must change nothing the runtime had (it prints what it added), then tests/test_widgets.py and
# every chapter in fast mode run there -- on the bert-base-uncased stand-in (COLAB_MODEL=standin, with
# tests/test_standin.py: what Colab sessions use) or on the packaged model (COLAB_MODEL=packaged).
# See .ci/colab_replica.py. pip's wheel cache makes a second run download nothing.
COLAB_VENV ?= .venv-colab
COLAB_MODEL ?= standin
test-colab: env
	@start=$$(date +%s); rc=0; \
	$(PY) .ci/colab_replica.py --venv $(COLAB_VENV) --model $(COLAB_MODEL) --workers $(PYTEST_WORKERS) || rc=$$?; \
	echo "make test-colab: $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	exit $$rc

# Colab runs Python 3.13; this machine's default is 3.11 and its CPU torch wheel is for 3.11 only. The unit tests
# run on 3.13 without torch (what needs it is skipped, with the reason); with PY313_TORCH=1 they run again with
# PyPI's torch for 3.13 (a CUDA build of about 3 GB, run on the CPU; not in CI). See .ci/test_py313.sh. The first python3.13 that runs is used: on PATH, else
# pyenv's (whose shim answers only where 3.13 is selected).
PY313 ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do "$$p" -V >/dev/null 2>&1 && { echo "$$p"; break; }; done)
VENV313 ?= .venv-py313
PY313_TORCH ?= 0
test-py313:
	@if [ -z "$(PY313)" ]; then echo "no working python3.13 on this machine: the Python 3.13 tests did not run"; \
	    [ "$(PY313_OPTIONAL)" = "1" ] && exit 0 || exit 1; fi
	bash .ci/test_py313.sh "$(PY313)" $(VENV313) $(PYTEST_WORKERS) $(PY313_TORCH)

bench: env
	@shopt -s nullglob; files=(benchmarks/*.py); \
	if [ $${#files[@]} -eq 0 ]; then echo "no benchmarks/*.py yet"; exit 0; fi; \
	for f in "$${files[@]}"; do echo "== $$f"; $(PY) "$$f"; done

# check_site: every page loads, links, images, math, saved widgets; check_charts (Playwright): every control of
# every kernel-free chart moves and shows Python's numbers, no dead widget, chart data within 2 MB per page.
# check_search: Japanese terms (the glossary's headwords and a few a reader types) find every page that holds them.
# check_toc: the table of contents opens on a phone (390 px) and hides and shows at 1280 px.
site-check: env vendor
	@rc=0; $(PY) .ci/check_site.py _build/html --screenshots _build/screenshots || rc=$$?; \
	$(PY) .ci/check_charts.py _build/html --screenshots _build/screenshots || rc=$$?; \
	$(PY) .ci/check_search.py _build/html || rc=$$?; \
	$(PY) .ci/check_toc.py _build/html || rc=$$?; \
	$(PY) .ci/check_reader.py _build/html || rc=$$?; \
	exit $$rc

clean:
	rm -rf _build .jupyter_cache

clean-cache:
	rm -rf .jupyter_cache
