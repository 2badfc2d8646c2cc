# The two commands of the README: `make book` and `make test`. Both set everything up on a fresh
# machine (Python 3.11 + make): a virtual environment in .venv with the pinned build tools.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# A CPU build of torch is installed first so requirements.txt's lower bound (torch>=2.3) is met
# without pulling CUDA packages; override (e.g. TORCH_SPEC="torch") on a machine with a GPU.
TORCH_SPEC ?= torch==2.13.0
# Every test process, notebook kernel and grading run imports dplib: let Python keep the compiled
# modules (__pycache__, ignored by git) instead of compiling them again in each, as it does when
# PYTHONDONTWRITEBYTECODE is set in the environment (some containers and CI images set it).
unexport PYTHONDONTWRITEBYTECODE
STAMP := $(VENV)/.installed
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
JB := $(VENV)/bin/jupyter-book
QUICK_OUT := _build/quick
# The student edition (every solution removed), built from a stripped copy of the sources.
STUDENT_OUT := _build/student
# Where the instructor publishes $(STUDENT_OUT)/src, which the student edition's Colab and Binder
# buttons open: a branch of repository.url (_config.yml), or of another repository.
STUDENT_BRANCH ?= student
STUDENT_REPO ?=
QUICK_STUDENT := $(QUICK_OUT)/student
ASSIGNMENTS_OUT := _build/assignments
# Where instructors will publish each assignment's student/tests.zip for Colab (optional).
ASSIGNMENTS_URL ?=

.PHONY: help setup book book-student assignments test test-unit test-notebooks test-book \
	test-student test-html test-site test-assignments test-fast browser lab sync \
	clean

help:
	@echo "make book          build the website into _build/html (sets everything up first)"
	@echo "make test          run every test: dplib, notebooks (nbval), book build (-W),"
	@echo "                   student edition, site in Chromium, autograded assignments"
	@echo "make book-student  the student edition (no solutions) into $(STUDENT_OUT)/_build/html"
	@echo "make assignments   student and autograder versions of assignments/ into $(ASSIGNMENTS_OUT)"
	@echo "make test-fast     the edit-test loop: dplib's tests without the slow ones, on two processes"
	@echo "make lab           open the chapters in JupyterLab"

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH_SPEC)" 2>&1 | grep -v "^WARNING: Location" || true
	$(PIP) -r requirements-dev.txt -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import dplib, torch, transformers, tokenizers, jupyter_book, nbval, selenium, otter, bs4" || \
		{ echo "setup failed: see the pip messages above"; exit 1; }
	@touch $@

setup: $(STAMP)

# tools/execute_chapters.py runs the chapters two at a time into the build's execution cache
# (Jupyter Book executes them one after another); the build then executes nothing.
JOBS ?= 2

book: $(STAMP)
	$(PY) tools/execute_chapters.py --cache _build/.jupyter_cache --jobs $(JOBS)
	$(JB) build . --keep-going
	@echo
	@echo "The book is built. Open: file://$(CURDIR)/_build/html/index.html"

# The student edition reuses `make book`'s execution cache (_build/.jupyter_cache): removing
# solutions changes only Markdown, and the cache is keyed on code cells, so nothing is executed
# again when `make book` ran first (see tools/student_edition.py).
book-student: $(STAMP)
	$(PY) tools/student_edition.py --out $(STUDENT_OUT) --cache $(CURDIR)/_build/.jupyter_cache \
		--branch $(STUDENT_BRANCH) $(if $(STUDENT_REPO),--repository $(STUDENT_REPO),)
	rm -rf $(STUDENT_OUT)/_build/html
	$(JB) build $(STUDENT_OUT)/src --path-output $(STUDENT_OUT) --keep-going
	@echo
	@echo "The student edition is built. Open: file://$(CURDIR)/$(STUDENT_OUT)/_build/html/index.html"
	@echo "Its Colab and Binder buttons open the notebooks of $(STUDENT_OUT)/src: publish that"
	@echo "folder as branch $(STUDENT_BRANCH) (see the instructors' page)."

# Student notebooks (+ public tests) and autograder zips, one folder per assignment.
assignments: $(STAMP)
	$(PY) tools/assignments.py --out $(ASSIGNMENTS_OUT) $(if $(ASSIGNMENTS_URL),--url $(ASSIGNMENTS_URL),)

# Debian's chromium + chromedriver for the site check; installed when missing (needs root or sudo).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
		echo "chromium and chromedriver are missing and cannot be installed without root:"; \
		echo "install Debian's 'chromium' and 'chromium-driver' packages"; exit 1; fi; \
	$$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null

# The two Sphinx builds (test-book, test-student) use one core: the assignments' gradings (two
# processes) run beside them instead of after the site tests.
test: test-unit test-notebooks
	$(MAKE) -j2 --output-sync=target test-assignments test-html
	$(MAKE) test-site

test-html:
	$(MAKE) test-book
	$(MAKE) test-student

# Tests and notebooks run on two processes (CI has two cores), each with one BLAS/OpenMP thread:
# torch's default threads on a busy two-core machine slow small models 5-30x.
PARALLEL := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

test-unit: $(STAMP)
	$(PARALLEL) $(PY) -m pytest tests/unit tests/adversary tests/book tests/audit -q -n 2 -p no:cacheprovider

# The edit-test loop (under two minutes): every test not marked slow (chapter runs, worker
# processes, statistical audits, and every test measured at 0.5 s of CPU or more:
# tests/slow_tests.txt, written by tools/slow_tests.py), on two processes with one thread each
# (torch's default threads oversubscribe two cores).
test-fast: $(STAMP)
	$(PARALLEL) $(PY) -m pytest tests/unit tests/adversary tests/book tests/audit -q -m "not slow" \
		-n 2 -p no:cacheprovider

# Every chapter once, in quick mode, under nbval, alone in an empty folder as Colab opens it:
# dplib from a wheel of this tree, a stand-in for google.colab, pip recorded (the last cell of
# each copy checks the Colab path; tools/colab_sandbox.py explains). The interactive figures are
# drawn as the website's frames (DPBOOK_WIDGET_FRAMES=1; the last cell shows them live too), and
# each chapter that passes is kept with its outputs in $(COLAB_OUT)/executed: test-book builds
# the quick book from those runs instead of executing the chapters a second time.
COLAB_OUT := _build/colab

test-notebooks: $(STAMP)
	$(PY) tools/colab_sandbox.py --out $(COLAB_OUT)
	env -u PYTHONPATH -u MPLBACKEND -u DPBOOK_DATA -u DPBOOK_CACHE $(PARALLEL) \
		DPBOOK_WIDGET_FRAMES=1 JUPYTER_PATH=$(CURDIR)/$(COLAB_OUT)/share/jupyter \
		$(PY) -m pytest --nbval-lax --nbval-kernel-name dpbook-colab -p no:cacheprovider \
		$(COLAB_OUT)/chapters -q -n 2 --dist loadscope

# The book in quick mode, warnings as errors, in its own folder (its execution cache must not be
# mixed with the full-size one of `make book`). A chapter test-notebooks ran (same code cells) is
# taken from that run; any other is executed here.
test-book: $(STAMP)
	rm -rf $(QUICK_OUT)/_build/html
	DPBOOK_QUICK=1 $(PARALLEL) $(PY) tools/execute_chapters.py \
		--cache $(QUICK_OUT)/_build/.jupyter_cache --jobs $(JOBS) --executed $(COLAB_OUT)/executed
	DPBOOK_QUICK=1 $(JB) build . --path-output $(QUICK_OUT) -W -n --keep-going

# The student edition of the quick build, from the quick build's execution cache: one Sphinx
# pass (about 10 s), no notebook is executed again.
test-student: $(STAMP)
	$(PY) tools/student_edition.py --out $(QUICK_STUDENT) \
		--cache $(CURDIR)/$(QUICK_OUT)/_build/.jupyter_cache
	rm -rf $(QUICK_STUDENT)/_build/html
	DPBOOK_QUICK=1 $(JB) build $(QUICK_STUDENT)/src --path-output $(QUICK_STUDENT) -W -n --keep-going

test-site: $(STAMP) browser
	DPBOOK_SITE=$(QUICK_OUT)/_build/html DPBOOK_STUDENT_SITE=$(QUICK_STUDENT)/_build/html \
		$(PY) -m pytest tests/site -q -n 2 --dist loadfile

# Otter Assign + Otter's local grader (no Docker) on every assignment.
test-assignments: $(STAMP)
	$(PY) -m pytest tests/assignments -q

# JupyterLab refuses to start as root unless told to (containers, CI-like machines).
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: $(STAMP)
	$(PIP) jupyterlab 2>&1 | grep -v "^WARNING: Location" || true
	$(VENV)/bin/jupyter lab $(LAB_FLAGS) chapters/

# Rewrite every chapter's Colab install cell from repository.url in _config.yml, pinned to the
# commit HEAD (commit dplib first) or to REF (make sync REF=<commit or tag>).
sync: $(STAMP)
	$(PY) tools/sync_notebooks.py $(if $(REF),--ref $(REF),)
	$(PY) tools/course_map.py

clean:
	rm -rf _build
