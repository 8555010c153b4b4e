/* The config tests' shared fixture (tests/config/test_config_*.c): a fresh
 * configuration in `cfg` and a temporary directory `dir` for its files. */
#ifndef SP_CONFIG_FIXTURE_H
#define SP_CONFIG_FIXTURE_H

#include <spindle/config.h>

#include "testutil.h"

extern char dir[64];
extern sp_config_t *cfg;

/* A new directory /tmp/sp_config_XXXXXX and a new configuration. */
void setup(void);
/* Both gone. */
void teardown(void);
/* Write `text` to dir/name; returns the path (static buffer). */
const char *put_file(const char *name, const char *text);
/* Load `text` as dir/name, expect failure, return the error text (static),
 * with the directory prefix removed so expectations stay short. */
const char *load_fails(const char *name, const char *text);
/* Load `text` as dir/name, expect success. */
void load_ok(const char *name, const char *text);

#endif
