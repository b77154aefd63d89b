# PYPERF_SANITIZE=ON builds everything with AddressSanitizer and
# UndefinedBehaviorSanitizer (cmake -DPYPERF_SANITIZE=ON).
option(PYPERF_SANITIZE "Build with AddressSanitizer + UndefinedBehaviorSanitizer" OFF)
if(PYPERF_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
