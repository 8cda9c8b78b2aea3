# libFuzzer targets for the parsers that read what an agent or an upstream sends (docs/testing-fuzz.md).
#
#   warden_add_fuzzer(NAME SOURCES file... LIBRARIES target...)
#
# declares one target whose entry point is LLVMFuzzerTestOneInput in SOURCES, with its seed corpus in
# tests/fuzz/corpus/NAME/. How it is built depends on the build:
#   * WARDEN_FUZZ=ON with clang (scripts/fuzz.sh): the executable NAME_fuzz, in build-fuzz/fuzz/,
#     linked with libFuzzer; every library is compiled with coverage, ASan and UBSan (top-level
#     CMakeLists.txt). The custom target `fuzzers` builds them all.
#   * otherwise (the normal build and `make asan`): NAME_fuzz_replay, the same entry point linked
#     with tests/fuzz/replay_main.cc, and the ctest test fuzz_corpus.NAME that runs it over the
#     corpus, so that a checked-in crash input fails `make test` without clang.
set(WARDEN_FUZZ_CORPUS_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus)
if(WARDEN_FUZZ AND NOT TARGET fuzzers)
  add_custom_target(fuzzers)
endif()

function(warden_add_fuzzer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;LIBRARIES")
  set(corpus ${WARDEN_FUZZ_CORPUS_DIR}/${name})
  if(NOT IS_DIRECTORY ${corpus})
    message(FATAL_ERROR "fuzz target ${name}: no seed corpus at ${corpus}")
  endif()
  if(WARDEN_FUZZ)
    add_executable(${name}_fuzz ${arg_SOURCES})
    target_link_options(${name}_fuzz PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name}_fuzz PRIVATE ${arg_LIBRARIES})
    target_include_directories(${name}_fuzz PRIVATE ${CMAKE_SOURCE_DIR}/tests/fuzz)
    set_target_properties(${name}_fuzz PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    add_dependencies(fuzzers ${name}_fuzz)
  elseif(BUILD_TESTING)
    add_executable(${name}_fuzz_replay ${arg_SOURCES} ${CMAKE_SOURCE_DIR}/tests/fuzz/replay_main.cc)
    target_link_libraries(${name}_fuzz_replay PRIVATE ${arg_LIBRARIES})
    target_include_directories(${name}_fuzz_replay PRIVATE ${CMAKE_SOURCE_DIR}/tests/fuzz)
    # A test program: line tables only, as tests/CMakeLists.txt gives the others.
    if(NOT WARDEN_TEST_FULL_DEBUG)
      target_compile_options(${name}_fuzz_replay PRIVATE $<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
    endif()
    add_test(NAME fuzz_corpus.${name} COMMAND ${name}_fuzz_replay ${corpus})
    set_tests_properties(fuzz_corpus.${name} PROPERTIES LABELS fuzz TIMEOUT 120)
  endif()
endfunction()
