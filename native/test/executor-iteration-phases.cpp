// TRTLLM_ITER_PHASES=1 (executor/iteration-phases.h): once the executor has run out of work, stderr has the round's
// per-phase times of its decode-only iterations; without the variable, nothing.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "check.h"
#include "executor-test-util.h"

using namespace engine;
using namespace test;

// Runs two requests through an executor (its stderr sent to a file meanwhile) and returns what it printed there.
static std::string stderr_of_a_round(bool phases_on) {
  if (phases_on) setenv("TRTLLM_ITER_PHASES", "1", 1);
  else unsetenv("TRTLLM_ITER_PHASES");
  char path[] = "/tmp/iteration-phases-XXXXXX";
  const int fd = mkstemp(path);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  {
    Harness h(small_config());
    const RequestId a = h.executor->enqueue(make_request(prompt_of(6, 1), 8));
    const RequestId b = h.executor->enqueue(make_request(prompt_of(9, 2), 8));
    const auto out = h.collect({a, b});
    CHECK(out.at(a).is_final && out.at(b).is_final);
  }  // the executor stopped: its loop thread, which prints, has ended
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  unsetenv("TRTLLM_ITER_PHASES");
  return text.str();
}

static void test_report_when_on() {
  const std::string s = stderr_of_a_round(true);
  CHECK_MSG(s.find("decode-only iterations") != std::string::npos, "stderr: %s", s.c_str());
  for (const char* phase : {"plan+chunks", "forward call", "sample and update", "stats+delivery"})
    CHECK_MSG(s.find(phase) != std::string::npos, "no '%s' in: %s", phase, s.c_str());
}

static void test_silent_when_off() {
  const std::string s = stderr_of_a_round(false);
  CHECK_MSG(s.find("iteration phases") == std::string::npos, "stderr: %s", s.c_str());
}

TEST_MAIN({
  test_report_when_on();
  test_silent_when_off();
})
