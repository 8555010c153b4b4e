/* spindle networking: addresses, socket set-up, and whole-buffer I/O.
 *
 * Addresses are values (sp_addr_t, caller-allocated). Text forms:
 *   "127.0.0.1:8080", "[::1]:8080", "*:8080" (any IPv4), "[::]:8080",
 *   "localhost:8080" (resolved with sp_addr_resolve only), "unix:/path".
 * Everything returns 0 (or a non-negative count / fd) on success and a
 * negative errno on failure. Inside IOManager fibers the socket calls park
 * instead of blocking (the hooks); elsewhere they block like libc.
 */
#ifndef SPINDLE_NET_H
#define SPINDLE_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_addr {
    socklen_t len;                /* read-only: bytes used in `ss` */
    struct sockaddr_storage ss;   /* read-only */
} sp_addr_t;

/* Longest text sp_addr_format writes, with its NUL. */
#define SP_ADDR_TEXT_MAX 128

/* Parse a numeric address (no DNS): -EINVAL if malformed. */
int sp_addr_parse(const char *text, sp_addr_t *out);
/* Parse, resolving a host name if needed (getaddrinfo: off the worker in
 * fibers). Fills up to max addresses; returns how many, or -errno
 * (-ENOENT when the name has no address). */
int sp_addr_resolve(const char *text, sp_addr_t *out, int max);
/* "1.2.3.4:80", "[::1]:80" or "unix:/path". Returns the text length, or
 * -ENOSPC if it does not fit. */
int sp_addr_format(const sp_addr_t *a, char *buf, size_t size);
int sp_addr_family(const sp_addr_t *a);
/* The port, or -1 for a Unix address. */
int sp_addr_port(const sp_addr_t *a);
/* The address of a bound or connected socket (peer = true: the other end). */
int sp_addr_of_socket(int fd, bool peer, sp_addr_t *out);

typedef struct sp_listen_opts {
    int backlog;    /* 0 = SOMAXCONN */
    bool reuseport; /* SO_REUSEPORT: several sockets share the address */
    bool nonblock;  /* O_NONBLOCK on the listening socket */
} sp_listen_opts_t;

/* socket + SO_REUSEADDR (+ SO_REUSEPORT) + bind + listen; a Unix path left
 * by a dead process is unlinked first. Returns the fd, close-on-exec. */
int sp_listen(const sp_addr_t *a, const sp_listen_opts_t *opts);
/* Connect a stream socket; timeout_us < 0 = the hooks' default. Returns
 * the fd or -errno (-ETIMEDOUT). */
int sp_connect(const sp_addr_t *a, int64_t timeout_us);
int sp_set_nodelay(int fd, bool on);
/* SO_KEEPALIVE with TCP_KEEPIDLE/INTVL/CNT (0 = leave the kernel's). The
 * kernel counts whole seconds: a time is rounded up to the next one. */
int sp_set_keepalive(int fd, bool on, int64_t idle_us, int64_t interval_us, int count);

/* Read exactly n bytes (fewer only at EOF: returns what was read). */
ssize_t sp_read_full(int fd, void *buf, size_t n);
/* Write all n bytes; returns n or -errno. */
ssize_t sp_write_full(int fd, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
