# deepinfer — plain Makefile. `make help` lists the targets.
#
# Sources are discovered, not listed: every src/**/*.c goes into libdeepinfer,
# every tools/*.c into the CLI, every tools/*/*.c (the dummy-checkpoint
# builder, the score driver: code the CLI and the tests share, not part of the
# library) into the CLI and the test runners, every tests/**/test_*.c into the test runner,
# every examples/*.c into build/examples/ (public header only), every
# src/**/*.cu into the CUDA objects. Files named *_avx2.c / *_avx512.c
# are compiled with that instruction set and chosen at run time (util/cpu.h).

BUILD    ?= build
CC       ?= gcc
NVCC     ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
OPT      ?= -O2
SAN      ?=

PCRE2_CFLAGS := $(shell pkg-config --cflags libpcre2-8 2>/dev/null)
PCRE2_LIBS   := $(shell pkg-config --libs libpcre2-8 2>/dev/null || echo -lpcre2-8)
# ICU is not linked: src/util/icu_loader.c dlopens libicuuc (any version) when
# a DeepSeek-V4.1 Engram token map is built, so binaries built here also start
# where another ICU is installed. -ldl: dlopen for glibc < 2.34.

CPPFLAGS += -Iinclude -Isrc -Itests -Itools -D_GNU_SOURCE -DDI_BUILD_DIR=\"$(BUILD)\" $(PCRE2_CFLAGS)
# -fvisibility=hidden: libdeepinfer.so exports the public API (DEEPINFER_API in
# include/deepinfer.h) and nothing else; the CLI, the tests and the CUDA
# binaries link the objects or the static archive and see every symbol.
CFLAGS   += -std=c11 $(OPT) -g -Wall -Wextra -Werror -fPIC -fvisibility=hidden -pthread -fno-strict-aliasing $(SAN) -MMD -MP
LDLIBS   += $(PCRE2_LIBS) -lz -lm -lpthread -ldl
# libmicrohttpd: the HTTP server of `deepinfer serve` (tools/serve/), linked into the
# binaries that hold tools/ (the CLIs and the test runners), never into libdeepinfer.
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
LDFLAGS  += $(SAN) -pthread

ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mavx512vbmi -mavx2 -mfma -mf16c

NVCC_ARCH  := -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100a,code=sm_100a
# -fmad=false: no implicit FMA contraction, so element-wise kernels round
# exactly as the C11 CPU ops do (gcc -std=c11 does not contract either);
# explicit fmaf() and the tensor cores are unaffected.
NVCC_FLAGS ?= -O3 -std=c++17 -lineinfo -fmad=false -Xcompiler -fPIC -Werror all-warnings $(NVCC_ARCH) $(NVCC_EXTRA) -Iinclude -Isrc
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -lcudart_static -lrt -ldl -lstdc++
CUDA_CPPFLAGS := -I$(CUDA_HOME)/include

# src/ops/cuda/*.c: the CUDA backend's C glue (ops vtable, allocator); only
# in CUDA builds, with the .cu kernels.
LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/ops/cuda/*' | sort)
CU_SRC   := $(shell find src -name '*.cu' | sort)
CU_C_SRC := $(sort $(wildcard src/ops/cuda/*.c))
CLI_SRC  := $(sort $(wildcard tools/*.c))
TOOLS_LIB_SRC := $(sort $(wildcard tools/*/*.c))
TEST_SRC := tests/runner.c $(shell find tests -name 'test_*.c' | sort)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CU_OBJ   := $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CU_C_OBJ := $(CU_C_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TOOLS_LIB_OBJ := $(TOOLS_LIB_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

VERSION_MAJOR := $(shell sed -n 's/^.define DEEPINFER_VERSION_MAJOR //p' include/deepinfer.h)
VERSION_MINOR := $(shell sed -n 's/^.define DEEPINFER_VERSION_MINOR //p' include/deepinfer.h)
VERSION_PATCH := $(shell sed -n 's/^.define DEEPINFER_VERSION_PATCH //p' include/deepinfer.h)
VERSION    := $(VERSION_MAJOR).$(VERSION_MINOR).$(VERSION_PATCH)
SONAME     := libdeepinfer.so.$(VERSION_MAJOR)

STATIC_LIB := $(BUILD)/libdeepinfer.a
SHARED_LIB := $(BUILD)/libdeepinfer.so
CLI        := $(BUILD)/deepinfer
TEST_BIN   := $(BUILD)/test_runner
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
CUDA_CLI   := $(BUILD)/deepinfer-cuda

.PHONY: all lib cli tests examples test test-python asan cuda cuda-objs cuda-tests lab fuzz fuzz-bins install clean help
.DEFAULT_GOAL := all

all: lib cli tests examples ## build libdeepinfer (static + shared), the CLI, the test runner and the examples

lib: $(STATIC_LIB) $(SHARED_LIB)
cli: $(CLI)
tests: $(TEST_BIN)
examples: $(EXAMPLE_BIN) ## build examples/*.c against the public header and the static library

# The engine finds the embedded demo model next to the executable's tree, else
# in this source tree (engine_open.c).
$(BUILD)/src/io/model_dir.o: CPPFLAGS += -DDEEPINFER_SOURCE_DIR='"$(CURDIR)"'

# Examples see only the public header, and link the static library.
$(BUILD)/examples/%: examples/%.c $(STATIC_LIB) include/deepinfer.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) -g -Wall -Wextra -Werror -pthread $(SAN) -Iinclude $< $(STATIC_LIB) $(LDFLAGS) $(LDLIBS) -o $@

$(BUILD)/%_avx2.o: ISA_FLAGS := $(ISA_AVX2)
$(BUILD)/%_avx512.o: ISA_FLAGS := $(ISA_AVX512)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ISA_FLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MD -MP -MF $(@:.o=.d) -c $< -o $@

$(STATIC_LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(SHARED_LIB): $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

# Objects are linked directly (not through the archive) so that
# self-registering tests and subcommands are never dropped by the linker.
$(CLI): $(CLI_OBJ) $(TOOLS_LIB_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MHD_LIBS)

$(TEST_BIN): $(TEST_OBJ) $(TOOLS_LIB_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MHD_LIBS)

# `make install [PREFIX=/usr/local] [DESTDIR=...]`: the static and shared
# library (real name, soname and link-name symlinks), the public header and a
# pkg-config file (README.md "Use it from your own C program").
PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
install: $(STATIC_LIB) $(SHARED_LIB) include/deepinfer.h tools/deepinfer.pc.in ## install the libraries, deepinfer.h and deepinfer.pc under DESTDIR/PREFIX (default /usr/local)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/libdeepinfer.a
	install -m 755 $(SHARED_LIB) $(DESTDIR)$(LIBDIR)/libdeepinfer.so.$(VERSION)
	ln -sf libdeepinfer.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libdeepinfer.so
	install -m 644 include/deepinfer.h $(DESTDIR)$(INCLUDEDIR)/deepinfer.h
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		-e 's|@LIBS_PRIVATE@|$(strip $(LDLIBS))|' tools/deepinfer.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/deepinfer.pc

# Test data generated at build time instead of committed (keeps the repo lean):
# a tiny random V4 checkpoint of a non-golden shape (tools/gen_tiny_checkpoint.py).
GEN_DATA := $(BUILD)/data/tiny-v4-b/config.json
$(GEN_DATA): tools/gen_tiny_checkpoint.py
	python3 tools/gen_tiny_checkpoint.py $(dir $@) >/dev/null

# The independent JSON Schema validator (ajv, npm) that checks structured outputs end to end.
AJV := tests/ajv/node_modules/ajv/package.json
$(AJV): tests/ajv/package.json tests/ajv/package-lock.json
	cd tests/ajv && npm ci --no-audit --no-fund --silent
	@touch $@

# The official OpenAI client (npm `openai`) that tests `deepinfer serve` end to end (tests/serve/).
OPENAI_CLIENT := tests/openai/node_modules/openai/package.json
$(OPENAI_CLIENT): tests/openai/package.json tests/openai/package-lock.json
	cd tests/openai && npm ci --no-audit --no-fund --silent
	@touch $@

test: $(TEST_BIN) $(CLI) $(EXAMPLE_BIN) $(STATIC_LIB) $(SHARED_LIB) $(GEN_DATA) $(AJV) $(OPENAI_CLIENT) ## build and run every test; exits non-zero on any failure
	./$(TEST_BIN) $(TEST_ARGS)

# The Python API's pytest suite alone (the test runner runs it as the test
# python_api_pytest_suite, tests/tools/test_python_api.c); Debian's python3 has python3-pytest.
PYTHON_TEST ?= $(if $(wildcard /usr/bin/python3),/usr/bin/python3,python3)
test-python: $(CLI) $(SHARED_LIB) ## run the Python API's pytest suite (python/tests) on build/libdeepinfer.so
	$(PYTHON_TEST) -m pytest -q -p no:cacheprovider python/tests

asan: ## build in build-asan with ASan+UBSan and run the tests
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

cuda-objs: $(CU_OBJ) $(CU_C_OBJ) ## compile every .cu file for sm_90a and sm_100a

cuda: $(CUDA_CLI) ## build the CLI with the CUDA backend (falls back to the CPU without a GPU)

$(CUDA_CLI): $(CLI_OBJ) $(TOOLS_LIB_OBJ) $(LIB_OBJ) $(CU_OBJ) $(CU_C_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(MHD_LIBS) $(CUDA_LIBS)

# GPU tests (tests/ops/cuda/gtest_*.c, run by tests/ops/cuda/run.sh on a GPU machine;
# CI only builds them; tests/ops/cuda/*.cu hold test-only kernels).
GPU_TEST_SRC := tests/runner.c $(sort $(wildcard tests/ops/cuda/gtest_*.c))
GPU_TEST_OBJ := $(GPU_TEST_SRC:%.c=$(BUILD)/%.o)
GPU_TEST_CU  := $(sort $(wildcard tests/ops/cuda/*.cu))
GPU_TEST_OBJ += $(GPU_TEST_CU:%.cu=$(BUILD)/%.cu.o)
# the backend glue links into the binary (it calls the static library); the
# tests use the score driver (tools/score)
GPU_TEST_OBJ += $(CU_C_OBJ) $(TOOLS_LIB_OBJ)
GPU_TEST_BIN := $(BUILD)/test_gpu
$(BUILD)/tests/ops/cuda/%.o $(BUILD)/src/ops/cuda/%.o: CPPFLAGS += $(CUDA_CPPFLAGS)

# The git commit `deepinfer eval` reports (config.commit): "unknown" without git or outside a work
# tree (a source tarball). A stamp file holds it, rewritten only when it changes, so the report
# object is rebuilt after a commit (or a change to the dirty state) and not otherwise.
DI_GIT_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
DI_COMMIT_STAMP := $(BUILD)/git_commit.txt
$(shell mkdir -p $(BUILD) && [ "$$(cat $(DI_COMMIT_STAMP) 2>/dev/null)" = "$(DI_GIT_COMMIT)" ] || echo "$(DI_GIT_COMMIT)" > $(DI_COMMIT_STAMP))
$(BUILD)/tools/eval/eval_report.o: CPPFLAGS += -DDI_GIT_COMMIT=\"$(DI_GIT_COMMIT)\"
$(BUILD)/tools/eval/eval_report.o: $(DI_COMMIT_STAMP)

cuda-tests: $(GPU_TEST_BIN) ## build the GPU test runner (run it with tests/ops/cuda/run.sh)

# The CUDA kernels go into one shared object (their device code once, not
# once per binary); the GPU test runner and the lab programs link it with the static
# library, --as-needed, so a binary that never reaches the tokenizer needs no
# PCRE2 at run time (the GPU machine's image has another version of it),
# and the CUDA runtime dynamically; ICU is never linked (util/icu_loader.c).
CUDA_SO := $(BUILD)/libdeepinfer_cuda.so
$(CUDA_SO): $(CU_OBJ)
	$(CC) -shared -o $@ $^ -L$(CUDA_HOME)/lib64 -lcudart -lstdc++
GPU_LINK = $(CC) $(LDFLAGS) -o $@ $(filter-out $(CU_OBJ),$(filter %.o,$^)) $(STATIC_LIB) -L$(BUILD) -ldeepinfer_cuda \
	-Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/..' -Wl,--as-needed $(LDLIBS) $(MHD_LIBS) -L$(CUDA_HOME)/lib64 -lcudart -lcublasLt -lstdc++

$(GPU_TEST_BIN): $(GPU_TEST_OBJ) $(STATIC_LIB) $(CUDA_SO)
	$(GPU_LINK)

# lab/<family>/: the kernel variants the product does not run and their benches, never part of
# the library or of `make` (lab/README.md). Every lab/<family>/*.c with a main() becomes
# $(BUILD)/lab/<family>/<name>, linked with the family's other .c and its .cu files except
# *_bench.cu, the CUDA glue, the static library and libdeepinfer_cuda.so; every *_bench.cu is a
# standalone program $(BUILD)/lab/<family>/<name>. Needs nvcc, not a GPU.
LAB_C      := $(sort $(wildcard lab/*/*.c))
LAB_MAIN   := $(sort $(if $(LAB_C),$(shell grep -lE '^int main' $(LAB_C))))
LAB_C_BIN  := $(LAB_MAIN:lab/%.c=$(BUILD)/lab/%)
LAB_CU_BIN := $(patsubst lab/%.cu,$(BUILD)/lab/%,$(sort $(wildcard lab/*/*_bench.cu)))
# the family's objects beside a program: its .cu (not *_bench.cu) and its .c without a main()
lab_objs = $(patsubst %.cu,$(BUILD)/%.cu.o,$(filter-out %_bench.cu,$(wildcard lab/$(1)*.cu))) \
	$(patsubst %.c,$(BUILD)/%.o,$(filter-out $(LAB_MAIN),$(wildcard lab/$(1)*.c)))
$(BUILD)/lab/%.o: CPPFLAGS += $(CUDA_CPPFLAGS) -Ilab
$(BUILD)/lab/%.cu.o: NVCC_FLAGS += -Ilab

lab: $(LAB_C_BIN) $(LAB_CU_BIN) ## build every lab/ program (kernel variants and benches, lab/README.md)

.SECONDEXPANSION:
$(LAB_C_BIN): $(BUILD)/lab/%: $(BUILD)/lab/%.o $$(call lab_objs,$$(dir $$*)) $(CU_C_OBJ) $(STATIC_LIB) $(CUDA_SO)
	@mkdir -p $(dir $@)
	$(GPU_LINK)

$(LAB_CU_BIN): $(BUILD)/lab/%: lab/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Ilab -o $@ $<

# Fuzz targets: clang + libFuzzer + ASan/UBSan, built in build-fuzz/.
# Run one with e.g. `build-fuzz/fuzz_json -max_total_time=60` (CONTRIBUTING.md).
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/%)
fuzz: ## build the libFuzzer targets (fuzz/fuzz_*.c) into build-fuzz/
	$(MAKE) BUILD=build-fuzz CC=clang OPT=-O1 SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer" fuzz-bins

fuzz-bins: $(FUZZ_BIN)

$(BUILD)/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(LIB_OBJ)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# the server's request mapping and output split live in tools/serve/, not in the library
$(BUILD)/fuzz_oai_request: $(addprefix $(BUILD)/tools/serve/,oai_request.o oai_split.o oai_response.o dsml.o)

clean: ## remove build outputs
	rm -rf build build-asan build-fuzz

help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

-include $(LIB_OBJ:.o=.d) $(CU_C_SRC:%.c=$(BUILD)/%.d) $(CLI_OBJ:.o=.d) $(TOOLS_LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(FUZZ_SRC:%.c=$(BUILD)/%.d) \
	$(GPU_TEST_OBJ:.o=.d) $(LAB_C:%.c=$(BUILD)/%.d) $(CU_OBJ:.o=.d) \
	$(patsubst %.cu,$(BUILD)/%.cu.d,$(wildcard lab/*/*.cu))
