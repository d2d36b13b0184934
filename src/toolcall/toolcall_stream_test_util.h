// Shared by the streaming tests of every format: a stream's deltas added up into the answer they make
// (checking each delta's shape on the way), a text streamed in given pieces, and the comparison of a
// streamed answer with the whole one.
//
// Thread-safety: test code.
#ifndef LLAMAY_TOOLCALL_TOOLCALL_STREAM_TEST_UTIL_H_
#define LLAMAY_TOOLCALL_TOOLCALL_STREAM_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "toolcall/toolcall.h"

namespace llamay::toolcall::testing {

// The deltas of a stream added up, checking their shape on the way.
struct Collector {
  ParsedAnswer answer;

  void Take(const ToolDelta& d) {
    answer.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (!c.id.empty()) {  // a call's first delta: index, id, name, no arguments
        EXPECT_EQ(c.index, static_cast<int>(answer.calls.size()));
        EXPECT_FALSE(c.name.empty());
        EXPECT_TRUE(c.arguments.empty());
        answer.calls.push_back({c.id, c.name, ""});
      } else {  // then fragments of the arguments of the latest call
        ASSERT_FALSE(answer.calls.empty());
        EXPECT_EQ(c.index, static_cast<int>(answer.calls.size()) - 1);
        EXPECT_TRUE(c.name.empty());
        EXPECT_FALSE(c.arguments.empty());
        answer.calls.back().arguments += c.arguments;
      }
    }
  }
};

// `pieces` pushed in order into a stream of `format` (ids from RandomToolCallIds(9); `tools` as for
// ParseToolCalls), then finished: what its deltas add up to.
inline ParsedAnswer StreamPieces(ToolFormat format, const std::vector<std::string>& pieces,
                                 const std::vector<ToolSpec>* tools = nullptr) {
  ToolCallStream stream(format, RandomToolCallIds(9), tools);
  Collector c;
  for (const std::string& p : pieces) c.Take(stream.Push(p));
  c.Take(stream.Finish());
  EXPECT_EQ(stream.num_calls(), static_cast<int>(c.answer.calls.size()));
  return c.answer;
}

inline void ExpectSame(const ParsedAnswer& streamed, const ParsedAnswer& whole, const std::string& what) {
  ASSERT_EQ(streamed.content, whole.content) << what;
  ASSERT_EQ(streamed.calls.size(), whole.calls.size()) << what;
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    ASSERT_EQ(streamed.calls[i].id, whole.calls[i].id) << what;
    ASSERT_EQ(streamed.calls[i].name, whole.calls[i].name) << what;
    ASSERT_EQ(streamed.calls[i].arguments, whole.calls[i].arguments) << what;
  }
}

}  // namespace llamay::toolcall::testing

#endif  // LLAMAY_TOOLCALL_TOOLCALL_STREAM_TEST_UTIL_H_
