// The JSON Schema fixture suite (test/fixtures/json-schemas), for every test that needs it: NN-name.json is a schema
// as callers send it (response_format / tool parameters), NN-name.valid.json and NN-name.invalid.json are arrays of
// instances its grammar must accept / reject, returned here serialized in the compact layout (json-layout.h) the
// grammar generates. invalid/NN-name.json are schemas the translation must refuse, each with the substring its
// error must contain in invalid/NN-name.expect.txt. A matcher test feeds valid / invalid to its own
// check_gbnf_accepts(gbnf, text).
#pragma once
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/json-layout.h"
#include "loading/json.h"

namespace json_schema_suite {

struct Schema {
  std::string name;         // "01-person"
  std::string schema_text;  // the schema file as written
  std::vector<std::string> valid;    // instances in the compact layout
  std::vector<std::string> invalid;
};

struct RefusedSchema {
  std::string name;
  std::string schema_text;
  std::string expected_error;  // a substring of the error message
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string suite_dir(const std::string& repo_root) { return repo_root + "/test/fixtures/json-schemas"; }

// The schemas' names (file stems without the .valid / .invalid sidecars), sorted.
inline std::vector<std::string> schema_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(dir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    const bool sidecar = file.find(".valid.") != std::string::npos || file.find(".invalid.") != std::string::npos;
    if (entry.is_regular_file() && entry.path().extension() == ".json" && !sidecar) names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

inline std::vector<std::string> instances(const std::filesystem::path& path) {
  std::vector<std::string> out;
  const engine::json::Value list = engine::json::parse(read_text(path), path.string());
  for (const engine::json::Value& v : list.as_array(path.string())) out.push_back(engine::json_layout::compact(v));
  return out;
}

// Throws (EngineError) when a sidecar is missing or not a JSON array: the suite is malformed.
inline std::vector<Schema> load(const std::string& repo_root) {
  const std::filesystem::path dir = suite_dir(repo_root);
  std::vector<Schema> out;
  for (const std::string& name : schema_names(dir)) {
    Schema s;
    s.name = name;
    s.schema_text = read_text(dir / (name + ".json"));
    s.valid = instances(dir / (name + ".valid.json"));
    s.invalid = instances(dir / (name + ".invalid.json"));
    out.push_back(std::move(s));
  }
  return out;
}

inline std::vector<RefusedSchema> load_refused(const std::string& repo_root) {
  const std::filesystem::path dir = suite_dir(repo_root) + "/invalid";
  std::vector<RefusedSchema> out;
  for (const std::string& name : schema_names(dir)) {
    RefusedSchema s;
    s.name = name;
    s.schema_text = read_text(dir / (name + ".json"));
    s.expected_error = read_text(dir / (name + ".expect.txt"));
    while (!s.expected_error.empty() && (s.expected_error.back() == '\n' || s.expected_error.back() == '\r')) s.expected_error.pop_back();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace json_schema_suite
