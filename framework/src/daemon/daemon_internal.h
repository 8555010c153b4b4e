/* Shared between daemon.c and daemon_pidfile.c. */
#ifndef SPINDLE_DAEMON_INTERNAL_H
#define SPINDLE_DAEMON_INTERNAL_H

#include <stddef.h>

/* Open and lock the pid file and write our pid into it. The descriptor
 * (close-on-exec), or -1 after printing why to stderr (a running instance:
 * its pid and the file's name). */
int sp__pidfile_lock(const char *name, const char *path);
/* Remove the pid file we hold and close it. */
void sp__pidfile_release(int fd, const char *path);
/* `path` made absolute against the current directory, into buf. 0 or
 * -ENAMETOOLONG / -errno of getcwd. */
int sp__path_absolute(const char *path, char *buf, size_t size);

#endif
