/* The ld.so.cache reader of ldcache.h. The layout, in the host's byte
 * order: a 48-byte header (magic "glibc-ld.so.cache" "1.1", the entry
 * count at 20), then 24-byte entries (flags, key, value, osversion,
 * hwcap) whose key and value are offsets of strings from the start of
 * the file. */
#include "ldcache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_PATH "/etc/ld.so.cache"
#define MAGIC "glibc-ld.so.cache1.1"
#define HEADER_SIZE 48
#define ENTRY_SIZE 24

typedef struct entry {
    const char *key, *value;
} entry_t;

static struct {
    int loaded;
    char *data;
    entry_t *entries;
    size_t count;
} cache;

static uint32_t u32_at(const char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The string at off, or NULL unless it ends inside the file. */
static const char *string_at(size_t size, uint32_t off)
{
    if (off >= size || !memchr(cache.data + off, 0, size - off))
        return NULL;
    return cache.data + off;
}

static char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len > 0 && len < (1L << 28) && fseek(f, 0, SEEK_SET) == 0 &&
            (buf = malloc((size_t)len)) && fread(buf, 1, (size_t)len, f) == (size_t)len) {
            *size = (size_t)len;
        } else {
            free(buf);
            buf = NULL;
        }
    }
    fclose(f);
    return buf;
}

static void load(void)
{
    cache.loaded = 1;
    size_t size = 0;
    cache.data = read_all(CACHE_PATH, &size);
    if (!cache.data || size < HEADER_SIZE || memcmp(cache.data, MAGIC, strlen(MAGIC)) != 0)
        return;
    uint32_t n = u32_at(cache.data + 20);
    if (n > (size - HEADER_SIZE) / ENTRY_SIZE || !(cache.entries = calloc(n + 1, sizeof(entry_t))))
        return;
    for (uint32_t i = 0; i < n; i++) {
        const char *e = cache.data + HEADER_SIZE + (size_t)i * ENTRY_SIZE;
        entry_t *out = &cache.entries[cache.count];
        out->key = string_at(size, u32_at(e + 4));
        out->value = string_at(size, u32_at(e + 8));
        if (out->key && out->value)
            cache.count++;
    }
}

size_t hc_ldcache_count(void)
{
    if (!cache.loaded)
        load();
    return cache.count;
}

const char *hc_ldcache_key(size_t i)
{
    return cache.entries[i].key;
}

const char *hc_ldcache_value(size_t i)
{
    return cache.entries[i].value;
}
