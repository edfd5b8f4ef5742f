# attn — build, test, demo.
#   make            library (static + shared) and the attn tool
#   make test       build and run every test; ends with "N passed, N failed"
#   make test CC=aarch64-linux-gnu-gcc BUILD=build-arm64 RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
#                   the same for arm64, cross-built and run under qemu
#   make test SAN=1 the same, built with AddressSanitizer + UBSan
#   make fuzz       libFuzzer targets (clang) in build-fuzz/; make fuzz-run runs each
#                   for FUZZ_SECONDS (docs/FUZZING.md)
#   make demo       the main job (see README)
#   make demo-g2p   grapheme-to-phoneme on CMUdict, end to end (docs/G2P.md)
#   make demo-lm    a language model on the State of the Union addresses (docs/LM.md)
#   make bench-g2p  G2P training tokens/s: attn and PyTorch on the same batches
#   make bench-peers attn, ONNX Runtime and PyTorch on the same attention, one table
#   make DEV=1      warnings are errors (-Werror), as in CI (.ci/run)
#   make install PREFIX=/usr/local DESTDIR=...   (mk/install.mk; make uninstall)

# --- compiler and warnings ---------------------------------------------------
# GNU make predefines CC=cc, so `CC ?= gcc` would never apply: gcc unless CC
# comes from the command line or the environment.
ifeq ($(origin CC),default)
CC = gcc
endif
# -Werror for developers and CI only: a packager's newer compiler may warn
# where gcc 12 does not, and that must not break their build.
DEV ?= 0
WERROR := $(if $(filter 1,$(DEV)),-Werror)
# -----------------------------------------------------------------------------

SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
OPT = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
else ifeq ($(SAN),fuzz)
# the build of make fuzz (tests/fuzz/fuzz.mk), with clang: libFuzzer's coverage
# hooks in every object; clang's loop-vectorizer remarks are no errors
BUILD ?= build-fuzz
OPT = -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
  -fno-sanitize-recover=all -Wno-pass-failed
else
BUILD ?= build
OPT = -O2 -g
endif

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra $(WERROR) -Wshadow -Wno-unused-parameter \
  -fopenmp -fPIC -Iinclude -Isrc
CFLAGS += $(CFLAGS_BASE) $(OPT)
LDLIBS = -lm -lpthread
LDFLAGS += -fopenmp $(filter -fsanitize%,$(OPT))

# Optional libraries for apps (pictures, mail). Linked when the target's
# pkg-config finds them. A cross build (CC's target, `$(CC) -dumpmachine`, not
# this machine's architecture) asks <triplet>-pkg-config if there is one, else
# pkg-config limited to the target's multiarch directory, so that no host
# library leaks in; without the target's -dev packages the apps build without
# pictures and mail. PKG_CONFIG=... overrides.
TARGET_TRIPLET := $(shell $(CC) -dumpmachine 2>/dev/null)
ifneq ($(firstword $(subst -, ,$(TARGET_TRIPLET))),$(shell uname -m))
CROSS := $(TARGET_TRIPLET)-
ifeq ($(origin PKG_CONFIG),undefined)
PKG_CONFIG := $(if $(shell command -v $(CROSS)pkg-config 2>/dev/null),$(CROSS)pkg-config,PKG_CONFIG_LIBDIR=/usr/lib/$(TARGET_TRIPLET)/pkgconfig:/usr/share/pkgconfig PKG_CONFIG_PATH= pkg-config)
endif
endif
PKG_CONFIG ?= pkg-config
APP_PKGS := $(shell for p in cairo pangocairo fontconfig gmime-3.0; do $(PKG_CONFIG) --exists $$p 2>/dev/null && echo $$p; done)
# Pictures need cairo and pangocairo together (Pango lays out every label,
# with fontconfig's font fallback for CJK, Arabic, emoji...): without
# pangocairo, cairo is left out too and the apps build without pictures.
ifeq ($(filter pangocairo,$(APP_PKGS)),)
APP_PKGS := $(filter-out cairo,$(APP_PKGS))
endif
ifneq ($(APP_PKGS),)
APP_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(APP_PKGS)) $(foreach p,$(APP_PKGS),-DATTN_HAVE_$(shell echo $(p) | tr 'a-z.-' 'A-Z__' | sed 's/_3_0//'))
APP_LIBS := $(shell $(PKG_CONFIG) --libs $(APP_PKGS))
endif

# ---- MPI (data-parallel training, docs/DISTRIBUTED.md) ----------------------
# MPI=auto (default): on where $(PKG_CONFIG) finds Open MPI's ompi-c (Debian
# libopenmpi-dev; a cross build asks the target's pkg-config, so it is off
# there without the target's package); MPI=1 insists (an error without it);
# MPI=0 builds without. On: src/apps/train/dist_mpi.c does MPI (-DATTN_HAVE_MPI),
# and the tool and the tests link libmpi, like the apps' other optional
# libraries; the library (libattn.a/.so, attn.pc) never does.
MPI ?= auto
ifneq ($(MPI),0)
MPI_FOUND := $(shell $(PKG_CONFIG) --exists ompi-c 2>/dev/null && echo yes)
ifeq ($(MPI_FOUND),yes)
APP_CFLAGS += -DATTN_HAVE_MPI $(shell $(PKG_CONFIG) --cflags ompi-c)
APP_LIBS += $(shell $(PKG_CONFIG) --libs ompi-c)
else ifeq ($(MPI),1)
$(error MPI=1: pkg-config finds no ompi-c (apt-get install libopenmpi-dev openmpi-bin))
endif
endif
# ---- end of MPI --------------------------------------------------------------

# src/kernels: the dispatch module at its top, the loops by family in its
# folders (gemm, lowp, flash, sdpa, rows) and the micro-kernels by ISA in
# src/kernels/arch/<isa>/ (each x86 file carries its target attributes,
# kernels/arch/isa_targets.h: no per-file flags)
LIB_SRC := $(wildcard src/core/*.c src/kernels/*.c src/kernels/*/*.c src/kernels/arch/*/*.c \
  src/nn/*.c src/io/*.c src/train/*.c)
# the apps: one folder (wing) per application or shared piece, src/apps/<wing>/
# (README "Layout"; tools/check_wings.sh checks which wing may include which)
APP_SRC := $(wildcard src/apps/*.c src/apps/*/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
# make test TESTS="test_kernels test_gemm" runs only those programs;
# TESTS_SKIP="test_viz ..." runs all but those (CI's emulated-Haswell stage)
TESTS ?=
TESTS_SKIP ?=

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
APP_OBJ := $(APP_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

# The optional packages found (pkg-config, MPI) set APP_CFLAGS: when they
# change (say GMime installed after a build), the objects that use them are
# rebuilt. $(BUILD)/app_cflags holds the last build's, rewritten only when
# they differ.
APP_CFLAGS_STAMP := $(BUILD)/app_cflags
$(shell mkdir -p $(BUILD) && printf '%s\n' '$(strip $(APP_CFLAGS))' | cmp -s - $(APP_CFLAGS_STAMP) || printf '%s\n' '$(strip $(APP_CFLAGS))' > $(APP_CFLAGS_STAMP))

.PHONY: all test demo clean format bench golden deps
all: $(BUILD)/libattn.a $(BUILD)/libattn.so $(BUILD)/attn

$(APP_OBJ) $(CLI_OBJ) $(TEST_SRC:%.c=$(BUILD)/%.o): $(APP_CFLAGS_STAMP)

$(BUILD)/%.o: %.c $(wildcard include/*.h include/attn/*.h src/*/*.h src/*/*/*.h src/*/*/*/*.h)
	@mkdir -p $(dir $@)
	@# a test whose source no longer compiles must not leave its old program to run
	$(if $(filter tests/%,$<),@rm -f $(basename $@))
	$(CC) $(CFLAGS) $(if $(filter src/apps/% src/cli/% tests/%,$<),$(APP_CFLAGS)) \
	  $(if $(filter src/kernels/% tests/%,$<),-DATTN_ALLOW_DEPRECATED) -c $< -o $@

$(BUILD)/libattn.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# --- shared library: libattn.so.MAJOR.MINOR.PATCH, SONAME libattn.so.MAJOR ---
# (0.x: SONAME libattn.so.0.MINOR, since a 0.x minor release may break the ABI)
# The version is read from include/attn/version.h (its one source).
ver_part = $(shell sed -n 's/^\#define ATTN_VERSION_$(1)  *\([0-9][0-9]*\).*/\1/p' include/attn/version.h)
VERSION_MAJOR := $(call ver_part,MAJOR)
VERSION := $(VERSION_MAJOR).$(call ver_part,MINOR).$(call ver_part,PATCH)
SOVERSION := $(if $(filter 0,$(VERSION_MAJOR)),0.$(call ver_part,MINOR),$(VERSION_MAJOR))
SONAME := libattn.so.$(SOVERSION)
SHLIB := libattn.so.$(VERSION)
# libattn.so exports only the ATTN_API functions (include/attn/api.h). The
# programs (tool, tests) keep default visibility: the sanitizer runtimes must
# see their hooks (__lsan_default_suppressions, __asan_default_options).
$(LIB_OBJ): CFLAGS += -fvisibility=hidden

$(BUILD)/$(SHLIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# libattn.so -> libattn.so.MAJOR -> libattn.so.MAJOR.MINOR.PATCH
$(BUILD)/libattn.so: $(BUILD)/$(SHLIB)
	ln -sf $(SHLIB) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@
# -----------------------------------------------------------------------------

# --- make install / uninstall, and tests/test_install.sh (in TEST_BIN) -------
include mk/install.mk
# -----------------------------------------------------------------------------

$(BUILD)/attn: $(CLI_OBJ) $(APP_OBJ) $(BUILD)/libattn.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(APP_OBJ) $(BUILD)/libattn.a $(APP_LIBS) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(APP_OBJ) $(BUILD)/libattn.a
	$(CC) $(LDFLAGS) -o $@ $< $(APP_OBJ) $(BUILD)/libattn.a $(APP_LIBS) $(LDLIBS)
# test_alloc_sweep's LD_PRELOAD shim (no sanitizers: the SAN=1 build skips the sweep)
$(BUILD)/tests/alloc_fail_shim.so: tests/alloc_fail_shim.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -fopenmp,$(CFLAGS_BASE)) -O2 -shared -o $@ $< -ldl
$(BUILD)/tests/test_alloc_sweep: $(BUILD)/tests/alloc_fail_shim.so
# the Python tests load the shared library (tests/test_python.c)
$(BUILD)/tests/test_python: $(BUILD)/libattn.so
# the tests' shared headers (harness.h, sdpa_problem.h, ...)
$(TEST_SRC:%.c=$(BUILD)/%.o): $(wildcard tests/*.h)
# which wing of src/apps/ includes which (tools/check_wings.sh, by
# tests/test_wings.sh), run by tests/run.sh like a test program
TEST_BIN += $(BUILD)/tests/test_wings
$(BUILD)/tests/test_wings: tests/test_wings.sh tools/check_wings.sh
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# written by the Makefile\ncd "%s" || exit 1\nexec sh tests/test_wings.sh\n' '$(CURDIR)' > $@
	@chmod +x $@

# the Python package installed as users install it (tests/test_pip.sh): pip
# into a fresh venv, offline, reusing this build's library and tool
TEST_BIN += $(BUILD)/tests/test_pip
$(BUILD)/tests/test_pip: tests/test_pip.sh $(BUILD)/libattn.so $(BUILD)/attn
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# written by the Makefile\ncd "%s" || exit 1\nexec env ATTN_TEST_BUILD="%s" ATTN_TEST_SAN="%s" sh tests/test_pip.sh\n' '$(CURDIR)' '$(BUILD)' '$(SAN)' > $@
	@chmod +x $@

# no cycle of calls between the files of src/kernels/ (tools/check_kernel_calls.sh,
# by tests/test_kernel_calls.sh, on this build's objects)
TEST_BIN += $(BUILD)/tests/test_kernel_calls
$(BUILD)/tests/test_kernel_calls: tests/test_kernel_calls.sh tools/check_kernel_calls.sh $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# written by the Makefile\ncd "%s" || exit 1\nexec sh tests/test_kernel_calls.sh "%s"\n' '$(CURDIR)' '$(BUILD)' > $@
	@chmod +x $@

# no AVX-512/AMX instruction outside the code only such a CPU reaches
# (tools/check_isa_objects.sh, by tests/test_isa_objects.sh, on this build's objects)
TEST_BIN += $(BUILD)/tests/test_isa_objects
$(BUILD)/tests/test_isa_objects: tests/test_isa_objects.sh tools/check_isa_objects.sh $(LIB_OBJ) $(APP_OBJ) $(CLI_OBJ)
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# written by the Makefile\ncd "%s" || exit 1\nexec env CC="%s" ATTN_TEST_CFLAGS="%s" sh tests/test_isa_objects.sh "%s"\n' '$(CURDIR)' '$(CC)' '$(strip $(CFLAGS))' '$(BUILD)' > $@
	@chmod +x $@

# Each test program is built and run on its own, so one failure does not hide
# the others; tests/run.sh adds up the counts. RUNNER="qemu-aarch64 -L
# /usr/aarch64-linux-gnu" (say) runs every test program and the attn tool
# they spawn under that command; TESTS="test_a test_b" selects programs.
RUNNER ?=
TEST_RUN := $(filter-out $(addprefix $(BUILD)/tests/,$(TESTS_SKIP)),\
  $(if $(strip $(TESTS)),$(addprefix $(BUILD)/tests/,$(TESTS)),$(TEST_BIN)))
test: $(BUILD)/attn
	@$(MAKE) -k --no-print-directory $(TEST_RUN) || true
	@ATTN_BIN=$(BUILD)/attn RUNNER='$(RUNNER)' sh tests/run.sh $(BUILD) $(TEST_RUN)

demo: $(BUILD)/attn
	@sh tools/demo.sh $(BUILD)/attn

# grapheme-to-phoneme on CMUdict: fetch, split, train a small model, eval, predict (docs/G2P.md)
.PHONY: demo-g2p
demo-g2p: $(BUILD)/attn
	@sh tools/demo_g2p.sh $(BUILD)/attn

# a language model on the State of the Union addresses: fetch, train to a time budget, perplexity
# against a Kneser-Ney trigram, a paragraph, tokens/s at a 1k-token context (docs/LM.md)
.PHONY: demo-lm
demo-lm: $(BUILD)/attn
	@sh tools/demo_lm.sh $(BUILD)/attn

# training tokens/s of attn and PyTorch (f32, bf16 autocast) on the same model and batch, and the ratio
.PHONY: bench-train
bench-train: $(BUILD)/attn
	$(BUILD)/attn bench train --torch tools/bench_train_torch.py

# G2P training tokens/s of attn and PyTorch on the same model and batches, and the ratio (docs/G2P.md)
.PHONY: bench-g2p
bench-g2p: $(BUILD)/attn
	@sh tools/bench_g2p.sh $(BUILD)/attn

# attn, ONNX Runtime (npm onnxruntime-node, installed in a cache folder outside the tree) and
# PyTorch on the same attention, interleaved in one run, one table with the CPU, the measured
# FMA peak and each peer checked against attn (docs/ISA.md "Peers"); BENCH_PEERS_ARGS is passed
# to tools/bench_peers/bench_peers.py (e.g. "--n 4096 --rounds 5 --no-backward")
.PHONY: bench-peers
bench-peers: $(BUILD)/attn $(BUILD)/libattn.so
	@sh tools/bench_peers/bench_peers.sh $(BUILD)/attn $(BENCH_PEERS_ARGS)

# GPT-2-small-shaped generation: attn hf generate (f32 and int8 weights) and PyTorch, tokens/s
# at 1 and 2 threads in one run (docs/HF.md "Generation"; needs /usr/bin/python3 with torch)
.PHONY: bench-gpt2
bench-gpt2: $(BUILD)/attn
	@sh tools/bench_gpt2.sh $(BUILD)/attn

golden:
	/usr/bin/python3 tools/gen_golden.py tests/golden

# the Unicode ranges of GPT-2's pre-tokenizer (src/apps/text/unicode_tables.c, committed)
.PHONY: unicode-classes
unicode-classes:
	/usr/bin/python3 tools/gen_unicode_classes.py src/apps/text/unicode_tables.c

# attn against cases ported from FlashAttention's, PyTorch's and ggml's test suites
# (docs/VARIANTS.md "Peer suite"; needs /usr/bin/python3 with torch; not part of make test)
.PHONY: peer-suite
peer-suite: $(BUILD)/attn
	/usr/bin/python3 tools/peer_suite.py $(BUILD)/attn

format:
	clang-format -i $(wildcard include/*.h include/attn/*.h src/*/*.c src/*/*.h \
	  src/kernels/*/*.[ch] src/kernels/arch/*/*.[ch] tests/*.c tests/*.h)

include tests/fuzz/fuzz.mk

clean:
	rm -rf build build-san build-arm64 build-fuzz build-py dist

# The Python package (python/README.md): pure Python over libattn.so, which it
# finds in PREFIX/lib (make install) from PYTHONDIR/attn.
PREFIX ?= /usr/local
PYTHONDIR ?= $(PREFIX)/lib/python3/dist-packages
.PHONY: install-python uninstall-python
install-python:
	install -d $(DESTDIR)$(PYTHONDIR)/attn
	install -m 644 python/attn/*.py python/attn/py.typed $(DESTDIR)$(PYTHONDIR)/attn
uninstall-python:
	rm -rf $(DESTDIR)$(PYTHONDIR)/attn

# The package as a wheel (pyproject.toml, setup.py): libattn.so and the tool
# inside it, built by this Makefile in $(BUILD) (ATTN_BUILD_DIR), offline with
# the installed setuptools and wheel (--no-build-isolation: pip would fetch
# them from PyPI otherwise). Writes dist/attn-VERSION-py3-none-PLATFORM.whl.
# make python-deps: the Debian packages the package and its build need.
PYTHON ?= /usr/bin/python3
.PHONY: wheel python-deps
wheel: $(BUILD)/libattn.so $(BUILD)/attn
	env -u MAKEFLAGS -u MAKELEVEL CC='$(CC)' ATTN_BUILD_DIR=$(BUILD) $(PYTHON) -m pip wheel --no-index \
	  --no-build-isolation --no-deps -w dist .
python-deps:
	@sh tools/deps.sh --python
