/* The dynamic loader's cache, /etc/ld.so.cache (written by ldconfig), in
 * glibc's format "glibc-ld.so.cache1.1": which file each soname is. Read
 * once, on first use, bounds-checked; an absent or unknown cache is an
 * empty one (the search goes on in the default directories). */
#ifndef HC_LDCACHE_H
#define HC_LDCACHE_H

#include <stddef.h>

size_t hc_ldcache_count(void);
/* Entry i's soname ("libc.so.6") and its file's path. */
const char *hc_ldcache_key(size_t i);
const char *hc_ldcache_value(size_t i);

#endif
