// Uniform argument and field checks for values coming from JS. The TS facade validates first; these exist so
// that a caller bypassing it still gets a typed error instead of a crash.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "addon-errors.h"

namespace addon {

inline Napi::Value require_arg(const Napi::CallbackInfo& info, size_t index, napi_valuetype type, const char* name) {
  if (info.Length() <= index || info[index].Type() != type) {
    throw make_error(info.Env(), "invalid_argument", std::string("argument '") + name + "' is missing or of the wrong type");
  }
  return info[index];
}

inline Napi::Object require_object(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return require_arg(info, i, napi_object, name).As<Napi::Object>();
}
inline std::string require_string(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return require_arg(info, i, napi_string, name).As<Napi::String>().Utf8Value();
}
inline Napi::Function require_function(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return require_arg(info, i, napi_function, name).As<Napi::Function>();
}
// A number that is an integer (any sign), as int64.
inline int64_t require_integer(const Napi::CallbackInfo& info, size_t i, const char* name) {
  const double d = require_arg(info, i, napi_number, name).As<Napi::Number>().DoubleValue();
  if (!(d >= -9007199254740991.0 && d <= 9007199254740991.0) || d != static_cast<double>(static_cast<int64_t>(d))) {
    throw make_error(info.Env(), "invalid_argument",
                     std::string("argument '") + name + "' must be an integer, got " + std::to_string(d));
  }
  return static_cast<int64_t>(d);
}

// Field readers: absent/undefined -> default; present with the wrong type -> invalid_argument naming the field.
class Fields {
 public:
  Fields(Napi::Env env, Napi::Object object, std::string prefix) : env_(env), object_(object), prefix_(std::move(prefix)) {}

  bool has(const char* key) const {
    return object_.Has(key) && !object_.Get(key).IsUndefined() && !object_.Get(key).IsNull();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    Napi::Value v = object_.Get(key);
    if (!v.IsNumber()) fail(key, "a number");
    return v.As<Napi::Number>().DoubleValue();
  }
  int64_t integer(const char* key, int64_t fallback) const {
    double d = number(key, static_cast<double>(fallback));
    if (d != static_cast<double>(static_cast<int64_t>(d))) fail(key, "an integer");
    return static_cast<int64_t>(d);
  }
  // An engine int32 field: a value outside int32 would wrap in the cast, so it is refused, named.
  int32_t int32(const char* key, int32_t fallback) const {
    const int64_t v = integer(key, fallback);
    if (v < INT32_MIN || v > INT32_MAX) fail(key, "a 32-bit integer");
    return static_cast<int32_t>(v);
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    Napi::Value v = object_.Get(key);
    if (!v.IsBoolean()) fail(key, "a boolean");
    return v.As<Napi::Boolean>().Value();
  }
  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    Napi::Value v = object_.Get(key);
    if (!v.IsString()) fail(key, "a string");
    return v.As<Napi::String>().Utf8Value();
  }
  std::vector<int32_t> int_array(const char* key) const {
    if (!has(key)) return {};
    return to_int_array(object_.Get(key), prefix_ + key);
  }
  // number[] or Float32Array (a vocab-sized vector is cheaper to pass as one typed array).
  std::vector<float> float_array(const char* key) const {
    std::vector<float> out;
    if (!has(key)) return out;
    Napi::Value v = object_.Get(key);
    if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_float32_array) {
      Napi::Float32Array a = v.As<Napi::Float32Array>();
      out.assign(a.Data(), a.Data() + a.ElementLength());
      return out;
    }
    if (!v.IsArray()) fail(key, "an array of numbers or a Float32Array");
    Napi::Array a = v.As<Napi::Array>();
    out.reserve(a.Length());
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value e = a.Get(i);
      if (!e.IsNumber()) {
        throw make_error(env_, "invalid_argument", "field '" + prefix_ + key + "[" + std::to_string(i) + "]' must be a number");
      }
      out.push_back(static_cast<float>(e.As<Napi::Number>().DoubleValue()));
    }
    return out;
  }
  std::vector<std::vector<int32_t>> int_array_list(const char* key) const {
    std::vector<std::vector<int32_t>> out;
    if (!has(key)) return out;
    Napi::Value v = object_.Get(key);
    if (!v.IsArray()) fail(key, "an array of integer arrays");
    Napi::Array a = v.As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); ++i) out.push_back(to_int_array(a.Get(i), prefix_ + key + "[" + std::to_string(i) + "]"));
    return out;
  }
  // An array (of objects, read with their own Fields); absent: an empty one.
  Napi::Array array(const char* key) const {
    if (!has(key)) return Napi::Array::New(env_);
    Napi::Value v = object_.Get(key);
    if (!v.IsArray()) fail(key, "an array");
    return v.As<Napi::Array>();
  }
  // A typed array of exactly this type (a vocabulary's bytes and offsets are passed whole, not element by element).
  template <typename TypedArray>
  TypedArray typed_array(const char* key, napi_typedarray_type type, const char* expected) const {
    Napi::Value v = object_.Get(key);
    if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) fail(key, expected);
    return v.As<TypedArray>();
  }
  Fields child(const char* key) const {
    if (!has(key)) return Fields(env_, Napi::Object::New(env_), prefix_ + key + ".");
    Napi::Value v = object_.Get(key);
    if (!v.IsObject()) fail(key, "an object");
    return Fields(env_, v.As<Napi::Object>(), prefix_ + key + ".");
  }

 private:
  [[noreturn]] void fail(const std::string& key, const char* expected) const {
    throw make_error(env_, "invalid_argument", "field '" + prefix_ + key + "' must be " + expected);
  }
  std::vector<int32_t> to_int_array(Napi::Value v, const std::string& name) const {
    if (!v.IsArray()) throw make_error(env_, "invalid_argument", "field '" + name + "' must be an array of integers");
    Napi::Array a = v.As<Napi::Array>();
    std::vector<int32_t> out;
    out.reserve(a.Length());
    for (uint32_t i = 0; i < a.Length(); ++i) {
      Napi::Value e = a.Get(i);
      double d = e.IsNumber() ? e.As<Napi::Number>().DoubleValue() : 0.5;
      if (d != static_cast<double>(static_cast<int32_t>(d))) {
        throw make_error(env_, "invalid_argument", "field '" + name + "[" + std::to_string(i) + "]' must be a 32-bit integer");
      }
      out.push_back(static_cast<int32_t>(d));
    }
    return out;
  }
  Napi::Env env_;
  Napi::Object object_;
  std::string prefix_;
};

}  // namespace addon
