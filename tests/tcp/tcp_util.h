/* The TCP tests' shared client helpers (tests/tcp/): a blocking socket
 * connected to an address, and one message echoed back byte for byte. */
#ifndef SP_TCP_UTIL_H
#define SP_TCP_UTIL_H

#include <check.h>
#include <string.h>
#include <sys/socket.h>

#include <spindle/net.h>

static inline int client(const sp_addr_t *a)
{
    int fd = socket(a->ss.ss_family, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (const struct sockaddr *)&a->ss, a->len), 0);
    return fd;
}

static inline void roundtrip(int fd, const char *msg)
{
    size_t n = strlen(msg);
    char back[256];
    ck_assert_int_eq(sp_write_full(fd, msg, n), (ssize_t)n);
    ck_assert_int_eq(sp_read_full(fd, back, n), (ssize_t)n);
    ck_assert_int_eq(memcmp(back, msg, n), 0);
}

#endif
