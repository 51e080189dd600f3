# myriad build. One binary (bin/myriad) over a static library of subsystems (build/libmyriad.a).
# Every .c under src/<subsystem>/ goes into the library; src/main.c is the CLI entry point.
# Tests: every tests/test_*.c becomes build/tests/test_*; `make test` runs tests/run.sh.

CC       := mpicc
OPT      ?= -O3 -march=native
CFLAGS   ?= $(OPT) -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -fopenmp -Isrc
LDLIBS   := -lopenblas -lcjson -lm -lpthread
LDFLAGS  ?= -fopenmp

LIB_SRCS := $(wildcard src/*/*.c)
LIB_OBJS := $(patsubst src/%.c,build/obj/%.o,$(LIB_SRCS))
LIB64_SRCS := $(wildcard src/util/*.c src/kernels/*.c src/model/*.c src/optim/*.c)
LIB64_OBJS := $(patsubst src/%.c,build/obj64/%.o,$(LIB64_SRCS))
TEST_SRCS := $(wildcard tests/test_*.c)
TEST_BINS := $(patsubst tests/%.c,build/tests/%,$(TEST_SRCS))

.PHONY: all test tests bench clean fuzz demo
all: bin/myriad $(TEST_BINS)

build/obj/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The same sources in double precision (real = double), for the finite-difference gradient check.
build/obj64/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DMYRIAD_F64 -c $< -o $@

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
	$(CC) $(CFLAGS) -Itests $< build/libmyriad.a -o $@ $(LDFLAGS) $(LDLIBS)

build/tests/%_f64: tests/%_f64.c tests/test.h tests/gradcheck_util.h build/libmyriad_f64.a
	@mkdir -p build/tests
	$(CC) $(CFLAGS) -DMYRIAD_F64 -Itests $< build/libmyriad_f64.a -o $@ $(LDFLAGS) $(LDLIBS)

tests: $(TEST_BINS)

test: all
	bash tests/run.sh

bench: all
	bash bench/run.sh

clean:
	rm -rf build bin

# The README's default job: prepare shards from this project's sources, train, sample, save.
demo: bin/myriad
	bash scripts/demo.sh

# A longer fuzz campaign than the suite's (tests/test_fuzz.sh runs 100,000 inputs per parser).
fuzz:
	FUZZ_INPUTS=1000000 bash tests/test_fuzz.sh
