# Thin wrapper over CMake. `make test` and `make run` install missing Debian
# packages first (scripts/deps.sh).
BUILD     ?= build
TYPE      ?= RelWithDebInfo
CONTEXT   ?= asm
SANITIZER ?= none
JOBS      ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all build deps test run bench clean

all: build

deps:
	@scripts/deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(TYPE) \
	  -DSPINDLE_CONTEXT=$(CONTEXT) -DSPINDLE_SANITIZER=$(SANITIZER) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: deps build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# `make run` starts the config-driven daemon in the foreground: HTTP on
# 127.0.0.1:8080, HTTPS on 127.0.0.1:8443, echo on 127.0.0.1:9000
# (conf/spindle.yml; Ctrl-C stops it gracefully, docs/daemon.md). The HTTPS
# certificate is self-signed, made once in run/tls/ (git-ignored).
run: deps build
	@scripts/dev_cert.sh run/tls
	@$(BUILD)/bin/spindled -c conf/spindle.yml

bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory build
	@$(BUILD)/bin/spindle-bench all

clean:
	rm -rf $(BUILD)
