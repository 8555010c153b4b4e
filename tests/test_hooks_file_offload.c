/* File offload (sp_hook_set_file_offload; hooks/file_offload.c): with it
 * on for an fd, or for every file, a fiber's read, readv, pread, write,
 * writev, pwrite, fsync and fdatasync on a regular file run on the helper
 * pool (the pool's job count says how many calls it ran: one per call and
 * per 1 MiB) and move the same bytes a plain call would; with it off,
 * none run there. Built twice, like test_hooks. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <spindle/hook.h>
#include <spindle/scheduler.h>

#include "hook_util.h"
#include "testutil.h"

enum { SIZE = 8 << 20 };

static char path[] = "/tmp/sp_offload_XXXXXX";
static unsigned char *want, *got;
static int fd = -1, mode;

enum { M_PER_FD, M_ALL, M_OFF };

static void setup(void)
{
    want = malloc(SIZE);
    got = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++)
        want[i] = (unsigned char)(i * 7 + i / 4096);
    int w = mkstemp(path);
    ck_assert_int_ge(w, 0);
    ck_assert_int_eq(write(w, want, SIZE), SIZE);
    close(w);
}

static void teardown(void)
{
    unlink(path);
    free(want);
    free(got);
}

/* Open the file and turn offload on as the mode says. */
static int open_file(int flags)
{
    int f = open(path, flags | O_CLOEXEC);
    ck_assert_int_ge(f, 0);
    if (mode == M_PER_FD)
        ck_assert_int_eq(sp_hook_set_file_offload(f, true), 0);
    ck_assert_int_eq(sp_hook_set_file_offload(SP_HOOK_ALL_FILES, mode == M_ALL), 0);
    return f;
}

static void reads_file(void *arg)
{
    (void)arg;
    fd = open_file(O_RDONLY);
    memset(got, 0, SIZE);
    ck_assert_int_eq(read(fd, got, SIZE), SIZE);
    ck_assert(memcmp(got, want, SIZE) == 0);
    /* At an offset, and scattered. */
    unsigned char a[100], b[5000];
    ck_assert_int_eq(pread(fd, a, sizeof a, 12345), sizeof a);
    ck_assert(memcmp(a, want + 12345, sizeof a) == 0);
    ck_assert_int_eq(lseek(fd, 777, SEEK_SET), 777);
    struct iovec iov[2] = {{a, sizeof a}, {b, sizeof b}};
    ck_assert_int_eq(readv(fd, iov, 2), sizeof a + sizeof b);
    ck_assert(memcmp(a, want + 777, sizeof a) == 0 && memcmp(b, want + 877, sizeof b) == 0);
    ck_assert_int_eq(read(fd, a, sizeof a), sizeof a); /* the offset moved */
    ck_assert(memcmp(a, want + 777 + sizeof a + sizeof b, sizeof a) == 0);
    close(fd);
}

static void writes_file(void *arg)
{
    (void)arg;
    fd = open_file(O_RDWR | O_TRUNC);
    ck_assert_int_eq(write(fd, want, SIZE / 2), SIZE / 2);
    struct iovec iov[2] = {{want + SIZE / 2, 1000}, {want + SIZE / 2 + 1000, SIZE / 2 - 1000}};
    ck_assert_int_eq(writev(fd, iov, 2), SIZE / 2);
    ck_assert_int_eq(pwrite(fd, "xyz", 3, 10), 3);
    ck_assert_int_eq(fsync(fd), 0);
    ck_assert_int_eq(fdatasync(fd), 0);
    close(fd);
}

START_TEST(offloaded_calls_move_the_same_bytes)
{
    mode = _i;
    uint64_t before = helper_jobs();
    run_on_one_worker(reads_file, hook_nothing);
    /* 8 jobs for the 8 MiB, then pread, readv, read. */
    ck_assert_uint_eq(helper_jobs() - before, mode == M_OFF ? 0 : SIZE / (1 << 20) + 3);
    before = helper_jobs();
    run_on_one_worker(writes_file, hook_nothing);
    /* 4 + 8 (writev: one copy of 4 MiB) + pwrite, fsync, fdatasync. */
    ck_assert_uint_eq(helper_jobs() - before, mode == M_OFF ? 0 : 4 + 4 + 3);
    int f = open(path, O_RDWR);
    ck_assert_int_eq(read(f, got, SIZE), SIZE);
    ck_assert(memcmp(got, want, 10) == 0 && memcmp(got + 10, "xyz", 3) == 0);
    ck_assert(memcmp(got + 13, want + 13, SIZE - 13) == 0);
    ck_assert_int_eq(pwrite(f, want + 10, 3, 10), 3); /* as it was, for the next mode */
    close(f);
}
END_TEST

/* O_DIRECT wants page-aligned buffers: the helper's copy is one too. */
static int direct_rc;

static void reads_direct(void *arg)
{
    (void)arg;
    int f = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (f < 0) { /* a file system without O_DIRECT (tmpfs): nothing to check */
        direct_rc = 4096;
        return;
    }
    ck_assert_int_eq(sp_hook_set_file_offload(f, true), 0);
    unsigned char *buf = aligned_alloc(4096, 4096);
    direct_rc = (int)pread(f, buf, 4096, 8192);
    if (direct_rc == 4096)
        ck_assert(memcmp(buf, want + 8192, 4096) == 0);
    free(buf);
    close(f);
}

START_TEST(offload_keeps_o_direct_working)
{
    uint64_t before = helper_jobs();
    run_on_one_worker(reads_direct, hook_nothing);
    ck_assert_int_eq(direct_rc, 4096);
    ck_assert_uint_le(helper_jobs() - before, 1);
}
END_TEST

START_TEST(offload_refuses_what_is_not_a_file)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(sp_hook_set_file_offload(p[0], true), -EPERM);
    close(p[0]);
    close(p[1]);
    ck_assert_int_eq(sp_hook_set_file_offload(p[0], true), -EBADF);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_file_offload");
    TCase *tc = tcase_create("offload");
    tcase_set_timeout(tc, 60);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, offloaded_calls_move_the_same_bytes, M_PER_FD, M_OFF + 1);
    tcase_add_test(tc, offload_keeps_o_direct_working);
    tcase_add_test(tc, offload_refuses_what_is_not_a_file);
    suite_add_tcase(s, tc);
    return sp_test_run(s);
}
