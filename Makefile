# `make demo` and `make test` each install what they need into .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VENV_PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-long bench real-check clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(VENV_PY) || $(PYTHON) -m venv $(VENV)
	# uv installs the same pins in seconds where pip takes minutes; pip if uv is not at hand.
	($(VENV_PY) -m pip install --quiet --disable-pip-version-check uv && \
		$(VENV_PY) -m uv pip install --quiet --python $(VENV_PY) \
			-r requirements.txt -r requirements-dev.txt) || \
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check \
		-r requirements.txt -r requirements-dev.txt
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(VENV_PY) demo.py

PYTEST := $(VENV_PY) -m pytest -q -n 2 --dist loadscope --no-loadscope-reorder --durations=15

# CI's tier: everything but the tests marked long.
test: $(STAMP)
	$(PYTEST) -m "not long" tests

# Every test, the long tier (faults anywhere, workers, format matrices, agreement sweeps)
# included; runs beside the benchmarks.
test-long: $(STAMP)
	$(PYTEST) tests

# Benchmarks run peers (keras-hub, Hugging Face tokenizers) in their own environment.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed
# Hugging Face PyTorch and ONNX Runtime peers and references; torch lives only here.
REF_VENV := .venv-ref

$(BENCH_STAMP): requirements.txt benchmarks/requirements.txt pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r benchmarks/requirements.txt
	$(BENCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) $(REF_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/tokenization_speed.py
	$(BENCH_VENV)/bin/python benchmarks/encoder_speed.py
	$(BENCH_VENV)/bin/python benchmarks/create_pretraining_data_speed.py
	$(BENCH_VENV)/bin/python benchmarks/training_speed.py
	$(BENCH_VENV)/bin/python benchmarks/training_speed.py --precision=mixed_bfloat16
	$(BENCH_VENV)/bin/python benchmarks/serving_speed.py

# Accuracy against PyTorch references; torch lives only in .venv-ref.
$(REF_VENV)/.installed: benchmarks/peers/requirements-torch.txt
	test -x $(REF_VENV)/bin/python || $(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r benchmarks/peers/requirements-torch.txt
	touch $(REF_VENV)/.installed

real-check: $(STAMP) $(REF_VENV)/.installed
	$(VENV_PY) benchmarks/sentiment_real_check.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(REF_VENV) .pytest_cache
