# pyperf_find_library: what each of our Find modules does, for one system
# library. Finds <PREFIX>_INCLUDE_DIR (the directory holding HEADER) and
# <PREFIX>_LIBRARY (library LIBRARY), where PREFIX is the package name in upper
# case (LibBcc: LIBBCC_INCLUDE_DIR, LIBBCC_LIBRARY; set them to point the build
# elsewhere), reports with find_package_handle_standard_args (a missing one
# names the Debian package that has it) and defines the imported target
# <Package>::<Package>.
#
#   pyperf_find_library(<Package> HEADER <file> LIBRARY <name> DEBIAN_PACKAGE <name>
#                       [HEADER_SUFFIXES <dir>...]   where below an include
#                                                    directory HEADER may be
#                       [INCLUDE_SUBDIRS <dir>...]   more include directories,
#                                                    below the one found
#                       [REQUIRED_VARS <var>...]     more results that must be found
#                       [LINK_FIRST <var>...])       libraries (result variables,
#                                                    skipped when not found) linked
#                                                    before LIBRARY, in this order
include(FindPackageHandleStandardArgs)

function(pyperf_find_library package)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "HEADER;LIBRARY;DEBIAN_PACKAGE"
                        "HEADER_SUFFIXES;INCLUDE_SUBDIRS;REQUIRED_VARS;LINK_FIRST")
  string(TOUPPER ${package} prefix)
  string(TOLOWER ${package} library_name)
  set(include_dir ${prefix}_INCLUDE_DIR)
  set(library ${prefix}_LIBRARY)

  if(arg_HEADER_SUFFIXES)
    find_path(${include_dir} ${arg_HEADER} PATH_SUFFIXES ${arg_HEADER_SUFFIXES})
  else()
    find_path(${include_dir} ${arg_HEADER})
  endif()
  find_library(${library} NAMES ${arg_LIBRARY})
  find_package_handle_standard_args(${package}
    REQUIRED_VARS ${library} ${arg_REQUIRED_VARS} ${include_dir}
    FAIL_MESSAGE "${library_name} not found: run scripts/setup.sh (apt-get install ${arg_DEBIAN_PACKAGE})")
  set(${package}_FOUND ${${package}_FOUND} PARENT_SCOPE)
  set(${prefix}_FOUND ${${package}_FOUND} PARENT_SCOPE)

  if(${package}_FOUND AND NOT TARGET ${package}::${package})
    set(include_dirs ${${include_dir}})
    foreach(subdir ${arg_INCLUDE_SUBDIRS})
      list(APPEND include_dirs ${${include_dir}}/${subdir})
    endforeach()
    set(libraries "")
    foreach(var ${arg_LINK_FIRST})
      if(${var})
        list(APPEND libraries ${${var}})
      endif()
    endforeach()
    list(APPEND libraries ${${library}})
    add_library(${package}::${package} INTERFACE IMPORTED)
    set_target_properties(${package}::${package} PROPERTIES
      INTERFACE_LINK_LIBRARIES "${libraries}"
      INTERFACE_INCLUDE_DIRECTORIES "${include_dirs}")
  endif()
  mark_as_advanced(${include_dir} ${library} ${arg_LINK_FIRST})
endfunction()
