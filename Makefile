# One target per task. Everything runs inside .venv, which `make install` creates.
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO_NOPY := cargo --locked

.PHONY: install install-dev test test-rust test-python lint format bench bench-rust main soak fuzz wheel wheel-test clean

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
	cd fuzz && cargo fmt --check && cargo check --locked
	cargo clippy --locked --all-targets -- -D warnings
	cargo clippy --locked --all-targets --no-default-features --features bench -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest mmfast._native

format:
	cargo fmt
	cd fuzz && cargo fmt
	$(VENV)/bin/ruff format python tests benches
	$(VENV)/bin/ruff check --fix python tests benches

# The main job: preprocess the built-in sample images for Qwen2-VL.
main: install
	$(VENV)/bin/mmfast preprocess

# Every speed ratio, measured against the alternatives in the same run (needs transformers).
bench: install-dev
	$(VENV)/bin/mmfast bench

bench-rust:
	$(CARGO_NOPY) bench --no-default-features --features bench

# Minutes, not part of `make test`: 10,000 mixed calls with memory sampled, 8 threads x 1,000
# calls against serial results, 20,000 failing calls.
soak: install-dev
	$(PY) benches/soak.py

# Minutes, not part of `make test`: each cargo-fuzz target for FUZZ_SECONDS (nightly Rust;
# corpora grow in fuzz/corpus), then the Python property fuzz, FUZZ_EXAMPLES per property.
FUZZ_SECONDS ?= 60
FUZZ_EXAMPLES ?= 2000
fuzz: install-dev
	fuzz/run.sh $(FUZZ_SECONDS)
	MMFAST_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -p no:cacheprovider tests/test_fuzz.py

# The abi3 wheel and the sdist, in dist/. The wheel is manylinux2014 (glibc >= 2.17: CentOS 7,
# RHEL/Rocky 8, Ubuntu 20.04) whatever glibc builds it: zig links it against glibc 2.17's
# symbol versions. maturin carries cargo-zigbuild inside it, so zig is the one extra tool; zig
# 0.x minors change their command line, hence one minor. maturin runs `python3 -m ziglang`,
# and outside an activated venv that python3 has no ziglang: CARGO_ZIGBUILD_PYTHON_PATH names
# ours. Earlier wheels go first, since wheel-test installs the one in dist/. auditwheel then
# reads the symbols the .so needs (`show --json`, new in 6.8), and the target fails unless
# they fit glibc 2.17.
wheel: $(PY)
	$(PY) -m pip install -q 'maturin>=1.9.4,<2' 'ziglang>=0.17.1,<0.18' 'auditwheel>=6.8,<7'
	rm -f dist/mmfast-*.whl dist/mmfast-*.tar.gz
	CARGO_ZIGBUILD_PYTHON_PATH=$(abspath $(PY)) \
		$(VENV)/bin/maturin build --release --locked --zig --compatibility manylinux2014 --out dist
	$(VENV)/bin/maturin sdist --out dist
	$(VENV)/bin/auditwheel show dist/mmfast-*.whl
	$(VENV)/bin/auditwheel show --json dist/mmfast-*.whl | $(PY) -c "$$CHECK_MANYLINUX2014"

# auditwheel's tag from the symbols (manylinux_2_17 or older) and the file name's tag, which
# is what pip matches, must both say glibc 2.17.
define CHECK_MANYLINUX2014
import json, re, sys
r = json.load(sys.stdin)
m = re.fullmatch(r"manylinux_2_(\d+)_\w+", r["overall_tag"])
if m is None or int(m[1]) > 17 or "manylinux_2_17_" not in r["wheel"]:
    sys.exit(f"{r['wheel']}: auditwheel says {r['overall_tag']}, not manylinux2014 (glibc 2.17)")
print(f"{r['wheel']}: {r['overall_tag']}, manylinux2014 compatible")
endef
export CHECK_MANYLINUX2014

# The test suite against the wheel installed (not editable) in a fresh venv, then the sdist
# built from source in another.
wheel-test: wheel
	rm -rf .venv-wheel .venv-sdist
	python3 -m venv .venv-wheel
	.venv-wheel/bin/pip install -q "$$(ls dist/mmfast-*.whl)[test]"
	.venv-wheel/bin/python -c "import mmfast, sys; sys.exit('not the wheel' if 'site-packages' not in mmfast.__file__ else 0)"
	.venv-wheel/bin/pytest -p no:cacheprovider
	python3 -m venv .venv-sdist
	.venv-sdist/bin/pip install -q "$$(ls dist/mmfast-*.tar.gz)"
	.venv-sdist/bin/python -c "import mmfast, numpy; print(mmfast.__version__, mmfast.ImageProcessor.from_pretrained('Qwen/Qwen2-VL-7B-Instruct')(numpy.zeros((64, 64, 3), 'uint8')).pixel_values.shape)"

clean:
	rm -rf $(VENV) .venv-wheel .venv-sdist dist target .pytest_cache .hypothesis fuzz/target
