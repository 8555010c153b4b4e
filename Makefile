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

# Until the config-driven daemon exists, `make run` serves the echo server
# on 127.0.0.1:9000 in the foreground (Ctrl-C stops it gracefully).
run: deps build
	@$(BUILD)/bin/spindle-echo --listen 127.0.0.1:9000 --workers 2

bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory build
	@$(BUILD)/bin/spindle-bench all

clean:
	rm -rf $(BUILD)
