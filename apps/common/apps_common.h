/* Small pieces the example servers share (spindle-httpd, spindle-echo,
 * spindled), so that they answer and report alike. */
#ifndef SPINDLE_APPS_COMMON_H
#define SPINDLE_APPS_COMMON_H

#include <spindle/http.h>
#include <spindle/net.h>

/* GET /plaintext ("Hello, World!", text/plain) and GET /json
 * ({"message":"Hello, World!"}), the TechEmpower-style answers. */
void app_add_hello_routes(sp_http_router_t *r);

/* Answer with a body and its Content-Type. */
int app_answer(sp_http_response_t *res, const char *type, const char *body);

/* A TCP server handler that writes back what it reads until EOF. */
void app_echo(int fd, const sp_addr_t *peer, void *arg);

/* Print "listening on ADDR" (port 0 shows the kernel's port), with
 * " (what)" appended when what is not NULL. Call fflush(stdout) after the
 * last one: tests read these lines through a pipe. */
void app_print_listening(const sp_addr_t *a, const char *what);

#endif
