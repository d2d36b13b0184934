// Respond: answers an HTTP request with a Generation's output, in the wire format of the API surface that
// started it, streamed or whole. The surfaces say how their format writes things (WireFormat); this file
// owns the waiting, the client that leaves, keeping a non-streamed connection alive, and the end.
//
// Non-streamed: until every choice has started (admission errors and the first token arrive by then),
// the HTTP status is still open, so a request that fails by then gets its surface's error with its
// status. After that the answer is a 200 whose body is written when the choices end; while they run a
// space (leading whitespace is valid JSON) goes out every 250 ms, so that a client that left is noticed
// within about two of those and its work is cancelled. A choice that fails this late turns the body into
// the surface's error object (WireFormat::ErrorBody).
// Streamed: Begin, then each update as it arrives, then End; a client that leaves cancels the work.
//
// Thread-safety: runs on the handler's thread and on its content provider's (one at a time).
#ifndef LLAMAY_SERVER_RESPOND_H_
#define LLAMAY_SERVER_RESPOND_H_

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "server/generation.h"

namespace llamay::server {

class WireFormat {
 public:
  virtual ~WireFormat() = default;
  // A refusal before any byte of the answer went out: its HTTP status and the surface's error object.
  virtual void SendError(httplib::Response& res, const Status& s) = 0;
  // Non-streamed: the answer once every choice is done (Generation::Finish has run).
  virtual nlohmann::json Body(const Generation& g) = 0;
  // Non-streamed: a failure after the 200 went out, as the surface's error object.
  virtual nlohmann::json ErrorBody(const Status& s) = 0;

  // Streamed: the content type, what goes out before the first update, each update, and the end (after
  // Generation::Finish; g.error() says whether a choice failed or the session could not be committed).
  virtual std::string StreamContentType() const { return "text/event-stream"; }
  virtual std::string Begin(const Generation&) { return ""; }
  virtual std::string Update(const Generation& g, const ChoiceUpdate& u) = 0;
  virtual std::string End(const Generation& g) = 0;
};

// REQUIRES: `gen` was started for this request (Generation::Start), stream or not as gen->request().stream.
void Respond(std::shared_ptr<Generation> gen, std::shared_ptr<WireFormat> wire, httplib::Response& res);

// A server-sent event: "data: <json>\n\n", or with an event name "event: <name>\ndata: <json>\n\n".
std::string SseData(const nlohmann::json& j);
std::string SseEvent(const std::string& name, const nlohmann::json& j);

}  // namespace llamay::server

#endif  // LLAMAY_SERVER_RESPOND_H_
