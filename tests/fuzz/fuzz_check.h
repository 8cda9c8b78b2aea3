// FUZZ_CHECK(condition): the invariant a fuzz target asserts. When it does not hold, the
// condition and its line go to stderr and the process aborts, which libFuzzer reports as a crash
// (with the input saved) and the corpus replay (replay_main.cc) as a failed test. Not assert():
// it must hold in release builds too.
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                                \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
