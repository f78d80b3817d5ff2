// A recursive-descent parser of ATen's function-schema notation.
//
// Grammar (whitespace may separate any two tokens):
//
//   schema    := qualname '(' [param (',' param)*] ')' '->' returns
//   qualname  := ident '::' ident ['.' ident]
//   param     := '*' | type ident ['=' default]
//   returns   := ret | '(' [ret (',' ret)*] ')'
//   ret       := type [ident]
//   type      := ident [alias] ('[' [digits] ']' | '?')*
//   alias     := '(' sets ['!'] ['->' sets] ')'      sets := set ('|' set)*
//   default   := number | 'True' | 'False' | 'None' | ident | string
//              | '[' [default (',' default)*] ']'
//
// `*` makes the parameters after it keyword-only. An alias annotation applies
// to a Tensor (or a list of them, `Tensor(a!)[]`); `Tensor(a -> *)` is read as
// alias set "a". A result's alias set (other than `*`) must be some
// parameter's, and a written result (`Tensor(a!)`) must be a written
// parameter's: `Tensor(a) x -> Tensor(b)` is an error. A default is checked
// against its parameter's type (None needs an optional type, a float cannot
// default an int, ...) and kept as text.
//
// The overload name "default" is the default overload and is stored as "".
// `-> (Tensor)` is the same as `-> Tensor` (as in ATen): a schema returns a
// tuple only with two or more returns; `-> ()` returns nothing.
//
// The parser never fails on bad input other than with InvalidArgument: every
// read is bounds-checked, and recursion (nested list defaults) is bounded.
#include "passes/schema.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace ferry {
namespace {

// Nested list defaults deeper than this are refused (ATen has none deeper
// than one level); it bounds the parser's recursion.
constexpr int kMaxDefaultNesting = 8;
// Fixed list sizes above this are refused.
constexpr int64_t kMaxFixedListSize = 1 << 20;

bool IsIdentifierStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsIdentifierChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

// What a base type name means, and what a list of it is.
struct BaseType {
  absl::string_view name;
  SchemaTypeKind kind;
  SchemaTypeKind list_kind;
};

constexpr BaseType kBaseTypes[] = {
    {"Tensor", SchemaTypeKind::kTensor, SchemaTypeKind::kTensorList},
    {"int", SchemaTypeKind::kInt, SchemaTypeKind::kIntList},
    {"SymInt", SchemaTypeKind::kInt, SchemaTypeKind::kIntList},
    {"float", SchemaTypeKind::kFloat, SchemaTypeKind::kFloatList},
    {"bool", SchemaTypeKind::kBool, SchemaTypeKind::kBoolList},
    {"Scalar", SchemaTypeKind::kScalar, SchemaTypeKind::kAny},
    {"str", SchemaTypeKind::kString, SchemaTypeKind::kAny},
    {"ScalarType", SchemaTypeKind::kScalarType, SchemaTypeKind::kAny},
    {"Layout", SchemaTypeKind::kLayout, SchemaTypeKind::kAny},
    {"Device", SchemaTypeKind::kDevice, SchemaTypeKind::kAny},
    {"MemoryFormat", SchemaTypeKind::kMemoryFormat, SchemaTypeKind::kAny},
    // Types ATen allows that Ferry only passes through.
    {"Generator", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"Dimname", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"Storage", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"Stream", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"QScheme", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"complex", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
    {"Any", SchemaTypeKind::kAny, SchemaTypeKind::kAny},
};

const BaseType* FindBaseType(absl::string_view name) {
  for (const BaseType& base : kBaseTypes) {
    if (base.name == name) return &base;
  }
  return nullptr;
}

// The category of a parsed default value, for checking it against the type.
enum class DefaultKind { kNone, kBool, kInt, kFloat, kString, kIdent, kList };

class SchemaParser {
 public:
  explicit SchemaParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<OpSchema> Parse() {
    OpSchema schema;
    if (absl::Status s = ParseQualifiedName(schema); !s.ok()) return s;
    if (absl::Status s = ParseParameters(schema); !s.ok()) return s;
    SkipSpace();
    if (!ConsumeText("->")) return Expected("'->' after the parameters");
    if (absl::Status s = ParseReturns(schema); !s.ok()) return s;
    SkipSpace();
    if (!AtEnd()) return Expected("the end of the schema after the returns");
    schema.DeriveAliasFacts();
    return schema;
  }

 private:
  // --- Names ----------------------------------------------------------------

  absl::Status ParseQualifiedName(OpSchema& schema) {
    SkipSpace();
    schema.ns = std::string(Identifier());
    if (schema.ns.empty()) return Expected("a namespace such as 'aten'");
    if (!ConsumeText("::")) {
      return Expected(
          absl::StrCat("'::' after the namespace '", schema.ns, "'"));
    }
    schema.name = std::string(Identifier());
    if (schema.name.empty()) return Expected("an operator name after '::'");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      schema.overload = std::string(Identifier());
      if (schema.overload.empty()) {
        return Expected("an overload name after '.'");
      }
      if (schema.overload == "default") schema.overload.clear();
    }
    return absl::OkStatus();
  }

  // --- Parameters -----------------------------------------------------------

  absl::Status ParseParameters(OpSchema& schema) {
    SkipSpace();
    if (!Consume('(')) return Expected("'(' to open the parameters");
    SkipSpace();
    if (Consume(')')) return absl::OkStatus();
    bool kwarg_only = false;
    while (true) {
      SkipSpace();
      size_t start = pos_;
      if (Consume('*')) {
        if (kwarg_only)
          return ErrorAt(start, "unexpected second '*' in the parameters");
        kwarg_only = true;
      } else {
        SchemaArgument argument;
        argument.kwarg_only = kwarg_only;
        if (absl::Status s = ParseParameter(argument); !s.ok()) return s;
        if (schema.ArgumentIndex(argument.name) >= 0) {
          return ErrorAt(start, absl::StrCat("duplicate parameter name '",
                                             argument.name, "'"));
        }
        schema.arguments.push_back(std::move(argument));
      }
      SkipSpace();
      if (Consume(')')) break;
      if (!Consume(',')) return Expected("',' or ')' after a parameter");
    }
    if (kwarg_only &&
        (schema.arguments.empty() || !schema.arguments.back().kwarg_only)) {
      return ErrorAt(pos_ - 1, "expected a parameter after '*', found ')'");
    }
    return absl::OkStatus();
  }

  absl::Status ParseParameter(SchemaArgument& argument) {
    SkipSpace();
    size_t type_start = pos_;
    if (absl::Status s = ParseType(argument); !s.ok()) return s;
    absl::string_view type_text = absl::StripTrailingAsciiWhitespace(
        text_.substr(type_start, pos_ - type_start));
    SkipSpace();
    argument.name = std::string(Identifier());
    if (argument.name.empty()) return Expected("a parameter name");
    SkipSpace();
    if (Consume('=')) {
      std::string text;
      if (absl::Status s = ParseDefault(argument.type, type_text, text);
          !s.ok()) {
        return s;
      }
      argument.default_value = std::move(text);
    }
    return absl::OkStatus();
  }

  // --- Returns --------------------------------------------------------------

  absl::Status ParseReturns(OpSchema& schema) {
    SkipSpace();
    if (Consume('(')) {
      SkipSpace();
      if (!Consume(')')) {
        while (true) {
          SchemaArgument result;
          if (absl::Status s = ParseReturn(result, schema); !s.ok()) return s;
          schema.returns.push_back(std::move(result));
          SkipSpace();
          if (Consume(')')) break;
          if (!Consume(',')) return Expected("',' or ')' after a return");
        }
      }
    } else {
      SchemaArgument result;
      if (absl::Status s = ParseReturn(result, schema); !s.ok()) return s;
      schema.returns.push_back(std::move(result));
    }
    schema.returns_tuple = schema.returns.size() >= 2;
    return absl::OkStatus();
  }

  absl::Status ParseReturn(SchemaArgument& result, const OpSchema& schema) {
    SkipSpace();
    size_t start = pos_;
    if (absl::Status s = ParseType(result); !s.ok()) return s;
    if (absl::Status s = CheckReturnAlias(result, schema, start); !s.ok()) {
      return s;
    }
    SkipSpace();
    result.name = std::string(Identifier());
    return absl::OkStatus();
  }

  // A result's alias set names the storage it shares, so some parameter must
  // carry that set: `Tensor(a) x -> Tensor(b)` says the result aliases
  // storage no argument has. A written result (`Tensor(a!)`) is the written
  // argument, so that parameter must be written too (`Tensor(a!) x`). The
  // wildcard `*` may alias anything and is not checked.
  static absl::Status CheckReturnAlias(const SchemaArgument& result,
                                       const OpSchema& schema, size_t start) {
    if (!result.alias.has_value() || result.alias->set == "*") {
      return absl::OkStatus();
    }
    const AliasInfo& alias = *result.alias;
    const SchemaArgument* owner = nullptr;
    for (const SchemaArgument& argument : schema.arguments) {
      if (argument.alias.has_value() && argument.alias->set == alias.set) {
        owner = &argument;
        break;
      }
    }
    if (owner == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column ", start + 1, ": return ", schema.returns.size(),
          " is in alias set '", alias.set,
          "', which no parameter has: a result can only alias an argument"));
    }
    if (alias.is_write && !owner->alias->is_write) {
      return absl::InvalidArgumentError(absl::StrCat(
          "column ", start + 1, ": return ", schema.returns.size(),
          " is written (alias set '", alias.set, "!'), but parameter '",
          owner->name, "' of that set is not (write it 'Tensor(", alias.set,
          "!) ", owner->name, "')"));
    }
    return absl::OkStatus();
  }

  // --- Types ----------------------------------------------------------------

  absl::Status ParseType(SchemaArgument& argument) {
    SkipSpace();
    size_t start = pos_;
    absl::string_view name = Identifier();
    if (name.empty()) return Expected("a type");
    const BaseType* base = FindBaseType(name);
    if (base == nullptr) {
      return ErrorAt(start, absl::StrCat("unknown type '", name, "'"));
    }
    SchemaType& type = argument.type;
    type.kind = base->kind;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '(') {
      if (base->kind != SchemaTypeKind::kTensor) {
        return ErrorAt(pos_, absl::StrCat("unexpected alias annotation on '",
                                          name, "': only Tensor values alias"));
      }
      std::optional<AliasInfo> alias;
      if (absl::Status s = ParseAlias(alias); !s.ok()) return s;
      argument.alias = std::move(alias);
    }
    bool is_list = false;
    while (true) {
      SkipSpace();
      size_t suffix = pos_;
      if (Consume('[')) {
        if (is_list) return ErrorAt(suffix, "unsupported list of lists");
        is_list = true;
        type.kind = base->list_kind;
        type.optional = false;  // `Tensor?[]`: the elements are optional.
        SkipSpace();
        if (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) {
          size_t digits = pos_;
          while (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) {
            ++pos_;
          }
          int64_t size = 0;
          if (!absl::SimpleAtoi(text_.substr(digits, pos_ - digits), &size) ||
              size > kMaxFixedListSize) {
            return ErrorAt(digits, "list size too large");
          }
          type.fixed_size = static_cast<int>(size);
          SkipSpace();
        }
        if (!Consume(']')) return Expected("']' to close the list type");
      } else if (Consume('?')) {
        if (type.optional) return ErrorAt(suffix, "unexpected second '?'");
        type.optional = true;
      } else {
        break;
      }
    }
    return absl::OkStatus();
  }

  // At '('. Reads `(a)`, `(a!)`, `(a -> *)`, `(a|b!)`, ...
  absl::Status ParseAlias(std::optional<AliasInfo>& alias) {
    Consume('(');
    AliasInfo info;
    if (absl::Status s = ParseAliasSets(info.set); !s.ok()) return s;
    SkipSpace();
    if (Consume('!')) info.is_write = true;
    SkipSpace();
    if (ConsumeText("->")) {
      std::string after;
      if (absl::Status s = ParseAliasSets(after); !s.ok()) return s;
      SkipSpace();
    }
    if (!Consume(')')) {
      return Expected("')' to close the alias annotation");
    }
    alias = std::move(info);
    return absl::OkStatus();
  }

  absl::Status ParseAliasSets(std::string& sets) {
    while (true) {
      SkipSpace();
      if (Consume('*')) {
        sets += '*';
      } else {
        absl::string_view set = Identifier();
        if (set.empty()) return Expected("an alias set such as 'a'");
        absl::StrAppend(&sets, set);
      }
      SkipSpace();
      if (!Consume('|')) return absl::OkStatus();
      sets += '|';
    }
  }

  // --- Defaults -------------------------------------------------------------

  absl::Status ParseDefault(const SchemaType& type, absl::string_view type_text,
                            std::string& text) {
    SkipSpace();
    size_t start = pos_;
    DefaultKind kind;
    std::vector<DefaultKind> elements;
    if (absl::Status s = ParseDefaultValue(0, kind, &elements); !s.ok()) {
      return s;
    }
    text = std::string(
        absl::StripTrailingAsciiWhitespace(text_.substr(start, pos_ - start)));
    return CheckDefault(type, type_text, kind, elements, start, text);
  }

  // `elements` (may be null) receives the kinds of a list's elements.
  absl::Status ParseDefaultValue(int depth, DefaultKind& kind,
                                 std::vector<DefaultKind>* elements) {
    SkipSpace();
    if (AtEnd()) return Expected("a default value");
    char c = text_[pos_];
    if (c == '[') {
      if (depth >= kMaxDefaultNesting) {
        return ErrorAt(pos_, "default value nested too deeply");
      }
      ++pos_;
      kind = DefaultKind::kList;
      SkipSpace();
      if (Consume(']')) return absl::OkStatus();
      while (true) {
        DefaultKind element;
        if (absl::Status s = ParseDefaultValue(depth + 1, element, nullptr);
            !s.ok()) {
          return s;
        }
        if (elements != nullptr) elements->push_back(element);
        SkipSpace();
        if (Consume(']')) return absl::OkStatus();
        if (!Consume(',')) return Expected("',' or ']' in a list default");
      }
    }
    if (c == '\'' || c == '"') return ParseStringLiteral(kind);
    if (c == '-' || c == '+' || c == '.' || absl::ascii_isdigit(c)) {
      return ParseNumber(kind);
    }
    absl::string_view word = Identifier();
    if (word.empty()) return Expected("a default value");
    if (word == "None") {
      kind = DefaultKind::kNone;
    } else if (word == "True" || word == "False") {
      kind = DefaultKind::kBool;
    } else if (word == "inf" || word == "nan") {
      kind = DefaultKind::kFloat;
    } else {
      kind = DefaultKind::kIdent;  // contiguous_format, Mean, long, ...
    }
    return absl::OkStatus();
  }

  absl::Status ParseStringLiteral(DefaultKind& kind) {
    size_t start = pos_;
    char quote = text_[pos_++];
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') ++pos_;  // The escaped character is skipped.
      ++pos_;
    }
    if (pos_ >= text_.size()) {
      return ErrorAt(start, "unterminated string literal");
    }
    ++pos_;
    kind = DefaultKind::kString;
    return absl::OkStatus();
  }

  absl::Status ParseNumber(DefaultKind& kind) {
    size_t start = pos_;
    if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
    if (text_.substr(pos_, 3) == "inf") {
      pos_ += 3;
      kind = DefaultKind::kFloat;
      return absl::OkStatus();
    }
    size_t digits = CountDigits();
    bool is_float = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      is_float = true;
      digits += CountDigits();
    }
    if (digits == 0) return ErrorAt(start, "expected digits in the number");
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      is_float = true;
      if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) {
        ++pos_;
      }
      if (CountDigits() == 0) {
        return ErrorAt(start, "expected digits in the exponent of the number");
      }
    }
    if (pos_ < text_.size() && IsIdentifierChar(text_[pos_])) {
      return Expected("the end of the number");
    }
    if (!is_float) {
      int64_t value = 0;
      if (!absl::SimpleAtoi(text_.substr(start, pos_ - start), &value)) {
        return ErrorAt(start, "integer default does not fit in int64");
      }
    }
    kind = is_float ? DefaultKind::kFloat : DefaultKind::kInt;
    return absl::OkStatus();
  }

  size_t CountDigits() {
    size_t start = pos_;
    while (pos_ < text_.size() && absl::ascii_isdigit(text_[pos_])) ++pos_;
    return pos_ - start;
  }

  // Whether a scalar default of `kind` can initialise a value of `type_kind`
  // (ignoring optionality).
  static bool ScalarDefaultFits(DefaultKind kind, SchemaTypeKind type_kind,
                                int fixed_size) {
    using K = SchemaTypeKind;
    if (type_kind == K::kAny) return true;
    switch (kind) {
      case DefaultKind::kNone:
        return false;
      case DefaultKind::kBool:
        return type_kind == K::kBool || type_kind == K::kScalar ||
               (type_kind == K::kBoolList && fixed_size > 0);
      case DefaultKind::kInt:
        // `int[2] stride=1` repeats the value, as ATen does.
        return type_kind == K::kInt || type_kind == K::kFloat ||
               type_kind == K::kScalar ||
               ((type_kind == K::kIntList || type_kind == K::kFloatList) &&
                fixed_size > 0);
      case DefaultKind::kFloat:
        return type_kind == K::kFloat || type_kind == K::kScalar ||
               (type_kind == K::kFloatList && fixed_size > 0);
      case DefaultKind::kString:
        return type_kind == K::kString || type_kind == K::kDevice;
      case DefaultKind::kIdent:
        // Enumerators: `MemoryFormat memory_format=contiguous_format`,
        // `int reduction=Mean`, `ScalarType dtype=long`.
        return type_kind == K::kScalarType || type_kind == K::kLayout ||
               type_kind == K::kMemoryFormat || type_kind == K::kDevice ||
               type_kind == K::kInt;
      case DefaultKind::kList:
        return false;
    }
    return false;
  }

  absl::Status CheckDefault(const SchemaType& type, absl::string_view type_text,
                            DefaultKind kind,
                            const std::vector<DefaultKind>& elements,
                            size_t start, absl::string_view text) {
    using K = SchemaTypeKind;
    auto mismatch = [&]() {
      return ErrorAt(start,
                     absl::StrCat("default '", text, "' does not fit type '",
                                  type_text, "'"));
    };
    if (kind == DefaultKind::kNone) {
      if (type.optional || type.kind == K::kAny) return absl::OkStatus();
      return ErrorAt(start, absl::StrCat("default None needs an optional "
                                         "type, not '",
                                         type_text, "'"));
    }
    if (kind != DefaultKind::kList) {
      if (ScalarDefaultFits(kind, type.kind, type.fixed_size)) {
        return absl::OkStatus();
      }
      return mismatch();
    }
    K element_kind;
    switch (type.kind) {
      case K::kIntList:
        element_kind = K::kInt;
        break;
      case K::kFloatList:
        element_kind = K::kFloat;
        break;
      case K::kBoolList:
        element_kind = K::kBool;
        break;
      case K::kAny:
        return absl::OkStatus();
      case K::kTensorList:
        // Only the empty list can default a Tensor list.
        if (elements.empty()) return absl::OkStatus();
        return mismatch();
      default:
        return mismatch();
    }
    for (DefaultKind element : elements) {
      if (!ScalarDefaultFits(element, element_kind, -1)) return mismatch();
    }
    if (type.fixed_size >= 0 && !elements.empty() &&
        static_cast<int64_t>(elements.size()) != type.fixed_size) {
      return ErrorAt(start,
                     absl::StrCat("default '", text, "' has ", elements.size(),
                                  " elements, for type '", type_text, "'"));
    }
    return absl::OkStatus();
  }

  // --- Lexing ---------------------------------------------------------------

  bool AtEnd() const { return pos_ >= text_.size(); }

  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(text_[pos_])) ++pos_;
  }

  // Consumes `c` at the current position (no whitespace skipped).
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool ConsumeText(absl::string_view token) {
    if (text_.substr(pos_, token.size()) == token) {
      pos_ += token.size();
      return true;
    }
    return false;
  }

  // Reads an identifier at the current position; empty if there is none.
  absl::string_view Identifier() {
    if (pos_ >= text_.size() || !IsIdentifierStart(text_[pos_])) return {};
    size_t start = pos_;
    while (pos_ < text_.size() && IsIdentifierChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // What is at the current position, for messages.
  std::string Found() const {
    if (AtEnd()) return "the end of the schema";
    char c = text_[pos_];
    if (IsIdentifierStart(c)) {
      size_t end = pos_;
      while (end < text_.size() && IsIdentifierChar(text_[end])) ++end;
      return absl::StrCat("'", text_.substr(pos_, end - pos_), "'");
    }
    if (absl::ascii_isgraph(c))
      return absl::StrCat("'", std::string(1, c), "'");
    if (c == ' ') return "' '";
    return absl::StrFormat("byte 0x%02x", static_cast<unsigned char>(c));
  }

  absl::Status Expected(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "column ", pos_ + 1, ": expected ", what, ", found ", Found()));
  }

  absl::Status ErrorAt(size_t pos, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("column ", pos + 1, ": ", what));
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string OpSchema::QualifiedName() const {
  if (overload.empty()) return absl::StrCat(ns, "::", name);
  return absl::StrCat(ns, "::", name, ".", overload);
}

void OpSchema::DeriveAliasFacts() {
  written_.clear();
  annotated_ = false;
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    if (!arguments[i].alias.has_value()) continue;
    annotated_ = true;
    if (arguments[i].alias->is_write) written_.push_back(i);
  }
  result_aliases_.assign(returns.size(), -1);
  for (size_t r = 0; r < returns.size(); ++r) {
    const std::optional<AliasInfo>& alias = returns[r].alias;
    // A wildcard result may alias anything; no one argument is its storage.
    if (!alias.has_value() || alias->set == "*") continue;
    for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
      if (arguments[i].alias.has_value() &&
          arguments[i].alias->set == alias->set) {
        result_aliases_[r] = i;
        break;
      }
    }
  }
}

int OpSchema::ArgumentIndex(std::string_view argument_name) const {
  for (int i = 0; i < static_cast<int>(arguments.size()); ++i) {
    if (arguments[i].name == argument_name) return i;
  }
  return -1;
}

absl::StatusOr<OpSchema> ParseSchema(std::string_view text) {
  return SchemaParser(absl::string_view(text.data(), text.size())).Parse();
}

namespace {

bool SameType(const SchemaType& a, const SchemaType& b) {
  return a.kind == b.kind && a.optional == b.optional &&
         a.fixed_size == b.fixed_size;
}

bool SameAlias(const std::optional<AliasInfo>& a,
               const std::optional<AliasInfo>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a.has_value() || (a->set == b->set && a->is_write == b->is_write);
}

// A default's text with string quotes spelled one way ('none' == "none").
std::optional<std::string> NormalizedDefault(
    const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::string normalized = *text;
  std::replace(normalized.begin(), normalized.end(), '"', '\'');
  return normalized;
}

}  // namespace

bool SameSchema(const OpSchema& a, const OpSchema& b) {
  if (a.QualifiedName() != b.QualifiedName() ||
      a.arguments.size() != b.arguments.size() ||
      a.returns.size() != b.returns.size() ||
      a.returns_tuple != b.returns_tuple) {
    return false;
  }
  for (size_t i = 0; i < a.arguments.size(); ++i) {
    const SchemaArgument& x = a.arguments[i];
    const SchemaArgument& y = b.arguments[i];
    if (x.name != y.name || !SameType(x.type, y.type) ||
        !SameAlias(x.alias, y.alias) || x.kwarg_only != y.kwarg_only ||
        NormalizedDefault(x.default_value) !=
            NormalizedDefault(y.default_value)) {
      return false;
    }
  }
  for (size_t i = 0; i < a.returns.size(); ++i) {
    if (!SameType(a.returns[i].type, b.returns[i].type) ||
        !SameAlias(a.returns[i].alias, b.returns[i].alias)) {
      return false;
    }
  }
  return true;
}

}  // namespace ferry
