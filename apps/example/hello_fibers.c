/* The README's example: a fiber per connection on an IOManager, written as
 * plain sequential code. Build: part of `make`; run:
 *   build/bin/spindle-example 127.0.0.1:9100   then   nc 127.0.0.1 9100 */
#include <stdio.h>
#include <unistd.h>

#include <spindle/iomanager.h>
#include <spindle/net.h>
#include <spindle/tcp_server.h>

static void greet(int fd, const sp_addr_t *peer, void *arg)
{
    (void)peer;
    (void)arg;
    char name[64];
    sp_write_full(fd, "name? ", 6);
    ssize_t n = read(fd, name, sizeof name); /* parks this fiber only */
    if (n > 0) {
        sleep(1); /* so does this: other connections keep being served */
        sp_write_full(fd, "hello, ", 7);
        sp_write_full(fd, name, (size_t)n);
    }
}

int main(int argc, char **argv)
{
    sp_addr_t addr;
    if (argc != 2 || sp_addr_parse(argv[1], &addr) < 0) {
        fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
        return 2;
    }
    sp_iomanager_t *io = sp_iomanager_create("example", 2, false);
    sp_tcp_server_t *srv = sp_tcp_server_create(io, greet, NULL, NULL);
    sp_tcp_server_listen(srv, &addr);
    sp_iomanager_start(io);
    if (sp_tcp_server_start(srv) < 0) {
        perror("listen");
        return 1;
    }
    pause(); /* serve until killed */
    return 0;
}
