/* The framework's one error convention: a call that can fail returns 0 (or
 * a count, an id) on success and a negative errno on failure; constructors
 * return NULL and set errno. sp_strerror turns such a result into words. */
#ifndef SPINDLE_ERROR_H
#define SPINDLE_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* "Connection timed out" for -ETIMEDOUT; "Success" for 0 or more; "Unknown
 * error" for a negative value that is no errno. A constant string: never
 * freed, safe from any thread. */
const char *sp_strerror(int rc);

#ifdef __cplusplus
}
#endif
#endif
