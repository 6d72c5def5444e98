# SPDX-License-Identifier: GPL-2.0-or-later
# One picky warning list, probed per compiler (after curl's CMake/PickyWarnings.cmake).
include(CheckCCompilerFlag)
set(_na_picky
  -Wall -Wextra -Wformat=2 -Wformat-overflow=2 -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wold-style-definition -Wpointer-arith -Wcast-align
  -Wwrite-strings -Wundef -Wvla -Wimplicit-fallthrough -Wmissing-declarations
  -Wredundant-decls -Wnested-externs -Wdate-time -Wnull-dereference
  -Wduplicated-cond -Wlogical-op -Wjump-misses-init -Wstrict-overflow=2
  -Wno-unused-parameter -Wno-missing-field-initializers -Wno-format-truncation)
# Hardening as Debian's dpkg-buildflags has it (hardening-check must pass on every
# packaged binary, tests/packaging/test-lint.sh): stack clash protection and
# control-flow protection (x86), probed like the warnings; the stack protector,
# fortify, PIE and full RELRO with immediate binding below.
set(_na_hardening -fstack-clash-protection -fcf-protection)
foreach(_flag IN LISTS _na_picky _na_hardening)
  string(MAKE_C_IDENTIFIER "HAVE_C${_flag}" _var)
  check_c_compiler_flag(${_flag} ${_var})
  if(${_var})
    add_compile_options(${_flag})
  endif()
endforeach()
add_compile_options(-fno-strict-aliasing -fstack-protector-strong "$<$<NOT:$<CONFIG:Debug>>:-D_FORTIFY_SOURCE=2>")
# Position-independent executables (-fPIE/-pie also where the compiler does not
# default to them, as Debian's does), full RELRO with immediate binding (-z relro
# -z now: the GOT is read-only once the program starts).
include(CheckPIESupported)
check_pie_supported()
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_link_options(LINKER:-z,relro LINKER:-z,now)
if(NA_WERROR)
  add_compile_options(-Werror)
endif()

# One static library per top-level source folder: every .c file of the folder.
function(na_module_library name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.c)
  add_library(${name} STATIC ${_srcs})
  target_link_libraries(${name} PUBLIC ${M_DEPS})
endfunction()
