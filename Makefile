# myriad build. One binary (bin/myriad) over a static library of subsystems (build/libmyriad.a).
# Every .c under src/<subsystem>/ goes into the library; src/main.c is the CLI entry point.
# Tests: every tests/test_*.c becomes build/tests/test_*; `make test` runs tests/run.sh.

CC       := mpicc
OPT      ?= -O3 -march=native
# -fno-math-errno: nothing reads errno after a math call, and without it GCC keeps every sqrtf
# scalar (a branch to set errno on negative input), so AdamW's update ran unvectorized: 12 ms of a
# 225 ms step of bench/sim_own_runs.sh's model, 2 ms with it. IEEE sqrt and division give the same
# bits in vector or scalar form, so the numerics are unchanged.
CFLAGS   ?= $(OPT) -fno-math-errno -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -fopenmp -Isrc
LDLIBS   := -lopenblas -lcjson -lmicrohttpd -lpcre2-8 -lz -lm -lpthread -ldl
LDFLAGS  ?= -fopenmp

LIB_SRCS := $(wildcard src/*/*.c src/*/*/*.c)
HDRS     := $(wildcard src/*/*.h src/*/*/*.h)
KERNEL_HDRS := $(wildcard src/kernels/*.h src/kernels/*/*.h src/kernels/*/*.cuh)
LIB_OBJS := $(patsubst src/%.c,build/obj/%.o,$(LIB_SRCS))

# CUDA backend (src/kernels/cuda/cuda_*.cu): built whenever nvcc is found; `make CUDA=0` leaves it out.
# Machine code for sm_80 (A100) and sm_90 (H100/H200) plus sm_90 PTX for newer GPUs. The CUDA
# runtime is linked statically (the binary needs only the driver, loaded by the runtime when a
# GPU is used); cuBLASLt is loaded with dlopen at cuda_init (src/kernels/cuda/cuda_gemm.cu says why).
ifeq ($(origin NVCC),undefined)
NVCC := $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA ?= $(if $(NVCC),1,0)
ifeq ($(CUDA),1)
CUDA_HOME   ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_LIBDIR ?= $(patsubst %/libcudart_static.a,%,$(firstword $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a $(CUDA_HOME)/targets/x86_64-linux/lib/libcudart_static.a)))
CUDA_ARCH   ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
NVCCFLAGS   ?= -O3 -std=c++17 -lineinfo $(CUDA_ARCH) -Xcompiler -Wall,-Wno-unused-function -Isrc \
               -DMYRIAD_CUDA_LIBDIR='"$(CUDA_LIBDIR)"'
CU_SRCS     := $(wildcard src/kernels/cuda/cuda_*.cu)
# CUDA_UNITY=1 (the default) compiles every .cu in one nvcc call, through a generated file that
# #includes them all: nvcc's fixed cost per file (cudafe++ and the host compile of the CUDA
# headers, ~5 s of CPU) was most of the CUDA build (124 s of CPU for 13 files one by one, 37 s as
# one). So names local to one .cu must not clash with another's. CUDA_UNITY=0 compiles file by
# file (quicker rebuilds while working on one kernel); the machine code is the same.
CUDA_UNITY  ?= 1
ifeq ($(CUDA_UNITY),1)
LIB_OBJS    := build/obj/kernels/cuda/cuda_unity.o $(LIB_OBJS) # first: the longest job starts first under make -j
else
LIB_OBJS    += $(patsubst src/%.cu,build/obj/%.o,$(CU_SRCS))
endif
# C files: the .cu side provides cuda_backend (cuda_absent.c steps aside); NVCC_EXTRA: more nvcc flags
CUDA_DEFS   := -DMYRIAD_CUDA=1
CPU_LDLIBS  := $(LDLIBS)
LDLIBS      += -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lstdc++
# The same kernel sources compiled for the CPU emulation of the device (tests/cuda_emu.h), with
# the emulator (cuda_emu.cc, cuda_emu_runtime.cc) and the planted-bug kernels its test must catch
# (cuda_emu_planted.cu). -fsanitize=alignment checks every typed access of the kernels (a float4
# must be 16-byte aligned, a uint2 8, as on the device, where x86 would not mind).
EMU_OBJS    := $(patsubst src/%.cu,build/emu/%.o,$(CU_SRCS)) build/emu/cuda_emu.o build/emu/cuda_emu_runtime.o \
               build/emu/cuda_emu_planted.o
EMU_SANITIZE := -fsanitize=alignment -fno-sanitize-recover=alignment
EMU_FLAGS   := -x c++ -std=c++17 -O2 -g -DMYRIAD_CUDA_EMU -Isrc -Itests -I$(CUDA_HOME)/include -Wall \
               -Wno-unknown-pragmas -Wno-unused-function $(EMU_SANITIZE)
EMU_TEST    := build/tests/test_kernels_cuda_emu
endif
LIB64_SRCS := $(wildcard src/util/*.c src/kernels/*.c src/kernels/*/*.c src/model/*.c src/optim/*.c)
LIB64_OBJS := $(patsubst src/%.c,build/obj64/%.o,$(LIB64_SRCS))
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(patsubst tests/%.c,build/tests/%,$(TEST_SRCS))
# The NCCL emulation the tests load instead of libnccl (tests/nccl_emu.c, docs/COMM.md), and the
# toolkit's nccl.h where there is one (tests/test_nccl_abi.c checks our ABI constants against it).
NCCL_EMU  := build/tests/libnccl-emu.so
NCCL_H    ?= $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/local/cuda/include/nccl.h /usr/include/nccl.h))

.PHONY: all test test-long tests bench clean fuzz demo link-inputs build-headers print-% FORCE
all: bin/myriad $(TEST_BINS) $(EMU_TEST) $(NCCL_EMU)

# The C objects remember the flags they were built with: `make CUDA=0` then `make` changes
# CUDA_DEFS, and without this the old objects (cuda_absent.o among them) would be linked as they are.
build/obj/flags.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(CFLAGS) $(CUDA_DEFS)' >$@.tmp && if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi

build/obj/%.o: src/%.c $(HDRS) build/obj/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CUDA_DEFS) -c $< -o $@

# The same sources in double precision (real = double), for the finite-difference gradient check.
build/obj64/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMYRIAD_F64 -c $< -o $@

build/obj/%.o: src/%.cu $(KERNEL_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(NVCC_EXTRA) -c $< -o $@

# (rewritten only when the list of .cu files changes, so that it does not force a rebuild)
build/obj/kernels/cuda/cuda_unity.cu: FORCE
	@mkdir -p $(dir $@)
	@printf '#include "%s"\n' $(patsubst src/%,%,$(CU_SRCS)) >$@.tmp && \
	    if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi

build/obj/kernels/cuda/cuda_unity.o: build/obj/kernels/cuda/cuda_unity.cu $(CU_SRCS) $(KERNEL_HDRS)
	$(NVCC) $(NVCCFLAGS) $(NVCC_EXTRA) -c $< -o $@

build/emu/%.o: src/%.cu $(KERNEL_HDRS) tests/cuda_emu.h
	@mkdir -p $(dir $@)
	g++ $(EMU_FLAGS) -c $< -o $@

build/emu/%.o: tests/%.cc tests/cuda_emu.h
	@mkdir -p $(dir $@)
	g++ $(EMU_FLAGS) -c $< -o $@

build/emu/cuda_emu_planted.o: tests/cuda_emu_planted.cu tests/cuda_emu_planted.h $(KERNEL_HDRS) tests/cuda_emu.h
	@mkdir -p $(dir $@)
	g++ $(EMU_FLAGS) -c $< -o $@

build/tests/test_kernels_cuda_emu: tests/test_kernels_cuda.c tests/test.h tests/cuda_emu_planted.h tests/cuda_emu_cases.h $(EMU_OBJS) build/libmyriad.a
	@mkdir -p build/tests
	$(CC) $(CFLAGS) $(CUDA_DEFS) -DMYRIAD_CUDA_EMU -Itests $< $(EMU_OBJS) build/libmyriad.a -o $@ $(LDFLAGS) $(CPU_LDLIBS) -lstdc++ -lubsan

build/libmyriad_f64.a: $(LIB64_OBJS)
	@mkdir -p build
	rm -f $@ && ar rcs $@ $^

build/libmyriad.a: $(LIB_OBJS)
	@mkdir -p build
	rm -f $@ && ar rcs $@ $^

# `myriad --version` names the commit it was built from (when built in a git checkout)
MYRIAD_COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
bin/myriad: src/main.c build/libmyriad.a
	@mkdir -p bin
	$(CC) $(CFLAGS) -DMYRIAD_COMMIT='"$(MYRIAD_COMMIT)"' $< build/libmyriad.a -o $@ $(LDFLAGS) $(LDLIBS)

build/tests/%: tests/%.c tests/test.h tests/fixture_util.h tests/gradcheck_util.h build/libmyriad.a
	@mkdir -p build/tests
	$(CC) $(CFLAGS) $(CUDA_DEFS) -Itests $< build/libmyriad.a -o $@ $(LDFLAGS) $(LDLIBS)

build/tests/%_f64: tests/%_f64.c tests/test.h tests/gradcheck_util.h build/libmyriad_f64.a
	@mkdir -p build/tests
	$(CC) $(CFLAGS) -DMYRIAD_F64 -Itests $< build/libmyriad_f64.a -o $@ $(LDFLAGS) $(LDLIBS)

$(NCCL_EMU): tests/nccl_emu.c src/comm/nccl_lib.h src/kernels/cpu/cpu_stream.h src/util/bf16.h
	@mkdir -p build/tests
	$(CC) $(CFLAGS) -fPIC -shared $< -o $@

build/tests/test_nccl_abi: tests/test_nccl_abi.c tests/test.h build/libmyriad.a
	@mkdir -p build/tests
	$(CC) $(CFLAGS) $(CUDA_DEFS) $(if $(NCCL_H),-DMYRIAD_NCCL_H='"$(NCCL_H)"' -I$(dir $(NCCL_H))) -Itests $< build/libmyriad.a -o $@ $(LDFLAGS) $(LDLIBS)

tests: $(TEST_BINS)

test: all
	bash tests/run.sh

# The suite's long counts (make test keeps them small to stay within CI's budget): the trainer's
# fault soak at 30 faults instead of 10, the time ledger's soak at 30 faults instead of 10, the
# device check's dependency rehearsal with every package removed in turn instead of one per kind
# of need, the tokenizer fuzz at 100,000 inputs instead of 25,000, every context-parallel layout on
# both model families, the straggler detector end to end (timing-dependent on a shared machine).
test-long: all
	SOAK_FAULTS=30 bash tests/run.sh test_fault_train
	LEDGER_FAULTS=30 bash tests/run.sh test_ledger
	GPU_DEPS_ALL=1 bash tests/run.sh test_gpu_deps
	STRAGGLER_CLI=1 bash tests/run.sh test_straggler_cli
	FUZZ_INPUTS=100000 bash tests/run.sh test_fuzz
	CP_LONG=1 bash tests/run.sh test_cp

bench: all
	bash bench/run.sh

clean:
	rm -rf build bin

# The README's default job: prepare shards from this project's sources, train, sample, save.
demo: bin/myriad
	bash scripts/demo.sh

# What the build takes from outside the tree: scripts/gpu_needs.sh derives from these the packages
# the offline GPU machine is given (scripts/gpu_deps.sh) and what the rehearsal hides.
#   link-inputs    every file the link line resolves to: the linker's trace (--trace) of an empty
#                  program linked with this CC, LDFLAGS and LDLIBS (bin/myriad's and the tests' line);
#                  LINK_RUN=1 also runs it (--no-as-needed: the loader must find every library named)
#   build-headers  every header the C, emulation and CUDA sources include: the compilers' -M lists
#   print-VAR      the value of a variable (CC, LDLIBS, ...)
link-inputs:
	@d=$$(mktemp -d) && printf 'int main(void) { return 0; }\n' >$$d/e.c && \
	    $(CC) $$d/e.c -o $$d/e $(LDFLAGS) -Wl,--no-as-needed $(LDLIBS) -Wl,--trace && { [ -z "$(LINK_RUN)" ] || $$d/e; }; \
	    rc=$$?; rm -rf $$d; exit $$rc

build-headers: $(if $(CU_SRCS),build/obj/kernels/cuda/cuda_unity.cu)
	@d=$$(mktemp -d) && if { $(CC) $(CFLAGS) $(CUDA_DEFS) -Itests -M $(LIB_SRCS) src/main.c $(TEST_SRCS) tests/nccl_emu.c && \
	    $(if $(EMU_TEST),g++ $(EMU_FLAGS) -M $(CU_SRCS) tests/cuda_emu.cc tests/cuda_emu_runtime.cc tests/cuda_emu_planted.cu &&) \
	    $(if $(CU_SRCS),$(NVCC) $(NVCCFLAGS) -M build/obj/kernels/cuda/cuda_unity.cu &&) true; } >$$d/m; \
	    then tr ' \\' '\n\n' <$$d/m | grep '^/' | sort -u; rc=0; else rc=1; fi; rm -rf $$d; exit $$rc

print-%:
	@echo '$($*)'

# A longer fuzz campaign than the suite's (tests/test_fuzz.sh: 100,000 inputs per parser, 25,000 for the tokenizer).
fuzz:
	FUZZ_INPUTS=1000000 bash tests/test_fuzz.sh
