// A tiny assertion harness for the engine's ctest executables: CHECK keeps going and counts, main() returns
// non-zero when anything failed, and check::skip's code when the test cannot run here. argv[1] is the repository
// root (fixtures live under examples/ and test/).
#pragma once
#include <sys/stat.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace check {
inline int failures = 0;
inline int passes = 0;
inline std::string repo_root = ".";

// ctest's SKIP_RETURN_CODE for every engine test (test/sources.cmake): a test that cannot run here (no GPU, no
// fixtures) is reported as skipped, never as passed.
inline constexpr int skip_code = 77;

// Whether a file or directory exists (fixtures a test needs: absent, it skips).
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Prints "SKIP: <why>" and returns skip_code: `return check::skip("no GPU");` from main.
inline int skip(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline int skip(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::printf("SKIP: ");
  std::vprintf(format, args);
  std::printf("\n");
  va_end(args);
  std::fflush(stdout);
  return skip_code;
}
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
