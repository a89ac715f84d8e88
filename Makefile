# One target per task. Everything runs inside .venv, which `make install` creates.
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO_NOPY := cargo --locked

.PHONY: install install-dev test test-rust test-python lint format bench bench-rust main clean

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Build the extension (release) and install the package.
install: $(PY)
	$(PY) -m pip install -q -e .

# The same, with the test and lint tools (the pinned transformers among them).
install-dev: $(PY)
	$(PY) -m pip install -q -e '.[dev]'

# Every test: kernels under cargo, then the Python surface and parity under pytest.
test: install-dev test-rust test-python

test-rust:
	$(CARGO_NOPY) test --no-default-features

test-python:
	$(PY) -m pytest

lint: install-dev
	cargo fmt --check
	cargo clippy --locked --all-targets -- -D warnings
	cargo clippy --locked --all-targets --no-default-features --features bench -- -D warnings
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest mmfast._native

format:
	cargo fmt
	$(VENV)/bin/ruff format python tests
	$(VENV)/bin/ruff check --fix python tests

# The main job: preprocess the built-in sample images for Qwen2-VL.
main: install
	$(VENV)/bin/mmfast preprocess

# Every speed ratio, measured against the alternatives in the same run (needs transformers).
bench: install-dev
	$(VENV)/bin/mmfast bench

bench-rust:
	$(CARGO_NOPY) bench --no-default-features --features bench

clean:
	rm -rf $(VENV) target .pytest_cache .hypothesis
