// For server tests: the demo model's GGUF with another chat template.
#ifndef LLAMAY_SERVER_TEMPLATE_TEST_UTIL_H_
#define LLAMAY_SERVER_TEMPLATE_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "server/server.h"
#include "server/server_test_util.h"

namespace llamay::server {

// The demo model's GGUF, every key and tensor copied through the Writer, with `tmpl` as its template.
inline std::vector<uint8_t> DemoWithTemplate(const std::string& tmpl) {
  auto src = gguf::File::FromBuffer(model::BuildDemoModel());
  EXPECT_TRUE(src.ok());
  gguf::Writer w(src->alignment());
  for (std::string_view k : src->Keys()) {
    const std::string key(k);
    if (key == "tokenizer.chat_template") continue;
    switch (*src->TypeOf(key)) {
      case gguf::ValueType::kString: w.SetString(key, *src->GetString(key)); break;
      case gguf::ValueType::kBool: w.SetBool(key, *src->GetBool(key)); break;
      case gguf::ValueType::kFloat32:
      case gguf::ValueType::kFloat64: w.SetFloat32(key, static_cast<float>(*src->GetFloat(key))); break;
      case gguf::ValueType::kInt32: w.SetInt32(key, static_cast<int32_t>(*src->GetInt(key))); break;
      case gguf::ValueType::kUint64: w.SetUint64(key, static_cast<uint64_t>(*src->GetInt(key))); break;
      case gguf::ValueType::kArray:
        if (*src->ArrayElementType(key) == gguf::ValueType::kString) {
          const std::vector<std::string_view> a = src->GetStringArray(key).value();
          std::vector<std::string> v(a.begin(), a.end());
          w.SetStringArray(key, std::move(v));
        } else if (*src->ArrayElementType(key) == gguf::ValueType::kFloat32) {
          w.SetFloat32Array(key, *src->GetFloatArray(key));
        } else {
          const std::vector<int64_t> a = src->GetIntArray(key).value();
          std::vector<int32_t> v;
          for (int64_t x : a) v.push_back(static_cast<int32_t>(x));
          w.SetInt32Array(key, std::move(v));
        }
        break;
      default: w.SetUint32(key, static_cast<uint32_t>(*src->GetInt(key))); break;
    }
  }
  w.SetString("tokenizer.chat_template", tmpl);
  for (const gguf::TensorInfo& t : src->tensors())
    EXPECT_TRUE(w.AddTensor(t.name, t.dims, t.type, std::span(t.data, t.n_bytes)).ok());
  return w.Finish();
}

struct Served {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Server> server;
  std::unique_ptr<httplib::Client> client;
};

// `model` behind a server on a loopback port.
inline Served Serve(std::unique_ptr<model::Model> model, const engine::EngineOptions& eo = {}) {
  Served s;
  auto tok = tokenizer::Tokenizer::FromGguf(model->file());
  EXPECT_TRUE(tok.ok());
  auto e = engine::Engine::Create(std::move(model), std::move(*tok), eo);
  EXPECT_TRUE(e.ok());
  s.engine = std::move(*e);
  ServerOptions o;
  o.port = 0;
  s.server = std::make_unique<Server>(s.engine.get(), o);
  EXPECT_TRUE(s.server->Start().ok());
  s.client = std::make_unique<httplib::Client>("127.0.0.1", s.server->port());
  s.client->set_read_timeout(kClientTimeoutSeconds, 0);
  return s;
}

// The demo model with `tmpl` behind a server on a loopback port.
inline Served Serve(const std::string& tmpl) {
  auto file = gguf::File::FromBuffer(DemoWithTemplate(tmpl));
  EXPECT_TRUE(file.ok());
  auto m = model::Model::FromFile(std::move(*file));
  EXPECT_TRUE(m.ok());
  return Serve(std::move(*m));
}

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_TEMPLATE_TEST_UTIL_H_
