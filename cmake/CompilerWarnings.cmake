# Warnings for our own targets: -Wall -Wextra, and the build is expected to be
# warning-free. PYPERF_WERROR turns warnings into errors (CI and tests use it).
option(PYPERF_WERROR "Treat warnings in our code as errors" ON)

function(pyperf_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(PYPERF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
