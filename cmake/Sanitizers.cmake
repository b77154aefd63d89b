# PYPERF_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer (cmake -DPYPERF_SANITIZE=ON). scripts/test-sanitized.sh
# builds and runs the tests labelled "sanitized" this way, with the run-time
# options (tests/sanitizers/) that make every report a failure.
option(PYPERF_SANITIZE "Build with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
if(PYPERF_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
  # GCC's ASan instrumentation makes -Wmaybe-uninitialized fire inside
  # libstdc++'s own headers (std::function moved in <regex>'s NFA), which
  # -Werror would turn into a failed build; the plain build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
endif()

# Builds `targets` without sanitizers: programs and libraries that stand for
# distro binaries (the native-unwinding fixtures), some of them loaded into
# uninstrumented interpreters, where an ASan runtime cannot be loaded late.
function(pyperf_no_sanitizers)
  if(NOT PYPERF_SANITIZE)
    return()
  endif()
  foreach(target ${ARGN})
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE -fno-sanitize=all)
      target_link_options(${target} PRIVATE -fno-sanitize=all)
    endif()
  endforeach()
endfunction()
