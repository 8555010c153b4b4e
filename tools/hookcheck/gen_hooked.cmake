# Reads the hooked functions from hooks/preload.sym (the names under
# "global:" except the sp_* entry points) and writes, by KIND:
#   table    the C table hc_hooked of spindle-hookcheck (classify.h);
#   fixture  a test program that imports every one of them.
#   cmake -DSYM=hooks/preload.sym -DKIND=table|fixture -DOUT=file.c -P gen_hooked.cmake
file(READ "${SYM}" text)
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
if(NOT text MATCHES "global:([^}]*)local:")
  message(FATAL_ERROR "${SYM}: no 'global: ... local:' section")
endif()
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*" names "${CMAKE_MATCH_1}")
list(FILTER names EXCLUDE REGEX "^sp_")
list(REMOVE_DUPLICATES names)
list(SORT names)
list(LENGTH names count)
if(count EQUAL 0)
  message(FATAL_ERROR "${SYM}: no hooked functions found")
endif()

set(head "/* Generated from hooks/preload.sym by tools/hookcheck/gen_hooked.cmake. */\n")
if(KIND STREQUAL "table")
  set(out "${head}#include \"classify.h\"\n\nconst char *const hc_hooked[] = {\n")
  foreach(n ${names})
    string(APPEND out "    \"${n}\",\n")
  endforeach()
  string(APPEND out "};\nconst size_t hc_hooked_count = ${count};\n")
elseif(KIND STREQUAL "fixture")
  # Declared without libc's headers, so their real prototypes do not
  # matter: only the references (and so the imports) do.
  set(out "${head}/* A program importing every hooked function. */\n")
  foreach(n ${names})
    string(APPEND out "extern void ${n}(void);\n")
  endforeach()
  # A global array is emitted whatever the optimizer knows (a static one
  # read by main was folded away by clang), and with it every reference.
  string(APPEND out "\nextern void (*const hookcheck_imports[])(void);\n"
    "void (*const hookcheck_imports[])(void) = {\n")
  foreach(n ${names})
    string(APPEND out "    ${n},\n")
  endforeach()
  string(APPEND out "};\n\nint main(void)\n{\n    return 0;\n}\n")
else()
  message(FATAL_ERROR "KIND must be table or fixture")
endif()
# Rewritten only when it changes, so an unchanged preload.sym rebuilds nothing.
file(WRITE "${OUT}.tmp" "${out}")
configure_file("${OUT}.tmp" "${OUT}" COPYONLY)
file(REMOVE "${OUT}.tmp")
