// TextIndex: finds the id of the element that holds a text, over texts the caller stores (no copies of
// them): open addressing with linear probing, each slot a text's 32-bit hash and its id, a power-of-two
// table kept at most half full.
//
// The vocabulary builds two at load (token texts, BPE merge keys). They replaced unordered_maps keyed by
// std::string, whose 32k node allocations and key copies were most of a tokenizer's construction time
// (the part of "ready to serve" no file size changes; docs/benchmarks.md).
//
// The index never sees a text: the caller hashes with Hash/HashAppend and answers "does id i hold the text
// I am looking for?" through a predicate, so a key may be assembled from pieces (a merge is "left right")
// without building a string.
//
// Thread-safety: immutable after the inserts; Find may run on many threads at once.
#ifndef LLAMAY_TOKENIZER_TEXT_INDEX_H_
#define LLAMAY_TOKENIZER_TEXT_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llamay::tokenizer {

class TextIndex {
 public:
  // FNV-1a, 64-bit. HashAppend(HashAppend(kSeed, a), b) equals Hash of the concatenation a + b.
  static constexpr uint64_t kSeed = 0xcbf29ce484222325ull;
  static uint64_t HashAppend(uint64_t h, std::string_view text) {
    for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }
  static uint64_t Hash(std::string_view text) { return HashAppend(kSeed, text); }

  // Empties the index and sizes it for up to `n` ids.
  void Reset(size_t n) {
    size_t slots = 16;
    while (slots < 2 * n) slots *= 2;
    slots_.assign(slots, Slot{});
    size_ = 0;
  }

  // The id under `hash` for which holds(id) is true, or -1.
  template <class Holds>
  int32_t Find(uint64_t hash, Holds holds) const {
    if (slots_.empty()) return -1;
    const size_t mask = slots_.size() - 1;
    const auto h32 = static_cast<uint32_t>(hash);
    for (size_t i = static_cast<size_t>(hash >> 32) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h32 && holds(s.id)) return s.id;
    }
  }

  // Adds `id` under `hash` unless an id for which holds(id) is true is there already: returns -1 when it
  // added `id`, else that earlier id (the index keeps it). REQUIRES: fewer inserts than Reset's n.
  template <class Holds>
  int32_t Insert(uint64_t hash, int32_t id, Holds holds) {
    const size_t mask = slots_.size() - 1;
    const auto h32 = static_cast<uint32_t>(hash);
    for (size_t i = static_cast<size_t>(hash >> 32) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h32, id};
        ++size_;
        return -1;
      }
      if (s.hash == h32 && holds(s.id)) return s.id;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t hash = 0;
    int32_t id = -1;  // -1: empty
  };
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace llamay::tokenizer

#endif  // LLAMAY_TOKENIZER_TEXT_INDEX_H_
