# Build time (docs/testing.md, "Where the time goes").
#
#   warden_build_time()   at the end of the top-level CMakeLists.txt, once every target exists.
#
# The linker: WARDEN_LINKER (default lld when ld.lld is installed; scripts/install-deps.sh installs
# it) links every executable. GNU ld (bfd) took about twice the CPU time of lld or gold on the test
# binaries, and each build links about 90 executables. Exceptions, left to the compiler's default
# linker: `warden` in the release build (its -Wl,-z,pack-relative-relocs, src/cli, needs binutils'
# ld; lld 14 and gold ignore it) and warden_microvm_init (static, no sanitizers, tiny).
# -DWARDEN_LINKER= (empty) leaves every executable to the default.
find_program(WARDEN_LLD ld.lld)
if(WARDEN_LLD)
  set(WARDEN_LINKER lld CACHE STRING "Linker for the executables (-fuse-ld=...; empty: the default)")
else()
  set(WARDEN_LINKER "" CACHE STRING "Linker for the executables (-fuse-ld=...; empty: the default)")
endif()
set(WARDEN_BUILD_TIME_EXCLUDE warden_microvm_init)

function(_warden_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _warden_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(warden_build_time)
  if(NOT WARDEN_LINKER)
    return()
  endif()
  _warden_collect_targets(${CMAKE_SOURCE_DIR} targets)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(options ${target} LINK_OPTIONS)
    if(type STREQUAL "EXECUTABLE" AND NOT "${options}" MATCHES "pack-relative-relocs"
       AND NOT target IN_LIST WARDEN_BUILD_TIME_EXCLUDE)
      target_link_options(${target} PRIVATE -fuse-ld=${WARDEN_LINKER})
    endif()
  endforeach()
endfunction()
