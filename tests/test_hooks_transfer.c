/* Hooked zero-copy transfers (hooks/transfer.c) and stdio streams on
 * sockets (sp_fdopen), in fibers on ONE worker: sendfile of a 16 MiB file
 * into a socket whose reader, a fiber on the same worker, takes it 64 KiB
 * at a time; splice from a socket, and fgets on an sp_fdopen stream,
 * whose writer runs after them. Had the call blocked the worker, the other fiber
 * could not run: the socket's timeout (5 s) would end it short instead.
 * Built twice, like test_hooks: linked and preloaded. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <spindle/hook.h>
#include <spindle/iomanager.h>
#include <spindle/scheduler.h>

#include "hook_util.h"
#include "testutil.h"

enum { FILE_SIZE = 16 << 20, CHUNK = 64 << 10 };

static int sv[2], file_fd, pipe_fd[2];
static _Atomic long sent = -2, received, spliced = -2;
static _Atomic int corrupt;

static void set_timeout(int fd, int name)
{
    struct timeval five = {5, 0};
    ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, name, &five, sizeof five), 0);
}

/* Byte i of the file. */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 12));
}

static void sender(void *arg)
{
    (void)arg;
    sent = sendfile(sv[1], file_fd, NULL, FILE_SIZE);
    close(sv[1]);
}

static void slow_reader(void *arg)
{
    (void)arg;
    static unsigned char buf[CHUNK];
    size_t at = 0;
    ssize_t n;
    while ((n = read(sv[0], buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pattern(at + (size_t)i))
                corrupt = 1;
        at += (size_t)n;
        sp_yield(); /* slow: the sender fills the socket and waits */
    }
    received = (long)at;
}

START_TEST(sendfile_to_a_slow_reader)
{
    char path[] = "/tmp/sp_sendfile_XXXXXX";
    file_fd = mkstemp(path);
    ck_assert_int_ge(file_fd, 0);
    unlink(path);
    unsigned char *data = malloc(FILE_SIZE);
    for (size_t i = 0; i < FILE_SIZE; i++)
        data[i] = pattern(i);
    ck_assert_int_eq(write(file_fd, data, FILE_SIZE), FILE_SIZE);
    free(data);
    ck_assert_int_eq(lseek(file_fd, 0, SEEK_SET), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    set_timeout(sv[1], SO_SNDTIMEO);
    set_timeout(sv[0], SO_RCVTIMEO);
    run_on_one_worker(sender, slow_reader);
    ck_assert_int_eq(sent, FILE_SIZE);
    ck_assert_int_eq(received, FILE_SIZE);
    ck_assert_int_eq(corrupt, 0);
    close(sv[0]);
    close(file_fd);
}
END_TEST

static void splicer(void *arg)
{
    (void)arg;
    spliced = splice(sv[0], NULL, pipe_fd[1], NULL, 5, 0);
}

static void late_writer(void *arg)
{
    (void)arg;
    ck_assert_int_eq(write(sv[1], "hello", 5), 5);
}

START_TEST(splice_from_a_socket_waits)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(pipe(pipe_fd), 0);
    set_timeout(sv[0], SO_RCVTIMEO);
    run_on_one_worker(splicer, late_writer);
    ck_assert_int_eq(spliced, 5);
    char got[8];
    ck_assert_int_eq(read(pipe_fd[0], got, sizeof got), 5);
    close(sv[0]);
    close(sv[1]);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}
END_TEST

static char line[32];

static void line_reader(void *arg)
{
    (void)arg;
    FILE *f = sp_fdopen(sv[0], "r");
    ck_assert_ptr_nonnull(f);
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f); /* closes sv[0] */
}

static void line_writer(void *arg)
{
    (void)arg;
    FILE *f = sp_fdopen(sv[1], "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(fprintf(f, "a line %d\n", 42), 0);
    ck_assert_int_eq(fclose(f), 0); /* flushes, closes sv[1] */
}

START_TEST(stdio_on_a_socket_parks)
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    set_timeout(sv[0], SO_RCVTIMEO);
    run_on_one_worker(line_reader, line_writer);
    ck_assert_str_eq(line, "a line 42\n");
    ck_assert_ptr_null(sp_fdopen(-1, "r"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hooks_transfer");
    SP_TEST_CASE(s, "transfer", 60, NULL, NULL, sendfile_to_a_slow_reader,
                 splice_from_a_socket_waits, stdio_on_a_socket_parks);
    return sp_test_run(s);
}
