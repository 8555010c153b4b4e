/* spindle byte buffer: a growable FIFO of bytes for protocol code. Read
 * side at `data + start`, write side at `data + end`; consumed bytes are
 * reclaimed by moving the rest down when space runs out. */
#ifndef SPINDLE_BUFFER_H
#define SPINDLE_BUFFER_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_buf {
    char *data;   /* private */
    size_t start; /* private */
    size_t end;   /* private */
    size_t cap;   /* private */
} sp_buf_t;

#define SP_BUF_INIT {0, 0, 0, 0}

void sp_buf_init(sp_buf_t *b);
void sp_buf_free(sp_buf_t *b);
/* Unread bytes and how many. */
char *sp_buf_data(const sp_buf_t *b);
size_t sp_buf_len(const sp_buf_t *b);
/* Room for at least n more bytes at the write side; NULL + errno ENOMEM.
 * Write into it, then sp_buf_commit what you wrote. */
char *sp_buf_reserve(sp_buf_t *b, size_t n);
void sp_buf_commit(sp_buf_t *b, size_t n);
int sp_buf_append(sp_buf_t *b, const void *p, size_t n);
/* Drop n bytes from the read side. */
void sp_buf_consume(sp_buf_t *b, size_t n);
void sp_buf_clear(sp_buf_t *b);
/* One read(2) of up to `max` bytes into the buffer: the byte count, 0 at
 * EOF, or -errno. */
ssize_t sp_buf_read_fd(sp_buf_t *b, int fd, size_t max);
/* Write everything buffered to fd (sp_write_full) and clear it. */
ssize_t sp_buf_write_fd(sp_buf_t *b, int fd);

#ifdef __cplusplus
}
#endif
#endif
