// Reasoning ("thinking") models, as pure functions: which models reason, whether a rendered prompt leaves
// the model inside its reasoning, and the split of an output into reasoning and answer, whole or streamed.
// No model, engine or HTTP here. What a server does with them, per model and request:
//
//   1. Per model: DetectReasoning(template source) gives the markers (nullopt: the model does not reason);
//      whether the template reads `enable_thinking` (chat::TemplateReadsVariable) says whether it can be
//      asked not to reason.
//   2. Per request: render the prompt; PromptOpensReasoning(prompt, markers) says whether the output starts
//      inside the reasoning (the template wrote the open marker itself, as QwQ's and DeepSeek-R1's do).
//   3. Answer: SplitReasoning(text, markers, starts_inside), or a ReasoningSplitter fed the text as it is
//      generated; the content part is what tool-call parsing (toolcall/) and the answer see.
//
// The split: the output's first reasoning block is reasoning, nothing else. The block starts at the start
// of the output (starts_inside), or with an open marker that only whitespace precedes; an open marker
// right at the start is dropped in either case (a model that repeats the one its prompt ends with). It
// ends at the first close marker after it, or, when the output is cut off inside it, at the end (then all
// of the output is reasoning). Markers are not part of either text; the reasoning's leading and trailing
// whitespace is dropped, and so is the whitespace right after the close marker. An open marker later in
// the output is content, as is everything when no block starts. Without a block, the content is the whole
// output, its whitespace included.
//
// Thread-safety: pure functions; a ReasoningSplitter belongs to one request.
#ifndef LLAMAY_REASONING_REASONING_H_
#define LLAMAY_REASONING_REASONING_H_

#include <optional>
#include <string>
#include <string_view>

namespace llamay::reasoning {

// The strings around a reasoning block. REQUIRES (of every function here): both non-empty, neither
// beginning with whitespace.
struct ReasoningMarkers {
  std::string open = "<think>";
  std::string close = "</think>";
};

// The markers a chat template shows its model, or nullopt when it shows none: <think>/</think> (Qwen3,
// QwQ, DeepSeek-R1 and its distills: either marker in the source is enough, since some templates only
// strip `</think>` from past answers), or <seed:think>/</seed:think> (ByteDance Seed-OSS).
std::optional<ReasoningMarkers> DetectReasoning(std::string_view chat_template_source);

// Whether a rendered prompt leaves the model inside its reasoning: the prompt's last open marker comes
// after its last close marker (or there is none), and only whitespace follows it.
bool PromptOpensReasoning(std::string_view rendered_prompt, const ReasoningMarkers& markers);

struct Split {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

// The reasoning and content of a complete output (see the top of this file).
Split SplitReasoning(std::string_view text, const ReasoningMarkers& markers, bool starts_inside);

// SplitReasoning incrementally: Push the generated text as it comes, then Finish. For any way of splitting
// a text into pushes, the reasoning of all the splits concatenated equals SplitReasoning's reasoning, and
// the content likewise. Held back until decided, and only that: leading whitespace and what may still
// become an open marker (at the start), what may become the close marker and the whitespace before it (in
// the reasoning), the whitespace right after the close marker. Text without markers is content at once.
class ReasoningSplitter {
 public:
  ReasoningSplitter(ReasoningMarkers markers, bool starts_inside);

  Split Push(std::string_view text);
  // Releases what was held back. REQUIRES: called once, after the last Push (CHECKed).
  Split Finish();

  // Whether the output so far ends inside the reasoning block: the block has started (starts_inside counts
  // from the beginning) and its close marker has not appeared.
  bool inside() const;

 private:
  enum class Phase {
    kStart,      // before the first non-whitespace byte that settles whether an open marker starts the output
    kReasoning,  // inside the block
    kContent,    // after the close marker, or no block at all
  };

  // Each step consumes pending_ in its phase, appending to `out`, and may change the phase.
  void Start(Split* out);
  void Reason(Split* out);
  void Answer(Split* out);

  ReasoningMarkers markers_;
  bool starts_inside_;
  Phase phase_ = Phase::kStart;
  std::string pending_;           // text received and not yet given out
  bool reasoning_begun_ = false;  // a non-whitespace byte of reasoning was given out
  bool content_begun_ = false;    // content is given out as is (its leading whitespace settled)
  bool finished_ = false;
};

}  // namespace llamay::reasoning

#endif  // LLAMAY_REASONING_REASONING_H_
