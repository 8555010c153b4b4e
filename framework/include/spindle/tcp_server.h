/* spindle TCP server: listen on several addresses, accept in fibers, one
 * fiber per connection running the user's handler as sequential code.
 *
 * The handler gets the connected fd and the peer's address; it reads and
 * writes with plain read/write (they park in fibers) and returns when done.
 * The server closes the fd after the handler returns.
 *
 * Accepting: with reuseport (the default on Linux) every worker has its own
 * listening socket per address and accepts into its own worker; otherwise
 * one acceptor per address hands connections to the workers in turn.
 * SO_REUSEPORT also lets any other process of the same user bind the same
 * address and take a share of the connections: a server that must own its
 * port (refuse a second instance) sets no_reuseport.
 * Over the connection limit a new connection is accepted and closed at once
 * (counted as refused). The limit defaults to what the open-file limit
 * allows (sp_tcp_default_max_conns). When the process runs out of fds (EMFILE, ENFILE)
 * the acceptor sheds pending connections with a spare fd (accept, close),
 * and when even that is impossible backs off (1 ms doubling to 1 s); it
 * keeps serving its open connections and never spins.
 *
 * Stopping: stop accepting, let connections finish until the deadline,
 * then shut down what is left (their reads see EOF) and wait for those
 * handlers to return.
 */
#ifndef SPINDLE_TCP_SERVER_H
#define SPINDLE_TCP_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "spindle/iomanager.h"
#include "spindle/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_tcp_server sp_tcp_server_t;

typedef void (*sp_conn_fn)(int fd, const sp_addr_t *peer, void *arg);

typedef struct sp_tcp_server_opts {
    int max_conns;       /* 0 = sp_tcp_default_max_conns(); < 0 = none */
    int backlog;         /* 0 = SOMAXCONN */
    bool no_reuseport;   /* one shared listening socket per address */
    bool nodelay;        /* TCP_NODELAY on accepted sockets */
    size_t stack_size;   /* of connection fibers; 0 = default */
} sp_tcp_server_opts_t;

typedef struct sp_tcp_server_stats {
    uint64_t accepted; /* connections handed to the handler */
    uint64_t active;   /* handlers running now */
    uint64_t refused;  /* closed at once: over the limit or out of fds */
} sp_tcp_server_stats_t;

/* The connection limit a server gets when it is created without one:
 * n - n/8 - 64, at least 16, where n is the soft RLIMIT_NOFILE (the
 * `ulimit -n`) at the time of the call. The fds left over (an eighth, plus
 * 64) are for everything else a process holds: listening sockets and each
 * acceptor's eventfd and spare fd, the IOManager's epoll and wake pipes,
 * log files, files handlers open. Each server takes its own limit: a
 * process running several busy servers, or handlers that open more than a
 * file per connection now and then, should set max_conns itself. */
int sp_tcp_default_max_conns(void);

/* opts may be NULL. NULL + errno on failure. */
sp_tcp_server_t *sp_tcp_server_create(sp_iomanager_t *io, sp_conn_fn fn,
                                      void *arg,
                                      const sp_tcp_server_opts_t *opts);
/* Most addresses one server listens on. */
#define SP_TCP_SERVER_MAX_ADDRS 16

/* Listen on one more address (call before start). 0 or -errno: -EALREADY
 * once started, -ENOSPC past SP_TCP_SERVER_MAX_ADDRS. */
int sp_tcp_server_listen(sp_tcp_server_t *srv, const sp_addr_t *addr);
/* How many addresses, and the bound address of the i-th (port 0 becomes
 * the port the kernel chose). */
int sp_tcp_server_naddrs(const sp_tcp_server_t *srv);
int sp_tcp_server_addr(const sp_tcp_server_t *srv, int i, sp_addr_t *out);
/* Start the acceptors (the IOManager must be started). */
int sp_tcp_server_start(sp_tcp_server_t *srv);
/* Graceful stop, from any thread or fiber: returns when every handler has
 * returned. Connections still open at `drain_us` are shut down. */
int sp_tcp_server_stop(sp_tcp_server_t *srv, int64_t drain_us);
/* Stats, like every sp_*_stats: fill *out, 0 or -errno. */
int sp_tcp_server_stats(const sp_tcp_server_t *srv, sp_tcp_server_stats_t *out);
/* The same for the connections that came in on address i (as
 * sp_tcp_server_addr); -EINVAL for no such address. */
int sp_tcp_server_addr_stats(const sp_tcp_server_t *srv, int i, sp_tcp_server_stats_t *out);
/* Free a stopped (or never started) server. */
void sp_tcp_server_destroy(sp_tcp_server_t *srv);

#ifdef __cplusplus
}
#endif
#endif
