# pyperf_embed_files(OUTPUT <file.cc> NAMESPACE <ns> FUNCTION <fn> BASE <dir> FILES <f>...)
# Generates a C++ source defining
#   const std::vector<std::pair<std::string, std::string>>& <ns>::<fn>()
# that returns (path relative to BASE, contents) for every file, so that text
# PyPerf needs at run time (kernel-header shim, BPF program) lives inside the
# binary and an installed PyPerf needs no source tree.
function(pyperf_embed_files)
  cmake_parse_arguments(EMB "" "OUTPUT;NAMESPACE;FUNCTION;BASE" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${EMB_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${EMB_OUTPUT} -DNAMESPACE=${EMB_NAMESPACE}
            -DFUNCTION=${EMB_FUNCTION} -DBASE=${EMB_BASE} "-DFILES=${EMB_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake
    DEPENDS ${EMB_FILES} ${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake
    COMMENT "Embedding ${EMB_FUNCTION}"
    VERBATIM)
endfunction()
