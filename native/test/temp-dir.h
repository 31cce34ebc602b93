// A test's scratch directory under /tmp, removed when the test program exits (passed or failed), so test runs
// leave nothing behind.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace test {

// `prefix`: a name saying which test made it ("model-config").
inline std::string make_temp_dir(const std::string& prefix) {
  static struct Made {
    std::vector<std::string> dirs;
    ~Made() {
      std::error_code ignored;
      for (const std::string& d : dirs) std::filesystem::remove_all(d, ignored);
    }
  } made;
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  const char* dir = mkdtemp(tmpl.data());
  if (dir == nullptr) throw std::runtime_error("mkdtemp " + tmpl + " failed");
  made.dirs.push_back(dir);
  return dir;
}

}  // namespace test
