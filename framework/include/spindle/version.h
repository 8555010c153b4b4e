/* spindle's version: the macros give the headers a program was built
 * with, sp_version() the library it runs with. CMakeLists.txt reads its
 * project version from the three numbers below. */
#ifndef SPINDLE_VERSION_H
#define SPINDLE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define SP_VERSION_MAJOR 0
#define SP_VERSION_MINOR 2
#define SP_VERSION_PATCH 0
/* One number that grows with each release: 0x000200 for 0.2.0. */
#define SP_VERSION_NUMBER \
    ((SP_VERSION_MAJOR << 16) | (SP_VERSION_MINOR << 8) | SP_VERSION_PATCH)

/* "0.2.0": the library's own version, whatever headers were used. */
const char *sp_version(void);

#ifdef __cplusplus
}
#endif
#endif
