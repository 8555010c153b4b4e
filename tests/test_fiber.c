/* Fibers: life cycle, errno and FP state per fiber, stack pool, overflow,
 * stack high-water mark. */
#include <check.h>
#include <errno.h>
#include <fenv.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/fiber.h>

#include "testutil.h"

static void count_up(void *arg)
{
    int *n = arg;
    for (;;) {
        (*n)++;
        sp_fiber_yield();
    }
}

START_TEST(resume_and_yield)
{
    int n = 0;
    sp_fiber_t *f = sp_fiber_create(count_up, &n, 0, "counter");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_READY);
    ck_assert_str_eq(sp_fiber_name(f), "counter");
    ck_assert_uint_ne(sp_fiber_id(f), 0);
    for (int i = 1; i <= 5; i++) {
        ck_assert_int_eq(sp_fiber_resume(f), 0);
        ck_assert_int_eq(n, i);
        ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_SUSPENDED);
    }
    sp_fiber_destroy(f);
}
END_TEST

static void record_self(void *arg)
{
    sp_fiber_t **seen = arg;
    seen[0] = sp_fiber_current();
    ck_assert_int_eq(sp_fiber_state(seen[0]), SP_FIBER_RUNNING);
}

START_TEST(current_and_done)
{
    sp_fiber_t *seen[1] = {NULL};
    ck_assert_ptr_null(sp_fiber_current());
    ck_assert_int_eq(sp_fiber_yield(), -EPERM);
    sp_fiber_t *f = sp_fiber_create(record_self, seen, 0, NULL);
    ck_assert_int_eq(sp_fiber_resume(f), 0);
    ck_assert_ptr_eq(seen[0], f);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    ck_assert_int_eq(sp_fiber_resume(f), -EINVAL);
    ck_assert_ptr_null(sp_fiber_current());
    sp_fiber_destroy(f);
    ck_assert_int_eq(sp_fiber_resume(NULL), -EINVAL);
}
END_TEST

START_TEST(unique_ids)
{
    int n = 0;
    sp_fiber_t *a = sp_fiber_create(count_up, &n, 0, "a");
    sp_fiber_t *b = sp_fiber_create(count_up, &n, 0, "b");
    ck_assert_uint_ne(sp_fiber_id(a), sp_fiber_id(b));
    sp_fiber_destroy(a);
    sp_fiber_destroy(b);
}
END_TEST

static void inner(void *arg)
{
    int *trace = arg;
    trace[trace[0]++ + 1] = 2;
    sp_fiber_yield();
    trace[trace[0]++ + 1] = 4;
}

static void outer(void *arg)
{
    int *trace = arg;
    sp_fiber_t *in = sp_fiber_create(inner, trace, 0, "inner");
    trace[trace[0]++ + 1] = 1;
    sp_fiber_resume(in); /* inner yields back here, not to main */
    trace[trace[0]++ + 1] = 3;
    sp_fiber_resume(in);
    sp_fiber_destroy(in);
    trace[trace[0]++ + 1] = 5;
}

START_TEST(nested_resume_returns_to_resumer)
{
    int trace[8] = {0};
    sp_fiber_t *f = sp_fiber_create(outer, trace, 0, "outer");
    sp_fiber_resume(f);
    ck_assert_int_eq(trace[0], 5);
    for (int i = 1; i <= 5; i++)
        ck_assert_int_eq(trace[i], i);
    sp_fiber_destroy(f);
}
END_TEST

static void errno_fiber(void *arg)
{
    (void)arg;
    errno = 111;
    sp_fiber_yield();
    ck_assert_int_eq(errno, 111);
    errno = 222;
}

START_TEST(errno_per_fiber)
{
    sp_fiber_t *f = sp_fiber_create(errno_fiber, NULL, 0, NULL);
    errno = 7;
    sp_fiber_resume(f);
    ck_assert_int_eq(errno, 7);
    errno = 8;
    sp_fiber_resume(f);
    ck_assert_int_eq(errno, 8);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    sp_fiber_destroy(f);
}
END_TEST

static void rounding_fiber(void *arg)
{
    (void)arg;
    ck_assert_int_eq(fegetround(), FE_TONEAREST); /* fresh FP state */
    fesetround(FE_TOWARDZERO);
    sp_fiber_yield();
    ck_assert_int_eq(fegetround(), FE_TOWARDZERO);
}

START_TEST(fp_control_per_fiber)
{
    sp_fiber_t *f = sp_fiber_create(rounding_fiber, NULL, 0, NULL);
    fesetround(FE_UPWARD);
    sp_fiber_resume(f);
    ck_assert_int_eq(fegetround(), FE_UPWARD);
    sp_fiber_resume(f);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    fesetround(FE_TONEAREST);
    sp_fiber_destroy(f);
}
END_TEST

static void touch_stack(void *arg)
{
    size_t n = *(size_t *)arg;
    volatile char buf[n];
    memset((char *)buf, 0x5a, n);
    ck_assert_int_eq(buf[n - 1], 0x5a);
}

START_TEST(custom_stack_size_usable)
{
    size_t n = 900 * 1024;
    sp_fiber_t *f = sp_fiber_create(touch_stack, &n, 1024 * 1024, "big");
    ck_assert_ptr_nonnull(f);
    sp_fiber_resume(f);
    ck_assert_int_eq(sp_fiber_state(f), SP_FIBER_DONE);
    sp_fiber_destroy(f);
}
END_TEST

START_TEST(many_fibers_and_reuse)
{
    enum { N = 20000 };
    static sp_fiber_t *fs[N];
    int n = 0;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            fs[i] = sp_fiber_create(count_up, &n, 0, NULL);
            ck_assert_ptr_nonnull(fs[i]);
            sp_fiber_resume(fs[i]);
        }
        for (int i = 0; i < N; i++)
            sp_fiber_destroy(fs[i]);
    }
    ck_assert_int_eq(n, 3 * N);
}
END_TEST

/* Stack colouring: fibers that park at the same depth must not all park
 * at the same offset within a page (their hot lines would share a handful
 * of cache sets). The fiber object sits at its stack's coloured top. */
START_TEST(stacks_are_coloured)
{
    enum { N = 64 };
    sp_fiber_t *fs[N];
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        fs[i] = sp_fiber_create(count_up, &(int){0}, 0, NULL);
        ck_assert_ptr_nonnull(fs[i]);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = (uintptr_t)fs[j] % 4096 == (uintptr_t)fs[i] % 4096;
        distinct += !seen;
    }
    for (int i = 0; i < N; i++)
        sp_fiber_destroy(fs[i]);
    /* 16 colours, picked by hashing each stack's address. */
    ck_assert_int_ge(distinct, 8);
}
END_TEST

/* Recurses until `limit` frames; the limit is far beyond the stack, and
 * being a runtime value it keeps the compiler from seeing an endless loop. */
static volatile int limit = 1 << 30;

static int recurse(int depth)
{
    volatile char pad[1024];
    pad[0] = (char)depth;
    if (depth >= limit)
        return 0;
    return recurse(depth + 1) + pad[0];
}

static void overflow_fiber(void *arg)
{
    (void)arg;
    recurse(0);
}

/* One frame far larger than the fiber's stack (128 KiB by default): with
 * a 64 KiB guard and no stack-clash probes its first write would land
 * below the guard, in another stack, and nothing would fault. */
static char *volatile escaped; /* keeps the whole array in the frame */

static void big_frame_fiber(void *arg)
{
    (void)arg;
    char buf[200 * 1024];
    escaped = buf;
    escaped[0] = 1;
}

/* Run fn on a fiber named `name` in a child; the child must die by SIGSEGV
 * after saying on stderr that this fiber overflowed its stack. A few
 * fibers are created first so the stack below fn's is a pooled one. */
static void assert_overflow_reported(sp_fiber_fn fn, size_t stack_size,
                                     const char *name)
{
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        for (int i = 0; i < 4; i++)
            sp_fiber_create(count_up, &(int){0}, stack_size, "bystander");
        sp_fiber_resume(sp_fiber_create(fn, NULL, stack_size, name));
        _exit(0); /* not reached */
    }
    close(pipefd[1]);
    char out[512] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof out - 1 &&
           (r = read(pipefd[0], out + got, sizeof out - 1 - got)) > 0)
        got += (size_t)r;
    close(pipefd[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
                  "child status %d, stderr: %s", status, out);
    char want[64];
    snprintf(want, sizeof want, "(%s) overflowed its stack", name);
    ck_assert_msg(strstr(out, want), "stderr was: %s", out);
    ck_assert_msg(strncmp(out, "spindle: fiber ", 15) == 0, "stderr: %s", out);
}

/* The overflow must stop the process with a message naming the fiber. */
START_TEST(stack_overflow_is_reported)
{
    assert_overflow_reported(overflow_fiber, 64 * 1024, "deep-recursion");
}
END_TEST

START_TEST(big_frame_overflow_is_reported)
{
    assert_overflow_reported(big_frame_fiber, 0, "big-frame");
}
END_TEST

/* Touches `bytes` of stack below its caller; not inlined, so the caller's
 * frame (probed whole on entry) does not include the buffer. */
__attribute__((noinline)) static void use_stack(size_t bytes)
{
    volatile char buf[64 * 1024];
    for (size_t i = 0; i < bytes && i < sizeof buf; i += 256)
        buf[i] = (char)i;
}

static void measure_stack(void *arg)
{
    size_t *used = arg;
    used[0] = sp_fiber_stack_used(sp_fiber_current());
    use_stack(64 * 1024);
    used[1] = sp_fiber_stack_used(sp_fiber_current());
}

/* The high-water mark grows by what a fiber used and stays within its
 * stack. A stack size no other test uses: a fresh stack, not a pooled one. */
START_TEST(stack_used_is_the_high_water_mark)
{
    enum { SIZE = 320 * 1024 };
    size_t used[2] = {0, 0};
    sp_fiber_t *f = sp_fiber_create(measure_stack, used, SIZE, "measured");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(sp_fiber_resume(f), 0);
    ck_assert_uint_gt(used[0], 0);
    ck_assert_uint_lt(used[0], 32 * 1024);
    ck_assert_uint_ge(used[1], 64 * 1024);
    ck_assert_uint_gt(used[1], used[0] + 32 * 1024);
    ck_assert_uint_le(used[1], SIZE + 8 * 1024);
    /* After the fiber finished its stack still shows how deep it went. */
    ck_assert_uint_eq(sp_fiber_stack_used(f), used[1]);
    ck_assert_uint_eq(sp_fiber_stack_used(NULL), 0);
    sp_fiber_destroy(f);
}
END_TEST

START_TEST(backend_named)
{
    const char *b = sp_fiber_backend();
    ck_assert(strcmp(b, "ucontext") == 0 || strncmp(b, "asm-", 4) == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fiber");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, resume_and_yield);
    tcase_add_test(tc, current_and_done);
    tcase_add_test(tc, unique_ids);
    tcase_add_test(tc, nested_resume_returns_to_resumer);
    tcase_add_test(tc, errno_per_fiber);
    tcase_add_test(tc, fp_control_per_fiber);
    tcase_add_test(tc, custom_stack_size_usable);
    tcase_add_test(tc, many_fibers_and_reuse);
    tcase_add_test(tc, stacks_are_coloured);
    tcase_add_test(tc, stack_overflow_is_reported);
    tcase_add_test(tc, big_frame_overflow_is_reported);
    tcase_add_test(tc, stack_used_is_the_high_water_mark);
    tcase_add_test(tc, backend_named);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
