# The two commands a new machine needs (see README.md):
#   make run    builds warden and starts the gateway (`warden serve`) on its embedded defaults
#   make test   builds everything and runs every test (what CI runs)
# Other targets: make build, make demo (the sandbox tried from inside), make asan (tests under
# AddressSanitizer + UBSan), make bench.

BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)

.PHONY: deps build run demo test test-werror asan fuzz bench clean

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DWARDEN_WERROR=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@exec $(BUILD)/src/cli/warden serve

demo: build
	@scripts/demo.sh $(BUILD)/src/cli/warden

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j 2 --timeout 300
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory fuzz

# -O0 with line tables only (-g1): ASan's reports keep file:line, and the build takes about a
# seventh less CPU than with full -g (docs/testing.md, "Where the time goes"); no benchmarks.
asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DWARDEN_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DWARDEN_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1 >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j 2 --timeout 300

# libFuzzer targets, FUZZ_SECONDS each (default 15), in build-fuzz with clang (docs/testing-fuzz.md)
fuzz: deps
	@scripts/fuzz.sh $(FUZZ_SECONDS)

bench: build
	@bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
