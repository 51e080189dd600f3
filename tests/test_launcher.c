/* test_launcher.c: unit tests of the launcher's pieces that need no processes: SHA-256 against
 * the FIPS 180-4 example vectors (and padding-boundary lengths hashed by Python's hashlib),
 * HMAC-SHA256 against RFC 4231, the heartbeat line MAC (wrong secret, wrong nonce, tampering
 * all refused), heartbeat line parsing (with the STEP line's info and the FROM line's start-up
 * phases), --inject spec parsing, and the time ledger's bookkeeping. The processes (mpirun,
 * restarts, hangs, hosts) are tested by tests/test_launcher.sh. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "launch/heartbeat.h"
#include "launch/mpi_noise.h"
#include "launch/inject.h"
#include "launch/ledger.h"
#include "test.h"
#include "util/sha256.h"

static int digest_is(const uint8_t d[32], const char *hex) {
    char got[65];
    hex_encode(d, 32, got);
    if (strcmp(got, hex)) fprintf(stderr, "  got  %s\n  want %s\n", got, hex);
    return !strcmp(got, hex);
}

static void test_sha256_fips_vectors(void) {
    uint8_t d[32];
    sha256("", 0, d);
    CHECK(digest_is(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "empty");
    sha256("abc", 3, d);
    CHECK(digest_is(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "abc");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256(two, strlen(two), d);
    CHECK(digest_is(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "448-bit");
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    sha256(m, 1000000, d);
    CHECK(digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "million a");
    /* the same million bytes fed in uneven pieces */
    Sha256 s;
    sha256_init(&s);
    for (size_t off = 0, k = 1; off < 1000000; off += k, k = k % 97 + 1)
        sha256_update(&s, m + off, off + k > 1000000 ? 1000000 - off : k);
    sha256_final(&s, d);
    CHECK(digest_is(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "million a, pieces");
    free(m);
}

/* Lengths around the 55/56/64-byte padding boundaries; digests from Python's hashlib of the
 * bytes (7 i + 3) mod 256. */
static void test_sha256_padding_boundaries(void) {
    static const struct { size_t n; const char *hex; } cases[] = {
        {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
        {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
        {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
        {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
        {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
        {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
        {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
        {1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
    };
    uint8_t buf[1000], d[32];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 7 + 3);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        sha256(buf, cases[c].n, d);
        CHECK(digest_is(d, cases[c].hex), "length %zu", cases[c].n);
    }
}

static void test_hmac_rfc4231(void) {
    uint8_t key[131], d[32];
    memset(key, 0x0b, 20);
    hmac_sha256(key, 20, "Hi There", 8, d);
    CHECK(digest_is(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"), "case 1");
    const char *what = "what do ya want for nothing?";
    hmac_sha256("Jefe", 4, what, strlen(what), d);
    CHECK(digest_is(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"), "case 2");
    memset(key, 0xaa, 131);
    const char *big = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_sha256(key, 131, big, strlen(big), d);
    CHECK(digest_is(d, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"), "case 6 (long key)");
    uint8_t d2[32];
    hmac_sha256_2(key, 131, big, 10, big + 10, strlen(big) - 10, d2);
    CHECK(memcmp(d, d2, 32) == 0, "two-piece HMAC equals one-piece");
}

static void test_heartbeat_mac(void) {
    uint8_t secret[HB_SECRET_BYTES], other[HB_SECRET_BYTES];
    for (int i = 0; i < HB_SECRET_BYTES; i++) secret[i] = (uint8_t)(i * 13 + 1), other[i] = secret[i];
    other[5] ^= 0x10;
    const char *nonce = "00112233445566778899aabbccddeeff", *nonce2 = "00112233445566778899aabbccddeefe";
    char line[HB_LINE_MAX];
    strcpy(line, "STEP 3 17 2.5 1700000000000000");
    CHECK(hb_sign(line, sizeof line, secret, nonce) == 0, "sign");
    char copy[HB_LINE_MAX];
    strcpy(copy, line);
    CHECK(hb_verify(copy, secret, nonce) == 0 && !strcmp(copy, "STEP 3 17 2.5 1700000000000000"), "authentic: %s", copy);
    strcpy(copy, line);
    CHECK(hb_verify(copy, other, nonce) != 0, "a one-bit different secret is refused");
    strcpy(copy, line);
    CHECK(hb_verify(copy, secret, nonce2) != 0, "a line replayed on another connection (nonce) is refused");
    strcpy(copy, line);
    copy[8] = '8'; /* step 17 -> 18 */
    CHECK(hb_verify(copy, secret, nonce) != 0, "a tampered step is refused");
    strcpy(copy, line);
    copy[strlen(copy) - 1] = 0;
    CHECK(hb_verify(copy, secret, nonce) != 0, "a truncated MAC is refused");
    strcpy(copy, "STEP 3 17 2.5 1700000000000000");
    CHECK(hb_verify(copy, secret, nonce) != 0, "a line without a MAC is refused");
    /* the MAC is HMAC(secret, nonce + " " + body), checked against the library's HMAC */
    char msg[200];
    snprintf(msg, sizeof msg, "%s STEP 3 17 2.5 1700000000000000", nonce);
    uint8_t d[32];
    hmac_sha256(secret, HB_SECRET_BYTES, msg, strlen(msg), d);
    char hex[65];
    hex_encode(d, 32, hex);
    CHECK(!strcmp(strrchr(line, ' ') + 1, hex), "MAC construction");
}

static void test_heartbeat_parse(void) {
    HbMsg m;
    CHECK(hb_parse("HELLO 2 7 4242 node-3", &m) == 0 && m.type == HB_HELLO && m.attempt == 2 && m.rank == 7 &&
              m.pid == 4242 && !strcmp(m.host, "node-3"), "hello");
    CHECK(hb_parse("STEP 5 100 3.25 123", &m) == 0 && m.type == HB_STEP && m.seq == 5 && m.step == 100 &&
              m.loss == 3.25 && m.t_us == 123, "step");
    CHECK(hb_parse("STEP 5 100 - 123", &m) == 0 && isnan(m.loss), "step without a loss");
    CHECK(hb_parse("FROM 1 40 9", &m) == 0 && m.type == HB_FROM && m.step == 40, "from");
    CHECK(hb_parse("EVENT 9 done 77", &m) == 0 && m.type == HB_EVENT && !strcmp(m.name, "done"), "event");
    const char *bad[] = {"", "STEP", "STEP 1 x - 5", "STEP 1 -3 - 5", "STEP 1 2 3.0.1 5", "STEP 1 2 - 5 extra",
                         "HELLO 0 -1 5 h", "HELLO 0 1 0 h", "HELLO a 1 5 h", "NOPE 1 2 3", "EVENT 1 done",
                         "FROM 1 -2 3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(hb_parse(bad[i], &m) != 0, "accepted '%s'", bad[i]);
}

static void test_heartbeat_step_info(void) {
    HbMsg m;
    CHECK(hb_parse("STEP 5 100 3.25 123 data=12,fwd=3400,bwd=6800,comm=50,opt=900,ckpt=7,tps=1234.5,mfu=0.25,mem=99,role=3", &m) == 0 &&
              m.has_info, "step with info");
    CHECK(m.info.section_s[HB_SEC_DATA] == 12e-6 && m.info.section_s[HB_SEC_FORWARD] == 3400e-6 &&
              m.info.section_s[HB_SEC_BACKWARD] == 6800e-6 && m.info.section_s[HB_SEC_COMM] == 50e-6 &&
              m.info.section_s[HB_SEC_OPTIMIZER] == 900e-6 && m.info.section_s[HB_SEC_CHECKPOINT] == 7e-6,
          "sections in microseconds on the wire, seconds parsed");
    CHECK(m.info.tokens_per_s == 1234.5 && m.info.mfu == 0.25 && m.info.mem_step == 99 && m.info.role == 3,
          "throughput, copy step and role (the straggler detector's cohort)");
    CHECK(hb_parse("STEP 5 100 - 123 fwd=10,future=3", &m) == 0 && m.info.section_s[HB_SEC_FORWARD] == 10e-6 &&
              m.info.section_s[HB_SEC_DATA] < 0 && isnan(m.info.mfu) && m.info.mem_step == -1 && m.info.role == -1,
          "unknown keys skipped, absent ones unmeasured");
    CHECK(hb_parse("STEP 5 100 - 123", &m) == 0 && !m.has_info, "no info field");
    const char *bad[] = {"STEP 1 2 - 5 fwd=", "STEP 1 2 - 5 fwd=-1", "STEP 1 2 - 5 fwd=abc", "STEP 1 2 - 5 =5",
                         "STEP 1 2 - 5 mem=1.5", "STEP 1 2 - 5 role=0.5", "STEP 1 2 - 5 fwd=nan", "STEP 1 2 - 5 fwd=inf", "STEP 1 2 - 5 fwd"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(hb_parse(bad[i], &m) != 0, "accepted '%s'", bad[i]);
    HbStepInfo in;
    hb_step_info_init(&in);
    in.section_s[HB_SEC_FORWARD] = 0.0123456, in.section_s[HB_SEC_COMM] = 0.5, in.tokens_per_s = 98765.4321,
    in.mfu = 0.4375, in.mem_step = 41, in.role = 2;
    char line[HB_LINE_MAX];
    hb_format_step(line, sizeof line, 7, 42, 3.14159265, 1700000000000001, &in);
    CHECK(hb_parse(line, &m) == 0 && m.has_info && m.step == 42 && m.seq == 7 && m.loss == 3.14159265 &&
              m.info.section_s[HB_SEC_FORWARD] == 12346e-6 && m.info.section_s[HB_SEC_COMM] == 0.5 &&
              m.info.section_s[HB_SEC_DATA] < 0 && fabs(m.info.tokens_per_s - 98765.4321) < 0.1 && m.info.mfu == 0.4375 &&
              m.info.mem_step == 41 && m.info.role == 2,
          "format -> parse round trip (microseconds on the wire): %s", line);
    CHECK(!strcmp(hb_section_name(HB_SEC_COMM), "comm") && !strcmp(hb_section_name(HB_SEC_CHECKPOINT), "checkpoint"),
          "section names");
}

/* The rank-side ledger fields: the STEP line's wall times and the FROM line's start-up phases. */
static void test_heartbeat_ledger_fields(void) {
    HbMsg m;
    CHECK(hb_parse("STEP 5 100 - 123 fwd=10,wck=2500,wdat=40,wev=125000", &m) == 0 && m.info.wall_ckpt_s == 2500e-6 &&
              m.info.wall_data_s == 40e-6 && m.info.wall_eval_s == 125000e-6,
          "wall times of checkpoint, data and evaluation");
    CHECK(hb_parse("STEP 5 100 - 123 fwd=10", &m) == 0 && m.info.wall_ckpt_s < 0 && m.info.wall_eval_s < 0, "absent: unmeasured");
    HbStepInfo in;
    hb_step_info_init(&in);
    in.wall_ckpt_s = 0.25, in.wall_data_s = 0, in.wall_eval_s = 1.5;
    char line[HB_LINE_MAX];
    hb_format_step(line, sizeof line, 7, 42, 3.0, 17, &in);
    CHECK(hb_parse(line, &m) == 0 && m.info.wall_ckpt_s == 0.25 && m.info.wall_data_s == 0 && m.info.wall_eval_s == 1.5,
          "round trip: %s", line);
    CHECK(hb_parse("FROM 1 40 9 age=2500000,mpi=900000,setup=300000,restore=20000,post=5000,later=1", &m) == 0 &&
              m.has_start && m.start.age_s == 2.5 && m.start.mpi_s == 0.9 && m.start.setup_s == 0.3 &&
              m.start.restore_s == 0.02 && m.start.post_s == 0.005,
          "FROM with its start-up phases (microseconds; unknown keys skipped)");
    CHECK(hb_parse("FROM 1 40 9 mpi=5", &m) == 0 && m.start.age_s < 0 && m.start.mpi_s == 5e-6, "some phases");
    CHECK(hb_parse("FROM 1 40 9", &m) == 0 && !m.has_start, "FROM without them");
    const char *bad[] = {"FROM 1 40 9 mpi=-1", "FROM 1 40 9 mpi", "FROM 1 40 9 =3", "FROM 1 40 9 mpi=x", "FROM 1 40 9 a=1 b=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK(hb_parse(bad[i], &m) != 0, "accepted '%s'", bad[i]);
    double age = hb_process_age_s();
    CHECK(age >= 0 && age < 3600, "this process's age %.3f s from /proc/self/stat", age);
}

/* The ledger: a mark that only moves forward, steps split into their rank-side causes (clamped, in
 * order), rows per attempt that add up to the total, segments that tile the time accounted. */
static void test_ledger_bookkeeping(void) {
    Ledger l;
    ledger_init(&l, 100.0);
    CHECK(ledger_account(&l, LEDGER_PREFLIGHT, 102.0) == 2.0, "preflight 2 s");
    CHECK(ledger_account(&l, LEDGER_LAUNCH, 101.0) == 0 && l.t_mark == 102.0, "the mark never moves back");
    ledger_account(&l, LEDGER_LAUNCH, 103.0);
    int causes[3] = {LEDGER_CHECKPOINT, LEDGER_DATA, LEDGER_STRAGGLER};
    double sub[3] = {0.25, 0.5, 9.0};
    ledger_step(&l, 104.0, LEDGER_PRODUCTIVE, causes, sub, 3); /* 1 s: 0.25 + 0.5 + the rest (not 9) */
    ledger_step(&l, 105.0, LEDGER_PRODUCTIVE, causes, (double[]){0, 0, 0}, 3);
    CHECK(l.total.seconds[LEDGER_CHECKPOINT] == 0.25 && l.total.seconds[LEDGER_DATA] == 0.5 &&
              l.total.seconds[LEDGER_STRAGGLER] == 0.25 && l.total.seconds[LEDGER_PRODUCTIVE] == 1.0,
          "a step's causes take their share in order, clamped to the step (straggler %.3f, productive %.3f)",
          l.total.seconds[LEDGER_STRAGGLER], l.total.seconds[LEDGER_PRODUCTIVE]);
    ledger_account(&l, LEDGER_DETECTION, 106.5);
    ledger_set_attempt(&l, 1);
    ledger_account(&l, LEDGER_LAUNCH, 107.0);
    ledger_step(&l, 108.0, LEDGER_RECOMPUTED, NULL, NULL, 0);
    ledger_account(&l, LEDGER_FINISH, 108.5);
    CHECK(fabs(ledger_row_sum(&l.total) - 8.5) < 1e-12, "the causes add up to the time accounted: %.6f", ledger_row_sum(&l.total));
    CHECK(l.natt == 2 && fabs(ledger_row_sum(&l.att[0]) - 6.5) < 1e-12 && fabs(ledger_row_sum(&l.att[1]) - 2.0) < 1e-12,
          "per attempt");
    CHECK(l.att[1].seconds[LEDGER_RECOMPUTED] == 1.0 && l.att[0].seconds[LEDGER_RECOMPUTED] == 0, "recomputed in attempt 1");
    /* segments: preflight, launch, productive (two steps merged), detection | launch, recomputed, finish */
    CHECK(l.nseg == 7 && l.seg[2].cause == LEDGER_PRODUCTIVE && l.seg[2].t0 == 3.0 && l.seg[2].t1 == 5.0 &&
              l.seg[4].attempt == 1 && l.seg[6].t1 == 8.5,
          "segments: %d", l.nseg);
    for (int i = 1; i < l.nseg; i++) CHECK(l.seg[i].t0 == l.seg[i - 1].t1, "segment %d starts where %d ends", i, i - 1);
    char line[600];
    ledger_summary(&l.total, 8.5, line, sizeof line);
    CHECK(strstr(line, "wall 8.50 s: preflight 2.00 s (23.5%)") == line, "summary, largest first: %s", line);
    cJSON *j = ledger_row_json(&l.total);
    CHECK(cJSON_GetArraySize(j) == LEDGER_CAUSES && cJSON_GetObjectItem(j, "restore_memory") &&
              cJSON_GetObjectItem(j, "detection")->valuedouble == 1.5,
          "every cause in the JSON");
    cJSON_Delete(j);
    ledger_free(&l);
}

/* mpirun's own messages are told from the ranks' lines (mpi_noise.c) */
static void test_mpi_noise_lines(void) {
    const char *lines[] = {
        "myriad: no valid checkpoint in ck: skipped ck/step-00000002 (rank-00001.bin is missing)",
        "--------------------------------------------------------------------------",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "--------------------------------------------------------------------------",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "",
        "[vm:23494] *** Process received signal ***",
        "mpirun: Forwarding signal 10 to job",
        "srun: error: node3: task 1: Exited with exit code 1",
        "step 3/10 | loss 4.1 | --- not a box ---",
        "[rank 0] a line of the program's own",
        "",
        "myriad train: stopped by signal 10"};
    int want[] = {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    int in_box = 0, prev = 0;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        int got = mpi_noise_line(lines[i], &in_box, prev);
        CHECK(got == want[i], "line %zu '%s': %s", i, lines[i], got ? "noise" : "passed");
        prev = got;
    }
    CHECK(in_box == 0, "boxes close");
}

static void test_inject_parse(void) {
    FaultPlan p = {0};
    CHECK(inject_parse(&p, "kill@3:1,hang@5:0", 4) == 0 && p.n == 2, "two specs");
    CHECK(p.faults[0].kind == FAULT_KILL && p.faults[0].step == 3 && p.faults[0].rank == 1, "kill");
    CHECK(p.faults[1].kind == FAULT_HANG && p.faults[1].step == 5 && p.faults[1].rank == 0, "hang");
    CHECK(inject_parse(&p, "host@9:node-2", 4) == 0 && p.faults[2].kind == FAULT_HOST && !strcmp(p.faults[2].host, "node-2"),
          "host");
    CHECK(inject_parse(&p, "corrupt@4", 4) == 0 && p.faults[3].kind == FAULT_CORRUPT && p.faults[3].step == 4, "corrupt");
    inject_free(&p);
    const char *bad[] = {"kill@0:1", "kill@3:4", "kill@3", "hang@x:1", "host@3", "corrupt@3:1", "boom@1:1",
                         "random:1:0", "random:1", "random:x:3", "random:1:3:0", "kill3:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FaultPlan q = {0};
        CHECK(inject_parse(&q, bad[i], 4) != 0, "accepted '%s'", bad[i]);
        inject_free(&q);
    }
}

static void test_inject_slow_parse(void) {
    FaultPlan p = {0};
    CHECK(inject_parse(&p, "slow@20:2:1.5", 4) == 0 && p.n == 1 && p.faults[0].kind == FAULT_SLOW &&
              p.faults[0].step == 20 && p.faults[0].rank == 2 && p.faults[0].factor == 1.5, "slow");
    inject_free(&p);
    const char *bad[] = {"slow@20:2", "slow@20:4:1.5", "slow@20:2:1", "slow@20:2:0.5", "slow@20:2:x", "slow@0:1:2",
                         "slow@20:2:1.5:3", "slow@20:2:1001"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FaultPlan q = {0};
        CHECK(inject_parse(&q, bad[i], 4) != 0, "accepted '%s'", bad[i]);
        inject_free(&q);
    }
}

static void test_inject_random_is_deterministic(void) {
    FaultPlan a = {0}, b = {0}, c = {0};
    CHECK(inject_parse(&a, "random:7:30:40", 4) == 0 && a.n == 30, "30 faults");
    CHECK(inject_parse(&b, "random:7:30:40", 4) == 0, "again");
    CHECK(inject_parse(&c, "random:8:30:40", 4) == 0, "other seed");
    int same = 1, differ = 0, kills = 0, in_range = 1;
    for (int i = 0; i < 30; i++) {
        same &= a.faults[i].kind == b.faults[i].kind && a.faults[i].step == b.faults[i].step &&
                a.faults[i].rank == b.faults[i].rank;
        differ |= a.faults[i].step != c.faults[i].step || a.faults[i].rank != c.faults[i].rank;
        kills += a.faults[i].kind == FAULT_KILL;
        in_range &= a.faults[i].step >= 1 && a.faults[i].step <= 40 && a.faults[i].rank >= 0 && a.faults[i].rank < 4 &&
                    (a.faults[i].kind == FAULT_KILL || a.faults[i].kind == FAULT_HANG);
    }
    CHECK(same, "same seed, same faults");
    CHECK(differ, "another seed, other faults");
    CHECK(in_range, "steps in 1..40, ranks in 0..3, kill or hang");
    CHECK(kills > 0 && kills < 30, "both kinds drawn (%d kills)", kills);
    inject_free(&a), inject_free(&b), inject_free(&c);
}

int main(void) {
    RUN(test_sha256_fips_vectors);
    RUN(test_sha256_padding_boundaries);
    RUN(test_hmac_rfc4231);
    RUN(test_heartbeat_mac);
    RUN(test_heartbeat_parse);
    RUN(test_heartbeat_step_info);
    RUN(test_heartbeat_ledger_fields);
    RUN(test_ledger_bookkeeping);
    RUN(test_mpi_noise_lines);
    RUN(test_inject_parse);
    RUN(test_inject_slow_parse);
    RUN(test_inject_random_is_deterministic);
    return TEST_SUMMARY();
}
