# Two entry points for a fresh machine: `make demo` and `make test`.
# Both create .venv when it is missing and install what they need.
# GPU users: `make TF_WHEEL=tensorflow demo` installs the GPU-capable wheel.

VENV ?= .venv
PY := $(VENV)/bin/python
TF_WHEEL ?= tensorflow-cpu
TF_VERSION := 2.21.0
PYTEST_ARGS ?=
# Two workers, each given whole files, so a module's expensive fixture is built once.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) --dist loadfile
# Tests that read executed graphs run again with oneDNN flipped (see pytest.ini, `executed_ops`), from
# the files that mark them (tests/test_executed_ops_marker.py keeps every mark in its test's own file),
# so the second call imports those files only.
FLIPPED_FILES = $(shell grep -rl --include='test_*.py' 'mark\.executed_ops' tests)
RUN_FLIPPED = flipped=$$($(PY) tests/support/onednn_flipped.py 2>/dev/null) \
	|| { echo "error: tests/support/onednn_flipped.py could not import TensorFlow; run it to see why" >&2; exit 1; }; \
	echo "again with oneDNN flipped: TF_ENABLE_ONEDNN_OPTS=$$flipped"; \
	TF_ENABLE_ONEDNN_OPTS=$$flipped $(PY) -m pytest -q

.PHONY: install lint test test-slow demo clean

$(VENV)/.installed: setup.py Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TF_WHEEL)==$(TF_VERSION)"
	# tf-keras names `tensorflow` as a dependency; with tensorflow-cpu that would
	# install a second, shadowing TensorFlow wheel, so it goes in without deps.
	$(PY) -m pip install -q --no-deps "tf-keras==$(TF_VERSION)"
	$(PY) -m pip install -q -e ".[test,plots,tflite]"
	touch $@

install: $(VENV)/.installed

# ruff (pycodestyle + pyflakes, line length 120; ruff.toml): part of `make test`, so of CI.
lint: install
	$(VENV)/bin/ruff check .

test: install lint
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m "not slow" $(PYTEST_ARGS) tests
	$(RUN_FLIPPED) -m "executed_ops and not slow" $(PYTEST_ARGS) $(FLIPPED_FILES)

test-slow: install
	$(PY) -m pytest -q $(PYTEST_PARALLEL) -m slow $(PYTEST_ARGS) tests
	$(RUN_FLIPPED) -m "executed_ops and slow" $(PYTEST_ARGS) $(FLIPPED_FILES)

demo: install
	$(PY) scripts/demo.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
