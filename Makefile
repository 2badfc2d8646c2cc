# The two commands of the README: `make book` and `make test`. Both set everything up on a fresh
# machine (Python 3.11 + make): a virtual environment in .venv with the pinned build tools.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# A CPU build of torch is installed first so requirements.txt's lower bound (torch>=2.3) is met
# without pulling CUDA packages; override (e.g. TORCH_SPEC="torch") on a machine with a GPU.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
JB := $(VENV)/bin/jupyter-book
QUICK_OUT := _build/quick

.PHONY: help setup book test test-unit test-notebooks test-book test-site browser lab sync clean

help:
	@echo "make book   build the website into _build/html (sets everything up first)"
	@echo "make test   run every test: dplib, notebooks (nbval), book build (-W), site in Chromium"
	@echo "make lab    open the chapters in JupyterLab"

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH_SPEC)" 2>&1 | grep -v "^WARNING: Location" || true
	$(PIP) -r requirements-dev.txt -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import dplib, torch, jupyter_book, nbval, selenium" || \
		{ echo "setup failed: see the pip messages above"; exit 1; }
	@touch $@

setup: $(STAMP)

book: $(STAMP)
	$(JB) build . --keep-going
	@echo
	@echo "The book is built. Open: file://$(CURDIR)/_build/html/index.html"

# Debian's chromium + chromedriver for the site check; installed when missing (needs root or sudo).
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else \
		echo "chromium and chromedriver are missing and cannot be installed without root:"; \
		echo "install Debian's 'chromium' and 'chromium-driver' packages"; exit 1; fi; \
	$$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium chromium-driver >/dev/null

test: test-unit test-notebooks test-book test-site

test-unit: $(STAMP)
	$(PY) -m pytest tests/unit tests/book -q

test-notebooks: $(STAMP)
	DPBOOK_QUICK=1 $(PY) -m pytest --nbval-lax -p no:cacheprovider chapters/ -q

# The book in quick mode, warnings as errors, in its own folder (its execution cache must not be
# mixed with the full-size one of `make book`).
test-book: $(STAMP)
	rm -rf $(QUICK_OUT)/_build/html
	DPBOOK_QUICK=1 $(JB) build . --path-output $(QUICK_OUT) -W -n --keep-going

test-site: $(STAMP) browser
	DPBOOK_SITE=$(QUICK_OUT)/_build/html $(PY) -m pytest tests/site -q

# JupyterLab refuses to start as root unless told to (containers, CI-like machines).
LAB_FLAGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: $(STAMP)
	$(PIP) jupyterlab 2>&1 | grep -v "^WARNING: Location" || true
	$(VENV)/bin/jupyter lab $(LAB_FLAGS) chapters/

# Rewrite every chapter's Colab install cell from repository.url in _config.yml.
sync: $(STAMP)
	$(PY) tools/sync_notebooks.py

clean:
	rm -rf _build
