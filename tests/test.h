/* test.h: the minimal C test harness. A test file defines `static void test_x(void)` functions
 * and calls RUN(test_x) for each from main, then returns TEST_SUMMARY(). Each test prints
 * "ok <name>" or "FAIL <name>"; tests/run.sh counts those lines across all test programs. */
#ifndef MYRIAD_TESTS_TEST_H
#define MYRIAD_TESTS_TEST_H

#include <math.h>
#include <stdio.h>

static int test_failures_in_case;
static int tests_passed, tests_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            test_failures_in_case++;                                            \
            fprintf(stderr, "  check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* |a-b| <= rtol*max(|a|,|b|) + atol */
#define CHECK_CLOSE(a, b, rtol, atol, what)                                     \
    do {                                                                        \
        double a_ = (a), b_ = (b);                                              \
        double tol_ = (rtol) * fmax(fabs(a_), fabs(b_)) + (atol);               \
        CHECK(fabs(a_ - b_) <= tol_, "%s: %.9g vs %.9g (tol %.3g)", what, a_, b_, tol_); \
    } while (0)

#define RUN(fn)                                                                 \
    do {                                                                        \
        test_failures_in_case = 0;                                              \
        fn();                                                                   \
        if (test_failures_in_case) { tests_failed++; printf("FAIL %s\n", #fn); } \
        else { tests_passed++; printf("ok %s\n", #fn); }                       \
        fflush(stdout);                                                         \
    } while (0)

#define SKIP(fn, why) do { printf("skip %s (%s)\n", #fn, why); fflush(stdout); } while (0)

#define TEST_SUMMARY() (tests_failed != 0)

#endif
