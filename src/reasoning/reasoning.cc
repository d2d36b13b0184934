// Reasoning markers, prompts and the split of an output (see reasoning.h).
#include "reasoning/reasoning.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace llamay::reasoning {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool Contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}

// The index of the first byte that is not whitespace, or text.size().
size_t SkipSpace(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  return i;
}

std::string_view TrimRight(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && IsSpace(text[end - 1])) --end;
  return text.substr(0, end);
}

std::string_view Trim(std::string_view text) { return TrimRight(text.substr(SkipSpace(text))); }

// The length of the longest proper prefix of `marker` that `text` ends with (0 when none).
size_t PartialMarkerAtEnd(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::optional<ReasoningMarkers> DetectReasoning(std::string_view source) {
  // Seed-OSS's markers first: "</seed:think>" does not contain "</think>", but a template may mention both.
  if (Contains(source, "<seed:think>") || Contains(source, "</seed:think>"))
    return ReasoningMarkers{"<seed:think>", "</seed:think>"};
  if (Contains(source, "<think>") || Contains(source, "</think>")) return ReasoningMarkers{};
  return std::nullopt;
}

bool PromptOpensReasoning(std::string_view prompt, const ReasoningMarkers& markers) {
  const size_t open = prompt.rfind(markers.open);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(markers.close);
  if (close != std::string_view::npos && close + markers.close.size() > open) return false;
  const std::string_view after = prompt.substr(open + markers.open.size());
  return SkipSpace(after) == after.size();
}

Split SplitReasoning(std::string_view text, const ReasoningMarkers& markers, bool starts_inside) {
  Split out;
  const size_t lead = SkipSpace(text);
  size_t begin = 0;  // where the reasoning block's text starts
  if (text.substr(lead).starts_with(markers.open)) {
    begin = lead + markers.open.size();
  } else if (!starts_inside) {
    out.content = std::string(text);
    return out;
  }
  const size_t close = text.find(markers.close, begin);
  if (close == std::string_view::npos) {  // cut off inside the reasoning
    out.reasoning = std::string(Trim(text.substr(begin)));
    return out;
  }
  out.reasoning = std::string(Trim(text.substr(begin, close - begin)));
  const std::string_view after = text.substr(close + markers.close.size());
  out.content = std::string(after.substr(SkipSpace(after)));
  return out;
}

// ---- ReasoningSplitter ----------------------------------------------------------------------------------

ReasoningSplitter::ReasoningSplitter(ReasoningMarkers markers, bool starts_inside)
    : markers_(std::move(markers)), starts_inside_(starts_inside) {
  LLAMAY_CHECK(!markers_.open.empty() && !markers_.close.empty()) << "reasoning markers must not be empty";
  LLAMAY_CHECK(!IsSpace(markers_.open[0]) && !IsSpace(markers_.close[0]))
      << "reasoning markers must not begin with whitespace";
}

bool ReasoningSplitter::inside() const {
  return phase_ == Phase::kReasoning || (phase_ == Phase::kStart && starts_inside_);
}

Split ReasoningSplitter::Push(std::string_view text) {
  LLAMAY_CHECK(!finished_) << "ReasoningSplitter::Push after Finish";
  pending_.append(text);
  Split out;
  // A step may move to the next phase with text left for it: run until the phase stays.
  for (Phase before = phase_;; before = phase_) {
    switch (phase_) {
      case Phase::kStart:
        Start(&out);
        break;
      case Phase::kReasoning:
        Reason(&out);
        break;
      case Phase::kContent:
        Answer(&out);
        break;
    }
    if (phase_ == before) break;
  }
  return out;
}

void ReasoningSplitter::Start(Split* out) {
  const size_t lead = SkipSpace(pending_);
  if (lead == pending_.size()) return;  // only whitespace so far: a marker may still follow
  const std::string_view rest = std::string_view(pending_).substr(lead);
  if (rest.starts_with(markers_.open)) {
    pending_.erase(0, lead + markers_.open.size());
    phase_ = Phase::kReasoning;
    return;
  }
  if (std::string_view(markers_.open).starts_with(rest)) return;  // the marker's beginning: wait
  // No open marker: the block starts here when the prompt opened it, else there is none.
  if (starts_inside_) {
    phase_ = Phase::kReasoning;
    return;
  }
  phase_ = Phase::kContent;
  content_begun_ = true;  // all of it, its leading whitespace too
  out->content += pending_;
  pending_.clear();
}

void ReasoningSplitter::Reason(Split* out) {
  // Whitespace before the reasoning's first byte is dropped whatever follows.
  if (!reasoning_begun_) pending_.erase(0, SkipSpace(pending_));
  const size_t close = pending_.find(markers_.close);
  if (close != std::string::npos) {
    out->reasoning += TrimRight(std::string_view(pending_).substr(0, close));
    pending_.erase(0, close + markers_.close.size());
    phase_ = Phase::kContent;
    return;
  }
  // Hold back what may begin the close marker and the whitespace before it (trimmed if the block ends).
  size_t end = pending_.size() - PartialMarkerAtEnd(pending_, markers_.close);
  while (end > 0 && IsSpace(pending_[end - 1])) --end;
  if (end == 0) return;
  out->reasoning.append(pending_, 0, end);
  pending_.erase(0, end);
  reasoning_begun_ = true;
}

void ReasoningSplitter::Answer(Split* out) {
  if (!content_begun_) {  // the whitespace right after the close marker is dropped
    const size_t lead = SkipSpace(pending_);
    pending_.erase(0, lead);
    if (pending_.empty()) return;
    content_begun_ = true;
  }
  out->content += pending_;
  pending_.clear();
}

Split ReasoningSplitter::Finish() {
  LLAMAY_CHECK(!finished_) << "ReasoningSplitter::Finish called twice";
  finished_ = true;
  Split out;
  switch (phase_) {
    case Phase::kStart:  // whitespace, or the beginning of an open marker that never came
      if (starts_inside_) {
        out.reasoning = std::string(Trim(pending_));
      } else {
        out.content = std::move(pending_);
      }
      break;
    case Phase::kReasoning:  // cut off inside the reasoning: all of it is reasoning
      out.reasoning = std::string(reasoning_begun_ ? TrimRight(pending_) : Trim(pending_));
      break;
    case Phase::kContent:  // nothing is held back here but whitespace that is dropped
      break;
  }
  pending_.clear();
  return out;
}

}  // namespace llamay::reasoning
