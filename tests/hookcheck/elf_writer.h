/* A minimal ELF file of either class and byte order, written here to
 * test spindle-hookcheck's reader beyond the machine's own format: it
 * imports waitpid@GLIBC_2.0 and read@GLIBC_2.0 from libc.so.6 and flock
 * without a version, defines main (not an import), and needs libc.so.6
 * and libnowhere.so. It has only the sections the reader looks at. */
#ifndef HC_ELF_WRITER_H
#define HC_ELF_WRITER_H

#include <stdbool.h>

/* Write it to path; false when the file cannot be written. */
bool hc_write_test_elf(const char *path, bool is64, bool big);

#endif
