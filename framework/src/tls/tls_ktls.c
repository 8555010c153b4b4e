/* Kernel TLS (SSL_OP_ENABLE_KTLS). OpenSSL hands keys to the kernel only
 * through its own socket BIO: it attaches the "tls" ULP and sets TLS_TX
 * (TLS_RX too, TLS 1.2) when the handshake's keys are ready, sends its
 * control records with a record-type cmsg, and SSL_sendfile calls
 * sendfile(2) on the BIO's fd. That BIO reads and writes with read(2) and
 * write(2), so the socket is made O_NONBLOCK first, through fcntl: the
 * hooks (linked or preloaded) then see a socket the user made
 * non-blocking and pass its calls straight to the kernel, OpenSSL gets
 * EAGAIN as WANT_READ / WANT_WRITE, and every wait stays the connection's
 * own (sp__tls_wait, with the call's deadline), in a fiber or on a plain
 * thread. Without O_NONBLOCK a hooked read would park on its own, past
 * the handshake timeout, and a plain thread would block in the kernel. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#include "spindle/error.h"
#include "spindle/log.h"
#include "tls_internal.h"

BIO *sp__tls_ktls_bio(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0))
        return NULL;
    return BIO_new_socket(fd, BIO_NOCLOSE);
}

#ifndef OPENSSL_NO_KTLS
/* Attach the "tls" ULP to a connected loopback socket, as OpenSSL does
 * before it hands over keys: 0 or -errno (ENOENT: the kernel has no TLS). */
static int ulp_probe(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 0;
    if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, n) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &n) != 0 ||
        connect(c, (struct sockaddr *)&a, n) != 0 ||
        setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") != 0)
        rc = -errno;
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
    return rc;
}
#endif

void sp__tls_ktls_report(void)
{
    /* The first caller probes; no other waits for it (pthread_once would
     * hold a second fiber's worker while the first parks in connect). */
    static atomic_bool done;
    if (atomic_exchange(&done, true))
        return;
    sp_logger_t *lg = sp_logger("spindle.tls");
#ifdef OPENSSL_NO_KTLS
    SP_LOG_WARN(lg, "kTLS requested but unavailable: OpenSSL built without kTLS "
                    "(files go through OpenSSL)");
#else
    int rc = ulp_probe();
    if (rc == 0)
        SP_LOG_INFO(lg, "kTLS: on (kernel TLS ULP available)");
    else
        SP_LOG_WARN(lg, "kTLS requested but unavailable: %s (files go through OpenSSL)",
                    sp_strerror(rc));
#endif
}
