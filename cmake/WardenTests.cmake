# One GoogleTest program per tests/ folder (docs/testing.md, "Where the time goes").
#
#   warden_test_program(NAME
#     SOURCES   file.cc ...          the *_test.cc files (and any helper .cc) of the program
#     LIBRARIES lib ...              linked PRIVATE, with GTest::gtest (and gtest_main unless OWN_MAIN)
#     DEFINITIONS NAME=VALUE ...     compile definitions
#     LABELS label ...               ctest labels of every discovered test
#     TIMEOUT seconds                ctest timeout of each discovered test (default: ctest's --timeout)
#     [PREFIX p.] [FILTER gtest-filter] [OWN_MAIN])
#
# Every GoogleTest case stays its own ctest test, named Suite.Case as before, one process each:
# merging a folder's files into one program changes which binary a case lives in, nothing else.
# What it saves is compile time. Each test source includes gtest.h and most nlohmann/json.hpp,
# and compiling, instantiating and generating code for those again in every file was most of a
# test's compile: the program is a unity build (CMake's UNITY_BUILD) of WARDEN_UNITY_BATCH files
# per translation unit. tests/policy's five unit-test files: 45 s CPU one by one, 18 s as one unit.
#
# A unity build puts several files into one translation unit, so a file's internal names
# (anonymous namespaces, statics, macros) must not clash with another file's: give helpers that
# two files share one home (a testing.h), and names of their own to the rest.
# -DWARDEN_UNITY=OFF compiles every file alone (what a file must also do: it includes what it uses).
option(WARDEN_UNITY "Unity builds (several files per translation unit) of the libraries and tests" ON)
set(WARDEN_UNITY_BATCH 6 CACHE STRING "Source files per unity translation unit")

function(warden_test_program name)
  cmake_parse_arguments(arg "OWN_MAIN" "TIMEOUT;PREFIX;FILTER" "SOURCES;LIBRARIES;DEFINITIONS;LABELS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  set_target_properties(${name} PROPERTIES UNITY_BUILD ${WARDEN_UNITY}
                        UNITY_BUILD_BATCH_SIZE ${WARDEN_UNITY_BATCH})
  target_link_libraries(${name} PRIVATE ${arg_LIBRARIES} GTest::gtest)
  if(NOT arg_OWN_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  if(arg_DEFINITIONS)
    target_compile_definitions(${name} PRIVATE ${arg_DEFINITIONS})
  endif()
  warden_discover_tests(${name} PREFIX "${arg_PREFIX}" FILTER "${arg_FILTER}" LABELS ${arg_LABELS}
                        TIMEOUT "${arg_TIMEOUT}")
endfunction()

# The discovered tests of a program again, for instance under another prefix and environment
# (tests/integration's as_user.*).
#   warden_discover_tests(program [PREFIX p.] [FILTER f] [LABELS ...] [TIMEOUT s] [ENVIRONMENT N=V])
function(warden_discover_tests name)
  cmake_parse_arguments(arg "" "TIMEOUT;PREFIX;FILTER;ENVIRONMENT" "LABELS" ${ARGN})
  set(extra)
  if(arg_PREFIX)
    list(APPEND extra TEST_PREFIX ${arg_PREFIX})
  endif()
  if(arg_FILTER)
    list(APPEND extra TEST_FILTER ${arg_FILTER})
  endif()
  set(props)
  if(arg_TIMEOUT)
    list(APPEND props TIMEOUT ${arg_TIMEOUT})
  endif()
  if(arg_ENVIRONMENT)
    list(APPEND props ENVIRONMENT ${arg_ENVIRONMENT})  # one NAME=VALUE
  endif()
  # LABELS stays one argument: "a;b" is two labels of one property.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 ${extra} PROPERTIES LABELS "${arg_LABELS}" ${props})
endfunction()
