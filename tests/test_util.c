/* test_util.c: error reporting helpers. */
#include <string.h>
#include "test.h"
#include "util/error.h"

static void test_error_message_is_kept(void) {
    CHECK(myr_error("bad %s %d", "thing", 3) == -1, "returns -1");
    CHECK(!strcmp(myr_last_error(), "bad thing 3"), "got '%s'", myr_last_error());
}

int main(void) {
    RUN(test_error_message_is_kept);
    return TEST_SUMMARY();
}
