# edgellm build. llama.cpp and ggml come from the pinned github.com/ollama/ollama
# module (see go.mod); its cgo files compile them into our binary. We only add
# the include paths and the optimisation flags. See ../shared/DESIGN.md.

GO        ?= go
# Build for the host CPU by default; override for cross builds, e.g.
#   make build MARCH=armv8.2-a+dotprod
MARCH     ?= native
# The ollama module's directory in the module cache. Recursively expanded on
# purpose: on a fresh machine the module is only there after `deps` has run
# `go mod download`, so it is looked up when a recipe needs it, not when the
# Makefile is parsed (`cgo-check` stops with one line if it is still missing).
OLLAMA_MOD := github.com/ollama/ollama
OLLAMA_DIR  = $(shell $(GO) list -m -f '{{.Dir}}' $(OLLAMA_MOD) 2>/dev/null)
ARCH      := $(shell uname -m)

# ollama's cgo files do not compile ggml's AMX kernels (ggml-cpu/amx/*.cpp), yet
# ggml-cpu.cpp references them when the compiler defines __AMX_INT8__, which
# -march=native does on Sapphire Rapids and later. Turn AMX off so the link works.
ifeq ($(ARCH),x86_64)
  ARCH_FLAGS := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
endif

export CGO_ENABLED  := 1
export CGO_CPPFLAGS  = -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include
# GGML_USE_CPU_REPACK makes ggml register its CPU_REPACK buffer type, so the
# repacked (interleaved) Q4_0/IQ4_NL/Q8_0 kernels are in the binary. Whether a
# model's weights are repacked is a runtime choice on both engines (`--repack`,
# host.LoadOptions.Repack; default off: repacked weights are anonymous memory
# the kernel cannot reclaim). REPACK=0 builds without it (recompiles llama.cpp).
REPACK ?= 1
ifeq ($(REPACK),1)
  CGO_CPPFLAGS += -DGGML_USE_CPU_REPACK
endif
# kernels/cflags/spinwait.h bounds the spin of ggml's thread barrier (x86 only; see
# kernels/RATIONALE.md "Bounded barrier spin"): forced into every C file so it
# reaches ggml-cpu.c, which we compile from the module unchanged.
# Go's build cache does not see a header outside the package it compiles, and
# keys on the flags: the header is copied to a path named by its content hash
# outside the checkout ($(SPINWAIT_H)), so an edit to it rebuilds ggml while
# every checkout on a machine shares one compiled llama.cpp.
SPINWAIT_SUM := $(shell cksum < kernels/cflags/spinwait.h | cut -d' ' -f1)
SPINWAIT_H   := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/edgellm/include/spinwait-$(SPINWAIT_SUM).h
SPINWAIT  := -include $(SPINWAIT_H)
export CGO_CFLAGS   := -O3 -march=$(MARCH) $(ARCH_FLAGS) $(SPINWAIT)
export CGO_CXXFLAGS := -O3 -march=$(MARCH) $(ARCH_FLAGS)

BIN        := bin/edgellm
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/edgellm/edgellm/internal/buildinfo.Version=$(VERSION)
# The shared assets: $EDGELLM_SHARED, else internal/shareddir's rule (a
# "shared" directory in or beside the working directory or a parent of it),
# resolved here too because some targets pass the path on (test-arm64,
# bench-precision): CI has ../shared beside the clone and no variable set.
SHARED     ?= $(or $(EDGELLM_SHARED),$(abspath $(firstword $(wildcard shared ../shared ../../shared))))
TEST_FLAGS ?= -timeout 20m

.PHONY: all build browser test bench bench-families bench-precision bench-activations bench-warm-start bench-ksm bench-ksm-serve bench-probe scenario-cpu scenario-cpu-long soak demo policies check env fuzz clean deps cgo-check lib serve-page-vendor serve-sdk

all: build

# Fetch Go modules (the first build then compiles llama.cpp: 2-3 minutes on 2 cores).
deps:
	$(GO) mod download

# One clear line instead of a C compiler error about llama.h when the pinned
# module is not in the module cache after `deps`.
cgo-check: deps $(SPINWAIT_H)
	@d='$(OLLAMA_DIR)'; if [ -z "$$d" ] || [ ! -f "$$d/llama/llama.cpp/include/llama.h" ]; then \
	  echo "edgellm: module $(OLLAMA_MOD) (pinned in go.mod) not found in the Go module cache ($$($(GO) env GOMODCACHE)) after 'go mod download': cannot compile llama.cpp" >&2; exit 1; fi

$(SPINWAIT_H): kernels/cflags/spinwait.h
	@mkdir -p $(dir $@) && cp $< $@.tmp && mv $@.tmp $@

build: cgo-check
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/edgellm

# Reference policies compiled to WebAssembly (GOOS=wasip1), and the
# AssemblyScript one when npm exists (then its tests are required to run).
HAVE_NPM := $(shell command -v npm >/dev/null 2>&1 && echo 1)
policies:
	@if [ -f policies/Makefile ]; then $(MAKE) -C policies GO=$(GO); fi
	@if [ -n "$(HAVE_NPM)" ]; then $(MAKE) -C policies assemblyscript; else echo "npm not found: AssemblyScript policy not built, its tests skip"; fi

test: build policies browser serve-sdk
	$(GO) vet ./...
	EDGELLM_SHARED=$(SHARED) EDGELLM_REQUIRE_AS=$(HAVE_NPM) EDGELLM_REQUIRE_NODE_SDK=$(HAVE_NPM) $(GO) test $(TEST_FLAGS) -skip '^TestScenarioCPU$$' ./...
	@# The CPU contention scenario alone, after the rest: its speed assertions
	@# hold only on CPUs nothing else uses (cmd/edgellm/scenario_cpu_test.go).
	EDGELLM_SHARED=$(SHARED) $(GO) test $(TEST_FLAGS) -run '^TestScenarioCPU$$' -v ./cmd/edgellm

# The serve page's charting library, uPlot (MIT), is vendored: its minified
# build is committed in cmd/edgellm/internal/serve/page/ (embedded with
# go:embed, nothing fetched at run time; licence in page/uplot.LICENSE).
# This target re-creates it from npm, pinned by page/vendor/package-lock.json.
SERVE_PAGE := cmd/edgellm/internal/serve/page
serve-page-vendor:
	cd $(SERVE_PAGE)/vendor && npm ci --no-audit --no-fund
	cp $(SERVE_PAGE)/vendor/node_modules/uplot/dist/uPlot.iife.min.js $(SERVE_PAGE)/uplot.min.js
	cp $(SERVE_PAGE)/vendor/node_modules/uplot/dist/uPlot.min.css $(SERVE_PAGE)/uplot.min.css
	cp $(SERVE_PAGE)/vendor/node_modules/uplot/LICENSE $(SERVE_PAGE)/uplot.LICENSE

# The OpenAI Node SDK for cmd/edgellm/internal/serve's TestNodeSDK, pinned by
# its testdata/node/package-lock.json (skipped without npm).
serve-sdk:
	@if [ -n "$(HAVE_NPM)" ]; then cd $(SERVE_PAGE)/../testdata/node && npm ci --no-audit --no-fund --silent; else echo "npm not found: TestNodeSDK skips"; fi

# Headless Chromium for cmd/edgellm/internal/serve's page test (Debian's package, 2-3 min
# to install here; EDGELLM_NO_BROWSER=1 skips the test instead).
browser:
	@command -v chromium >/dev/null || [ -n "$$EDGELLM_NO_BROWSER" ] || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# Benchmarks. The policy-call latency goal (p99 ≤ 20 µs, also asserted in
# make test) is measured alone, before anything else loads the machine; then native against llama.cpp in one
# process on stories260K (one thread: see docs/BENCHMARKS.md); then every
# Go benchmark once.
bench: build policies
	EDGELLM_SHARED=$(SHARED) $(GO) test -count=1 -run 'TestDecideLatency' -v ./host/policy
	./$(BIN) bench --engine native --compare llamacpp --threads 1 -r 9 -n 256
	EDGELLM_AS_NUMBERS=1 $(GO) test -count=1 -run 'TestGuestNumbers' -v ./policies/tiers
	$(MAKE) bench-precision
	$(MAKE) bench-activations
	$(MAKE) bench-warm-start
	$(MAKE) bench-ksm
	$(MAKE) bench-ksm-serve
	$(MAKE) scenario-cpu-long
	./$(BIN) bench --spin-sweep --engine native -t 2 -n 256 -r 4
	./$(BIN) bench --spin-sweep --engine native -t 2 -n 64 -r 2 --hogs 2
	./$(BIN) bench --spin-sweep --engine llamacpp -t 2 -n 64 -r 2 --hogs 2
	EDGELLM_SHARED=$(SHARED) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...
	$(MAKE) bench-families

# Every native family's full-size SYNTHETIC shape (issue #28): parity with
# llama.cpp and native ÷ llama.cpp speed, one shape at a time.
bench-families: build
	EDGELLM_SHARED=$(SHARED) scripts/bench-families.sh ./$(BIN)

# CPU contention scenario (issue #13) alone, verbose: TestScenarioCPU runs
# testdata/scenarios/cpu-contention-long.yaml (static -t 1, static -t 2 and
# default under 0, 1 and 2 pinned CPU hogs, three repeats) with its
# assertions. make test runs it the same way, after the rest of the suite.
scenario-cpu: build policies
	EDGELLM_SHARED=$(SHARED) $(GO) test -count=1 -v -run '^TestScenarioCPU$$' -timeout 10m ./cmd/edgellm

# The same file through the CLI (about 90 s on a quiet 2-core machine): the
# report (tables, JSON, SVG, HTML) in $(SCENARIO_OUT), no assertions.
# testdata/scenarios/cpu-contention.yaml is a 3-second version on a 2-layer
# model whose phases (40-160 ms) are shorter than the policy's CPU readings.
SCENARIO_OUT ?= /tmp/edgellm-cpu-contention-long
scenario-cpu-long: build policies
	./$(BIN) scenario run testdata/scenarios/cpu-contention-long.yaml -o $(SCENARIO_OUT)

# Activation memory (issue #29): ggml's graph allocator against keeping every
# intermediate tensor, for a 512-token prefill and the decode step after it,
# on SYNTHETIC models of real shapes (weights Q2_K: the activations do not
# depend on the weight type, the file is smaller). Flash and classic
# attention; on 1B and TinyLlama also --frag (2,048 positions, the KV window
# changed every 256: allocator bytes ÷ peak live per graph). Each model is
# written to a temp dir and removed.
ACT_SHAPES := llama3.2-1b tinyllama-1.1b llama2-7b
bench-activations: build
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && for s in $(ACT_SHAPES) 3b; do \
	  case $$s in 3b) args="llama3.2-1b --n-embd 3072 --n-layer 28 --n-head 24 --n-head-kv 8 --n-ff 8192";; *) args=$$s;; esac; \
	  ./$(BIN) synth --shape $$args --type q2_k -o $$dir/m.gguf 2>/dev/null || exit 1; \
	  echo "== $$s (SYNTHETIC)"; \
	  for a in flash classic; do ./$(BIN) bench --activations -m $$dir/m.gguf -p 512 --attention $$a || exit 1; done; \
	  case $$s in llama3.2-1b|tinyllama-1.1b) ./$(BIN) bench --activations --frag -m $$dir/m.gguf -p 256 -n 1792 -t 2 || exit 1;; esac; \
	  rm -f $$dir/m.gguf; done

# Shared anchors (issue #29.4): 8 sessions of stories260K in one process,
# and 4 child processes of one session each (Options.ShareAnchors), with
# one 512-token system prompt as anchors; switches KSM on (needs root and a
# writable /sys/kernel/mm/ksm, skipped otherwise), restores its knobs, and
# logs pages_sharing, the zones' and the processes' PSS and ksmd's CPU.
# The same tests run in make test.
bench-ksm: build
	EDGELLM_SHARED=$(SHARED) $(GO) test -count=1 -v -run '^TestSharedAnchorsKSM' ./internal/native

# Shared anchors across processes (issue #29.4): 8 `serve` processes with
# one 512-token system prompt as --anchors, without and with
# --share-anchors: pages_sharing, each process's PSS, ksmd's CPU, on
# stories260K and the SYNTHETIC TinyLlama 1.1B shape (Q4_0, written to a
# temp dir and removed). Needs root and a writable /sys/kernel/mm/ksm
# (says so and skips otherwise); restores every KSM knob.
bench-ksm-serve: build
	EDGELLM_SHARED=$(SHARED) scripts/bench-ksm-serve.sh ./$(BIN) $(SHARED)/models/stories260K.gguf
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	  ./$(BIN) synth --shape tinyllama-1.1b --type q4_0 -o $$dir/m.gguf 2>/dev/null && \
	  EDGELLM_SHARED=$(SHARED) scripts/bench-ksm-serve.sh ./$(BIN) $$dir/m.gguf 8 256 64 1024 1

# Planted-fact retrieval probe (issue #29.2): decay-merge against drop on the
# SYNTHETIC llama3.2-1b shape (Q4_0, written to a temp dir and removed),
# windows 16 and 32. make bench's sweep of every Go benchmark runs it too;
# TestFactProbe (make test) is the same probe on small models.
bench-probe: build
	EDGELLM_SHARED=$(SHARED) $(GO) test -count=1 -v -run '^$$' -bench '^BenchmarkFactProbe$$' -benchtime 1x -timeout 60m ./internal/native

# Warm start (issue #29): time to first token and peak RSS of whole run
# processes from a cold page cache per --willneed-layers value, on SYNTHETIC
# 1B and 7B shapes (Q4_0, written to a temp dir and removed).
bench-warm-start: build
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && for s in llama3.2-1b llama2-7b; do \
	  ./$(BIN) synth --shape $$s --type q4_0 -o $$dir/m.gguf 2>/dev/null || exit 1; \
	  echo "== $$s (SYNTHETIC)"; ./$(BIN) bench --warm-start -m $$dir/m.gguf -r 5 -t 2 || exit 1; \
	  rm -f $$dir/m.gguf; done

# Per-layer precision proof (docs/BENCHMARKS.md): calibrate stories260K-ff192 on
# testdata/text/calib.txt, judge on testdata/text/heldout.txt (never used for
# calibration; both from scripts/gen-calib-text.sh, see testdata/text/README.md):
# each calibrated assignment against every assignment at exactly its bits, with
# bootstrap intervals; manifest, plot and numbers go to docs/bench/.
DERIVED := $(SHARED)/models/derived/stories260K-ff192
PROOF_FLAGS = $(DERIVED)-f32.gguf --sets $(DERIVED)-Q8_0.gguf,$(DERIVED)-Q5_0.gguf,$(DERIVED)-Q4_0.gguf \
	--text testdata/text/calib.txt --eval-text testdata/text/heldout.txt --chunk 128 --threads 1
bench-precision: build
	mkdir -p docs/bench
	./$(BIN) calibrate $(PROOF_FLAGS) -o docs/bench/stories260K-ff192.manifest.json \
		--plot docs/bench/precision-proof.svg --eval-json docs/bench/precision-proof.json
	./$(BIN) calibrate $(PROOF_FLAGS) --alloc twoway -o docs/bench/stories260K-ff192.manifest.json \
		--plot docs/bench/precision-proof-twoway.svg --eval-json docs/bench/precision-proof-twoway.json


# Long tests (README "make soak"): synthesizes a llama2-7b Q4_0 (3.6 GiB)
# into a temp dir (TestSoakSynth7B: peak RSS while writing), then runs every
# TestSoak* with it (TestSoakLoadRSS: RSS at the first token; the full-size
# TinyLlama switch cost) and TestWasmMemoryStable's 10 M calls. Needs ~6 GiB
# of disk in $$TMPDIR; the temp dir is removed at the end.
SOAK_RUN := ^TestSoak|^TestWasmMemoryStable$$
soak: build policies
	@dir=$$(mktemp -d) && trap 'rm -rf "$$dir"' EXIT && \
	EDGELLM_SHARED=$(SHARED) EDGELLM_SOAK=1 EDGELLM_SOAK_DIR=$$dir $(GO) test -count=1 -v -run '^TestSoakSynth7B$$' -timeout 60m ./internal/synth && \
	EDGELLM_SHARED=$(SHARED) EDGELLM_SOAK=1 EDGELLM_NATIVE_BIG=$$dir/llama2-7b-q4_0.gguf $(GO) test -count=1 -v -run '$(SOAK_RUN)' -skip '^TestSoakSynth7B$$' -timeout 120m ./...

# The main job on the default model: $$EDGELLM_MODEL, else ../shared/models/stories260K.gguf,
# else a small synthetic model made on the fly (labelled as such).
demo: build
	./$(BIN) run -n 64

# The C API (include/edgellm.h, written by hand): lib/libedgellm.so.1 (the
# soname; lib/libedgellm.so links to it) and lib/libedgellm.a (c-archive, the
# iOS route: Go's c-shared does not run on iOS). Built portable by default:
# -march=$(LIB_MARCH) (x86-64-v2: SSE4.2/POPCNT, no AVX: runs on any x86-64
# CPU since ~2009, ggml's matrix kernels slower than AVX2's; LIB_MARCH=x86-64-v3
# for AVX2, LIB_MARCH=native for this CPU only). Only the functions in
# cmd/libedgellm/edgellm.map are exported. Other flags than the main build's
# compile llama.cpp once more (~6-7 minutes on 2 busy cores, then cached);
# TestCAPI builds with the same flags, so make test pays it once too
# (cmd/libedgellm/capi_test.go libMarch). The exports live outside the main
# package (cmd/libedgellm/main.go) so a rebuild is a link.
LIB_MARCH        ?= $(if $(filter x86_64,$(ARCH)),x86-64-v2,armv8.2-a)
LIB_MARCH_ARM64  ?= armv8.2-a
LIB_SONAME       ?= libedgellm.so.1
LIB_MAP          := $(CURDIR)/cmd/libedgellm/edgellm.map
LIB_EXTLDFLAGS    = -Wl,-soname,$(1) -Wl,--version-script=$(LIB_MAP) -Wl,--no-undefined-version
LIB_CGO_ENV       = CGO_CFLAGS='-O3 -march=$(LIB_MARCH) $(ARCH_FLAGS) $(SPINWAIT)' CGO_CXXFLAGS='-O3 -march=$(LIB_MARCH) $(ARCH_FLAGS)'
.PHONY: lib-static
lib: cgo-check
	@mkdir -p lib
	$(LIB_CGO_ENV) $(GO) build -buildmode=c-shared -ldflags '$(LDFLAGS) -extldflags "$(call LIB_EXTLDFLAGS,$(LIB_SONAME))"' -o lib/$(LIB_SONAME) ./cmd/libedgellm
	ln -sf $(LIB_SONAME) lib/libedgellm.so
	rm -f lib/libedgellm.h lib/$(basename $(LIB_SONAME)).h  # cgo's generated header: include/edgellm.h is the contract

# The static library (c-archive) for iOS-style linking: lib/libedgellm.a. Every
# global symbol of llama.cpp/ggml stays visible in an archive (no version script
# applies); the app links it with -lpthread -ldl -lm -lstdc++ (TestCAPIStatic).
lib-static: cgo-check
	@mkdir -p lib
	$(LIB_CGO_ENV) $(GO) build -buildmode=c-archive -ldflags '$(LDFLAGS)' -o lib/libedgellm.a ./cmd/libedgellm
	rm -f lib/libedgellm.h

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Print the cgo environment, for running go commands by hand:  eval "$$(make -s env)"
env: cgo-check
	@echo export CGO_ENABLED=\"$(CGO_ENABLED)\"
	@echo export CGO_CPPFLAGS=\"$(CGO_CPPFLAGS)\"
	@echo export CGO_CFLAGS=\"$(CGO_CFLAGS)\"
	@echo export CGO_CXXFLAGS=\"$(CGO_CXXFLAGS)\"
	@echo export EDGELLM_SHARED=\"$(SHARED)\"

clean:
	rm -rf bin lib

# ---- Device build: linux/arm64 with the Debian cross toolchain ---------------
# `make build-arm64` cross-compiles $(BIN_ARM64); `make test-arm64` runs it under
# qemu-aarch64 (scripts/arm64-smoke.sh). .ci/run installs the toolchain and qemu
# (gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu, qemu-user) when missing.
# Every variable can be overridden on the command line, e.g.
#   make build-arm64 MARCH_ARM64=armv8-a                      # no dot product (Cortex-A53)
#   make build-arm64 MARCH_ARM64=armv8.2-a+dotprod+fp16+i8mm  # newer cores
#   make build-arm64 GOOS_ARM64=android CROSS_ARM64_CC=.../aarch64-linux-android29-clang \
#        CROSS_ARM64_CXX=.../aarch64-linux-android29-clang++    # NDK: untested
# NEON is always on for arm64 (part of the base architecture); the x86
# ARCH_FLAGS are not passed. CGO_CPPFLAGS (the ollama include paths) is the
# one exported above; ollama's cgo files add ggml's arm64 sources and defines.
CROSS_ARM64_CC  ?= aarch64-linux-gnu-gcc
CROSS_ARM64_CXX ?= aarch64-linux-gnu-g++
MARCH_ARM64     ?= armv8.2-a+dotprod
GOOS_ARM64      ?= linux
BIN_ARM64       ?= bin/edgellm-$(GOOS_ARM64)-arm64
# The environment of an arm64 cgo build (a binary here, a c-shared library too).
CROSS_ARM64_ENV  = GOOS=$(GOOS_ARM64) GOARCH=arm64 CGO_ENABLED=1 \
                   CC='$(CROSS_ARM64_CC)' CXX='$(CROSS_ARM64_CXX)' \
                   CGO_CFLAGS='-O3 -march=$(MARCH_ARM64) $(SPINWAIT)' CGO_CXXFLAGS='-O3 -march=$(MARCH_ARM64)'

.PHONY: build-arm64 test-arm64 test-arm64-matvec cross-arm64-check lib-arm64

# One clear line when a cross compiler is missing, before any Go or C work.
cross-arm64-check:
	@for c in '$(CROSS_ARM64_CC)' '$(CROSS_ARM64_CXX)'; do \
	  command -v "$${c%% *}" >/dev/null 2>&1 || { echo "arm64 build: cross compiler '$$c' not found (Debian: apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu; or set CROSS_ARM64_CC/CROSS_ARM64_CXX)" >&2; exit 1; }; \
	done

# The first cross build compiles llama.cpp for arm64 (minutes on 2 cores); the
# Go build cache makes reruns quick. Built to a temporary name and renamed, so a
# failed build leaves nothing behind.
build-arm64: cross-arm64-check cgo-check
	@mkdir -p $(dir $(BIN_ARM64))
	$(CROSS_ARM64_ENV) $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN_ARM64).tmp ./cmd/edgellm || { rm -f $(BIN_ARM64).tmp; exit 1; }
	@mv $(BIN_ARM64).tmp $(BIN_ARM64)

# The C API for linux/arm64: $(LIB_ARM64), built in a temporary directory and
# moved into place (the library's soname is its file name, libedgellm.so as
# Android wants it, so the name is final from the start; a failed build leaves
# nothing behind). Portable: -march=$(LIB_MARCH_ARM64), the version script of
# `lib`. The first build compiles llama.cpp for arm64 once more, in -shared
# code (minutes on 2 cores).
LIB_ARM64 ?= lib/$(GOOS_ARM64)-arm64/libedgellm.so
lib-arm64: cross-arm64-check cgo-check
	@rm -rf $(dir $(LIB_ARM64)).tmp && mkdir -p $(dir $(LIB_ARM64)).tmp
	$(CROSS_ARM64_ENV) CGO_CFLAGS='-O3 -march=$(LIB_MARCH_ARM64) $(SPINWAIT)' CGO_CXXFLAGS='-O3 -march=$(LIB_MARCH_ARM64)' \
	  $(GO) build -buildmode=c-shared -ldflags '$(LDFLAGS) -extldflags "$(call LIB_EXTLDFLAGS,$(notdir $(LIB_ARM64)))"' -o $(dir $(LIB_ARM64)).tmp/$(notdir $(LIB_ARM64)) ./cmd/libedgellm || { rm -rf $(dir $(LIB_ARM64)).tmp; exit 1; }
	@mkdir -p $(dir $(LIB_ARM64)) && mv $(dir $(LIB_ARM64)).tmp/$(notdir $(LIB_ARM64)) $(LIB_ARM64) && rm -rf $(dir $(LIB_ARM64)).tmp

# Smoke run of the arm64 binary under qemu-aarch64: version, the golden text on
# both engines, a signed default-policy bundle, parity. Speeds printed under
# emulation are not performance numbers. Then the C API test program
# (cmd/libedgellm/testdata/capi_test.c), cross-compiled against $(LIB_ARM64)
# and run under qemu (scripts/capi-arm64.sh; bundles signed by this machine's
# $(BIN)).
test-arm64: test-arm64-matvec build-arm64 lib-arm64 build policies
	MARCH_ARM64='$(MARCH_ARM64)' scripts/arm64-smoke.sh $(BIN_ARM64) $(SHARED) policies/default/default.wasm
	CROSS_ARM64_CC='$(CROSS_ARM64_CC)' scripts/capi-arm64.sh $(LIB_ARM64) $(BIN) $(SHARED) policies/default/default.wasm

# The kernels/matvec tests as an arm64 test binary, built at the base
# architecture (-march=armv8-a: the NEON dotprod and i8mm kernels come in
# only through their target attributes) and run under qemu on CPUs with dotprod
# and i8mm, dotprod only and neither, each checking the kernel getauxval chose;
# then package kernels' custom-op tests (the kernels inside a ggml graph) on
# max (i8mm) and cortex-a76, built like build-arm64 so they reuse its compiled
# llama.cpp (scripts/matvec-arm64.sh). About 3.5 minutes here, loaded.
MATVEC_TEST_ARM64  ?= bin/matvec-$(GOOS_ARM64)-arm64.test
KERNELS_TEST_ARM64 ?= bin/kernels-$(GOOS_ARM64)-arm64.test
test-arm64-matvec: cross-arm64-check cgo-check
	@mkdir -p $(dir $(MATVEC_TEST_ARM64)) $(dir $(KERNELS_TEST_ARM64))
	$(CROSS_ARM64_ENV) CGO_CFLAGS='-O3 -march=armv8-a' $(GO) test -c -o $(MATVEC_TEST_ARM64) ./kernels/matvec
	$(CROSS_ARM64_ENV) $(GO) test -c -o $(KERNELS_TEST_ARM64) ./kernels
	scripts/matvec-arm64.sh $(MATVEC_TEST_ARM64) $(KERNELS_TEST_ARM64)
