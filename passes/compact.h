// Node and Argument fields in one pointer each.
//
// A Node or Argument carries strings and lists that most programs never
// set (a delegation tag, a keyword name, an int list). A std::string or
// std::vector costs 24-32 bytes even when empty, and the IR holds millions
// of nodes: RareString and RareVector cost 8 bytes when empty and keep their
// contents on the heap when set (docs/performance.md, "Memory per node").
// Both are values: copying one copies its contents. (A spec's given strides
// work the same way: RareDims, in ir.h beside Dims.) TargetString, a call's
// operator name, is set on most nodes but is mostly one of the registry's
// names, which it points at rather than copies (docs/performance.md, "Tenth
// round"). Shared, a call's schema and a node's source location, is a
// shared immutable value in one pointer rather than std::shared_ptr's two,
// and counts no references to the registry's schemas (docs/performance.md,
// "Eleventh round").
#ifndef FERRY_PASSES_COMPACT_H_
#define FERRY_PASSES_COMPACT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry {

// What RareString and TargetString share: read through `str()`, they compare
// and print as the std::string they stand for.
template <typename Derived>
class ReadsAsString {
 public:
  size_t size() const { return text().size(); }
  const char* c_str() const { return text().c_str(); }

  friend bool operator==(const Derived& a, const Derived& b) {
    return a.str() == b.str();
  }
  friend bool operator==(const Derived& a, std::string_view b) {
    return a.str() == b;
  }
  friend bool operator==(const Derived& a, const char* b) {
    return a.str() == b;
  }
  friend bool operator==(const Derived& a, const std::string& b) {
    return a.str() == b;
  }
  friend std::ostream& operator<<(std::ostream& out, const Derived& d) {
    return out << d.str();
  }

 protected:
  // The text of an empty one.
  static const std::string& Empty() {
    static const std::string* const empty = new std::string();
    return *empty;
  }

 private:
  const std::string& text() const {
    return static_cast<const Derived&>(*this).str();
  }
};

// A string that is usually empty. Reads as a const std::string&.
class RareString : public ReadsAsString<RareString> {
 public:
  RareString() = default;
  RareString(std::string s) { assign(std::move(s)); }  // NOLINT: string-like
  RareString(std::string_view s) : RareString(std::string(s)) {}  // NOLINT
  RareString(const char* s) : RareString(std::string(s)) {}       // NOLINT
  RareString(const RareString& other) { *this = other; }
  RareString(RareString&&) noexcept = default;
  RareString& operator=(const RareString& other) {
    if (this != &other) assign(other.str());
    return *this;
  }
  RareString& operator=(RareString&&) noexcept = default;
  RareString& operator=(std::string s) {
    assign(std::move(s));
    return *this;
  }
  RareString& operator=(std::string_view s) { return *this = std::string(s); }
  RareString& operator=(const char* s) { return *this = std::string(s); }

  const std::string& str() const { return text_ ? *text_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT
  bool empty() const { return text_ == nullptr; }
  void clear() { text_.reset(); }

 private:
  void assign(std::string s) {
    if (s.empty())
      text_.reset();
    else
      text_ = std::make_unique<std::string>(std::move(s));
  }
  std::unique_ptr<std::string> text_;  // null when empty
};

// A string that is usually a name living as long as the process (an
// operator's name in the registry, which is never freed): it then points at
// that name, 8 bytes with nothing allocated, and copies share it. Any other
// text it keeps on the heap, as RareString does. Reads as a const
// std::string&. (A call node's target: most calls name a registered
// operator, and each copy node one of the two copy operators.)
class TargetString : public ReadsAsString<TargetString> {
 public:
  TargetString() = default;
  TargetString(std::string s) { assign(std::move(s)); }  // NOLINT: string-like
  TargetString(std::string_view s) : TargetString(std::string(s)) {}  // NOLINT
  TargetString(const char* s) : TargetString(std::string(s)) {}       // NOLINT
  // Points at `name`, which must outlive every TargetString (a registry
  // name).
  static TargetString Lasting(const std::string& name) {
    TargetString t;
    if (!name.empty()) t.bits_ = reinterpret_cast<uintptr_t>(&name) | kLasting;
    return t;
  }
  TargetString(const TargetString& other) { *this = other; }
  TargetString(TargetString&& other) noexcept
      : bits_(std::exchange(other.bits_, 0)) {}
  TargetString& operator=(const TargetString& other) {
    if (this == &other) return *this;
    if (other.lasting()) {
      reset();
      bits_ = other.bits_;
    } else {
      assign(other.str());
    }
    return *this;
  }
  TargetString& operator=(TargetString&& other) noexcept {
    if (this != &other) {
      reset();
      bits_ = std::exchange(other.bits_, 0);
    }
    return *this;
  }
  TargetString& operator=(std::string s) {
    assign(std::move(s));
    return *this;
  }
  TargetString& operator=(std::string_view s) { return *this = std::string(s); }
  TargetString& operator=(const char* s) { return *this = std::string(s); }
  ~TargetString() { reset(); }

  const std::string& str() const { return bits_ ? *text() : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT
  operator std::string_view() const { return str(); }    // NOLINT
  bool empty() const { return bits_ == 0; }
  void clear() { reset(); }
  // Whether it points at a lasting name rather than owning its text.
  bool lasting() const { return (bits_ & kLasting) != 0; }

 private:
  // The low bit of a (word-aligned) std::string's address marks a lasting
  // name; an owned text has it clear.
  static constexpr uintptr_t kLasting = 1;
  static_assert(alignof(std::string) > 1);

  const std::string* text() const {
    return reinterpret_cast<const std::string*>(bits_ & ~kLasting);
  }
  void reset() {
    if (bits_ != 0 && !lasting()) delete text();
    bits_ = 0;
  }
  void assign(std::string s) {
    reset();
    if (!s.empty())
      bits_ = reinterpret_cast<uintptr_t>(new std::string(std::move(s)));
  }
  uintptr_t bits_ = 0;  // 0 when empty
};

// A list that is usually empty, with the parts of std::vector's interface
// the IR uses. Reads as a const std::vector<T>&.
template <typename T>
class RareVector {
 public:
  using value_type = T;
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  RareVector() = default;
  RareVector(std::vector<T> v) { assign(std::move(v)); }  // NOLINT
  RareVector(std::initializer_list<T> list)
      : RareVector(std::vector<T>(list)) {}
  RareVector(const RareVector& other) { *this = other; }
  RareVector(RareVector&&) noexcept = default;
  RareVector& operator=(const RareVector& other) {
    if (this != &other) assign(other.vec());
    return *this;
  }
  RareVector& operator=(RareVector&&) noexcept = default;
  RareVector& operator=(std::vector<T> v) {
    assign(std::move(v));
    return *this;
  }
  RareVector& operator=(std::initializer_list<T> list) {
    assign(std::vector<T>(list));
    return *this;
  }

  const std::vector<T>& vec() const { return items_ ? *items_ : Empty(); }
  operator const std::vector<T>&() const { return vec(); }  // NOLINT
  // The list to change; allocates it when empty.
  std::vector<T>& mutable_vec() {
    if (!items_) items_ = std::make_unique<std::vector<T>>();
    return *items_;
  }

  bool empty() const { return vec().empty(); }
  size_t size() const { return vec().size(); }
  const T& operator[](size_t i) const { return vec()[i]; }
  T& operator[](size_t i) { return (*items_)[i]; }
  const T& front() const { return vec().front(); }
  const T& back() const { return vec().back(); }
  T& back() { return items_->back(); }
  const_iterator begin() const { return vec().begin(); }
  const_iterator end() const { return vec().end(); }
  iterator begin() { return items_ ? items_->begin() : iterator(); }
  iterator end() { return items_ ? items_->end() : iterator(); }
  const T* data() const { return vec().data(); }

  void push_back(T value) { mutable_vec().push_back(std::move(value)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    return mutable_vec().emplace_back(std::forward<Args>(args)...);
  }
  void reserve(size_t n) {
    if (n > 0) mutable_vec().reserve(n);
  }
  void resize(size_t n) {
    if (n == 0)
      clear();
    else
      mutable_vec().resize(n);
  }
  template <typename It>
  void assign(It first, It last) {
    assign(std::vector<T>(first, last));
  }
  void clear() { items_.reset(); }

  friend bool operator==(const RareVector& a, const RareVector& b) {
    return a.vec() == b.vec();
  }
  friend bool operator==(const RareVector& a, const std::vector<T>& b) {
    return a.vec() == b;
  }

 private:
  static const std::vector<T>& Empty() {
    static const std::vector<T>* const empty = new std::vector<T>();
    return *empty;
  }
  void assign(std::vector<T> v) {
    if (v.empty())
      items_.reset();
    else
      items_ = std::make_unique<std::vector<T>>(std::move(v));
  }
  std::unique_ptr<std::vector<T>> items_;  // null when empty
};

// What Shared<T> needs of its block where T may be incomplete (a Node, whose
// schema is a forward-declared OpSchema, is copied and destroyed all over):
// the count, and how to free the block.
struct SharedCount {
  static constexpr int64_t kLasting = -1;  // never counted, never freed
  std::atomic<int64_t> count;
  void (*free)(SharedCount*);
};

// A shared pointer to an immutable T in one word: the reference count sits
// beside the value (std::shared_ptr keeps a second pointer, to a control
// block). Every node holds two (its schema, its source location), so the
// word saved is paid for in every pass's walk over the nodes.
//
// A value made Lasting lives as long as the process and is never counted:
// copying or dropping a handle to it writes nothing. The registry's schemas
// are lasting, so import and copy insertion, which hand the same few schemas
// to every call, touch no shared count.
template <typename T>
class Shared {
 public:
  Shared() = default;
  Shared(std::nullptr_t) {}  // NOLINT: pointer-like
  template <typename... Args>
  static Shared Make(Args&&... args) {
    return Shared(New(1, std::forward<Args>(args)...));
  }
  template <typename... Args>
  static Shared Lasting(Args&&... args) {
    return Shared(New(SharedCount::kLasting, std::forward<Args>(args)...));
  }

  Shared(const Shared& other) : block_(other.block_) { Acquire(); }
  Shared(Shared&& other) noexcept : block_(other.block_) {
    other.block_ = nullptr;
  }
  Shared& operator=(const Shared& other) {
    Shared(other).swap(*this);
    return *this;
  }
  Shared& operator=(Shared&& other) noexcept {
    Shared(std::move(other)).swap(*this);
    return *this;
  }
  ~Shared() { Release(); }

  T* get() const {
    return block_ ? &static_cast<Block*>(block_)->value : nullptr;
  }
  T& operator*() const { return *get(); }
  T* operator->() const { return get(); }
  explicit operator bool() const { return block_ != nullptr; }
  void reset() { Shared().swap(*this); }
  void swap(Shared& other) noexcept { std::swap(block_, other.block_); }

  friend bool operator==(const Shared& a, const Shared& b) {
    return a.block_ == b.block_;
  }
  friend bool operator==(const Shared& a, std::nullptr_t) {
    return a.block_ == nullptr;
  }

 private:
  struct Block : SharedCount {
    T value;
  };
  template <typename... Args>
  static SharedCount* New(int64_t count, Args&&... args) {
    return new Block{{{count}, &Free}, T(std::forward<Args>(args)...)};
  }
  static void Free(SharedCount* block) { delete static_cast<Block*>(block); }

  explicit Shared(SharedCount* block) : block_(block) {}
  void Acquire() const {
    if (block_ &&
        block_->count.load(std::memory_order_relaxed) != SharedCount::kLasting)
      block_->count.fetch_add(1, std::memory_order_relaxed);
  }
  void Release() {
    if (block_ &&
        block_->count.load(std::memory_order_relaxed) !=
            SharedCount::kLasting &&
        block_->count.fetch_sub(1, std::memory_order_acq_rel) == 1)
      block_->free(block_);
  }
  SharedCount* block_ = nullptr;
};

}  // namespace ferry

#endif  // FERRY_PASSES_COMPACT_H_
