/* tools/gdb/spindle.py, embedded in the library's .debug_gdb_scripts
 * section: gdb runs it when it loads the library from a directory its
 * auto-load safe-path allows (docs/observability.md, "gdb"). The section
 * is not loaded at run time and goes with the debug info when stripped. */
    .pushsection .debug_gdb_scripts, "MS", %progbits, 1
    .byte 4 /* an inline Python script: its name line, then its text */
    .ascii "gdb.inlined-script.spindle\n"
    .incbin SP_GDB_SCRIPT
    .byte 0
    .popsection

    .section .note.GNU-stack, "", %progbits
