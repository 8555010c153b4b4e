/* See apps_common.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "apps_common.h"

/* Small enough that an idle connection's fiber stays within a page or two;
 * bigger messages just take more rounds. */
enum { ECHO_CHUNK = 2048 };

typedef struct fixed {
    const char *type, *body;
} fixed_t;

static const fixed_t plaintext = {"text/plain", "Hello, World!"};
static const fixed_t json = {"application/json", "{\"message\":\"Hello, World!\"}"};

int app_answer(sp_http_response_t *res, const char *type, const char *body)
{
    int rc = sp_http_response_add_header(res, "Content-Type", type);
    return rc < 0 ? rc : sp_http_response_set_body(res, body, strlen(body));
}

static int fixed_answer(sp_http_request_t *req, sp_http_response_t *res, void *arg)
{
    (void)req;
    const fixed_t *f = arg;
    return app_answer(res, f->type, f->body);
}

void app_add_hello_routes(sp_http_router_t *r)
{
    sp_http_router_add(r, SP_HTTP_EXACT, "/plaintext", SP_HTTP_M_GET, fixed_answer,
                       (void *)&plaintext);
    sp_http_router_add(r, SP_HTTP_EXACT, "/json", SP_HTTP_M_GET, fixed_answer, (void *)&json);
}

void app_echo(int fd, const sp_addr_t *peer, void *arg)
{
    (void)peer;
    (void)arg;
    char buf[ECHO_CHUNK];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return; /* EOF (the client's shutdown or close) or an error */
        if (sp_write_full(fd, buf, (size_t)n) < 0)
            return;
    }
}

void app_print_listening(const sp_addr_t *a, const char *what)
{
    char text[SP_ADDR_TEXT_MAX];
    sp_addr_format(a, text, sizeof text);
    if (what)
        printf("listening on %s (%s)\n", text, what);
    else
        printf("listening on %s\n", text);
}
