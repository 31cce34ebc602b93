// A tiny assertion harness for the engine's ctest executables: CHECK keeps going and counts, main() returns
// non-zero when anything failed. argv[1] is the repository root (fixtures live under examples/ and test/).
#pragma once
#include <cmath>
#include <cstdio>
#include <string>

namespace check {
inline int failures = 0;
inline int passes = 0;
inline std::string repo_root = ".";
}  // namespace check

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (cond) { ++check::passes; }                                                       \
    else { ++check::failures; std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
  } while (0)

#define CHECK_MSG(cond, ...)                                                             \
  do {                                                                                   \
    if (cond) { ++check::passes; }                                                       \
    else { ++check::failures; std::fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
           std::fprintf(stderr, __VA_ARGS__); std::fprintf(stderr, "\n"); }              \
  } while (0)

#define CHECK_THROWS(stmt, code_substring)                                               \
  do {                                                                                   \
    bool threw_ = false; std::string what_;                                              \
    try { stmt; } catch (const std::exception& e_) { threw_ = true; what_ = e_.what(); } \
    CHECK_MSG(threw_ && what_.find(code_substring) != std::string::npos,                 \
              "expected an error containing '%s', got '%s'", code_substring, threw_ ? what_.c_str() : "(no error)"); \
  } while (0)

#define TEST_MAIN(...)                                                                   \
  int main(int argc, char** argv) {                                                      \
    if (argc > 1) check::repo_root = argv[1];                                            \
    __VA_ARGS__;                                                                         \
    std::printf("%d checks passed, %d failed\n", check::passes, check::failures);        \
    return check::failures == 0 ? 0 : 1;                                                 \
  }
