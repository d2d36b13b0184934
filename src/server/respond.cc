#include "server/respond.h"

#include <chrono>

#include "server/http_util.h"

namespace llamay::server {
namespace {

void RespondWhole(std::shared_ptr<Generation> gen, std::shared_ptr<WireFormat> wire, httplib::Response& res) {
  std::function<bool()> gone = gen->client_gone();
  while (!gen->AllDone() && !gen->AllStarted()) {
    if (!gen->Next(std::chrono::milliseconds(100)) && gone()) {  // the client left during the prefill
      gen->CancelAll();
      return wire->SendError(res, CancelledStatus());
    }
  }
  if (gen->AllDone()) {
    gen->Finish();
    if (!gen->error().ok()) return wire->SendError(res, gen->error());
    return SendJson(res, wire->Body(*gen));
  }
  auto last_write = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
  res.set_chunked_content_provider("application/json", [gen, wire, gone, last_write](size_t, httplib::DataSink& sink) {
    gen->Next(std::chrono::milliseconds(100));
    if (!gen->AllDone()) {
      if (gone()) {
        gen->CancelAll();
        return false;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - *last_write >= std::chrono::milliseconds(250)) {
        *last_write = now;
        if (!sink.is_writable() || !sink.write(" ", 1)) {
          gen->CancelAll();
          return false;
        }
      }
      return true;
    }
    gen->Finish();
    const std::string out = Dump(gen->error().ok() ? wire->Body(*gen) : wire->ErrorBody(gen->error()));
    sink.write(out.data(), out.size());
    sink.done();
    return true;
  });
}

void RespondStream(std::shared_ptr<Generation> gen, std::shared_ptr<WireFormat> wire, httplib::Response& res) {
  std::function<bool()> gone = gen->client_gone();
  auto begun = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(wire->StreamContentType(), [gen, wire, gone, begun](size_t, httplib::DataSink& sink) {
    auto send = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
    if (!*begun) {
      *begun = true;
      if (!send(wire->Begin(*gen))) {
        gen->CancelAll();
        return false;
      }
    }
    std::optional<ChoiceUpdate> u = gen->Next(std::chrono::milliseconds(200));
    if (!u) {
      if (!sink.is_writable() || gone()) {  // the client went away: free its work now
        gen->CancelAll();
        return false;
      }
      return true;
    }
    if (!send(wire->Update(*gen, *u))) {
      gen->CancelAll();
      return false;
    }
    if (gen->AllDone()) {
      gen->Finish();
      send(wire->End(*gen));
      sink.done();
    }
    return true;
  });
}

}  // namespace

void Respond(std::shared_ptr<Generation> gen, std::shared_ptr<WireFormat> wire, httplib::Response& res) {
  if (gen->request().stream) return RespondStream(std::move(gen), std::move(wire), res);
  RespondWhole(std::move(gen), std::move(wire), res);
}

std::string SseData(const nlohmann::json& j) { return "data: " + Dump(j) + "\n\n"; }

std::string SseEvent(const std::string& name, const nlohmann::json& j) {
  return "event: " + name + "\ndata: " + Dump(j) + "\n\n";
}

}  // namespace llamay::server
