#include "tests/deploy/mini_yaml.h"

#include <cstdlib>

namespace ferry::testing {
namespace {

struct Line {
  int indent = 0;
  std::string text;  // without indentation and comment
  int number = 0;    // 1-based, for errors
};

std::string Trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

// Removes a comment: '#' at the start or after a space, outside quotes.
std::string StripComment(const std::string& text) {
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || text[i - 1] == ' ')) {
      return text.substr(0, i);
    }
  }
  return text;
}

// The ':' that separates a key from its value: outside quotes and followed
// by a space or the end of the text.
size_t MappingColon(const std::string& text) {
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if ((c == '"' || c == '\'') && i == 0) {
      quote = c;
    } else if (c == ':' && (i + 1 == text.size() || text[i + 1] == ' ')) {
      return i;
    }
  }
  return std::string::npos;
}

std::string Unquote(const std::string& text) {
  if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < text.size(); ++i) {
      out.push_back(text[i]);
      if (text[i] == '\'' && text[i + 1] == '\'') ++i;
    }
    return out;
  }
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < text.size(); ++i) {
      if (text[i] == '\\' && i + 2 < text.size()) {
        char next = text[++i];
        out.push_back(next == 'n' ? '\n' : next == 't' ? '\t' : next);
      } else {
        out.push_back(text[i]);
      }
    }
    return out;
  }
  return text;
}

bool IsListItem(const std::string& text) {
  return text == "-" || text.rfind("- ", 0) == 0;
}

absl::Status Error(const Line& line, const std::string& what) {
  return absl::InvalidArgumentError("line " + std::to_string(line.number) +
                                    ": " + what + ": '" + line.text + "'");
}

class Parser {
 public:
  explicit Parser(std::vector<Line> lines) : lines_(std::move(lines)) {}

  absl::StatusOr<Yaml> Document() {
    Yaml document;
    if (lines_.empty()) return document;
    if (absl::Status status = Block(&document); !status.ok()) return status;
    if (pos_ < lines_.size()) {
      return Error(lines_[pos_], "unexpected indentation");
    }
    return document;
  }

 private:
  absl::Status Block(Yaml* out) {
    if (pos_ >= lines_.size()) return absl::OkStatus();
    const Line& line = lines_[pos_];
    return IsListItem(line.text) ? List(line.indent, out)
                                 : Map(line.indent, out);
  }

  absl::Status Map(int indent, Yaml* out) {
    out->kind = Yaml::Kind::kMap;
    while (pos_ < lines_.size() && lines_[pos_].indent == indent &&
           !IsListItem(lines_[pos_].text)) {
      const Line line = lines_[pos_];
      size_t colon = MappingColon(line.text);
      if (colon == std::string::npos)
        return Error(line, "expected 'key: value'");
      std::string key = Unquote(Trim(line.text.substr(0, colon)));
      std::string rest = Trim(line.text.substr(colon + 1));
      ++pos_;
      Yaml value;
      if (!rest.empty()) {
        if (absl::Status status = Inline(line, rest, &value); !status.ok()) {
          return status;
        }
      } else if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
        if (absl::Status status = Block(&value); !status.ok()) return status;
      } else if (pos_ < lines_.size() && lines_[pos_].indent == indent &&
                 IsListItem(lines_[pos_].text)) {
        // kubectl style: the sequence at its key's indentation.
        if (absl::Status status = List(indent, &value); !status.ok()) {
          return status;
        }
      }
      out->map.emplace_back(std::move(key), std::move(value));
    }
    if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
      return Error(lines_[pos_], "unexpected indentation");
    }
    return absl::OkStatus();
  }

  absl::Status List(int indent, Yaml* out) {
    out->kind = Yaml::Kind::kList;
    while (pos_ < lines_.size() && lines_[pos_].indent == indent &&
           IsListItem(lines_[pos_].text)) {
      Line& line = lines_[pos_];
      std::string after_dash = line.text.size() > 1 ? line.text.substr(2) : "";
      std::string rest = Trim(after_dash);
      Yaml item;
      if (rest.empty()) {
        ++pos_;
        if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
          if (absl::Status status = Block(&item); !status.ok()) return status;
        }
      } else if (IsListItem(rest) ||
                 (MappingColon(rest) != std::string::npos &&
                  rest.front() != '[' && rest.front() != '{')) {
        // The item is a block whose first line shares the dash's line:
        // re-read that line at the item's own indentation.
        int item_indent =
            indent + 2 + static_cast<int>(after_dash.find_first_not_of(' '));
        line.indent = item_indent;
        line.text = rest;
        if (absl::Status status = Block(&item); !status.ok()) return status;
      } else {
        const Line copy = line;
        ++pos_;
        if (absl::Status status = Inline(copy, rest, &item); !status.ok()) {
          return status;
        }
      }
      out->list.push_back(std::move(item));
    }
    return absl::OkStatus();
  }

  // A value on the same line as its key or dash.
  absl::Status Inline(const Line& line, const std::string& text, Yaml* out) {
    if (text == "|" || text == ">" || text == "|-" || text == ">-" ||
        text == "|+" || text == ">+") {
      out->kind = Yaml::Kind::kScalar;
      bool literal = text[0] == '|';
      int first_indent = -1;
      while (pos_ < lines_.size() && lines_[pos_].indent > line.indent) {
        const Line& part = lines_[pos_];
        if (first_indent < 0) first_indent = part.indent;
        if (!out->scalar.empty()) out->scalar.push_back(literal ? '\n' : ' ');
        out->scalar += std::string(part.indent - first_indent, ' ') + part.text;
        ++pos_;
      }
      return absl::OkStatus();
    }
    if (text.front() == '&' || text.front() == '*' || text.front() == '!') {
      return Error(line, "anchors, aliases and tags are not supported");
    }
    if (text == "{}") {
      out->kind = Yaml::Kind::kMap;
      return absl::OkStatus();
    }
    if (text.front() == '{')
      return Error(line, "flow mappings are not supported");
    if (text.front() == '[') {
      if (text.back() != ']') return Error(line, "unterminated flow sequence");
      out->kind = Yaml::Kind::kList;
      std::string inner = Trim(text.substr(1, text.size() - 2));
      if (inner.empty()) return absl::OkStatus();
      std::string item;
      char quote = 0;
      for (char c : inner + ",") {
        if (quote != 0) {
          if (c == quote) quote = 0;
          item.push_back(c);
        } else if (c == '"' || c == '\'') {
          quote = c;
          item.push_back(c);
        } else if (c == ',') {
          Yaml element;
          element.kind = Yaml::Kind::kScalar;
          element.scalar = Unquote(Trim(item));
          out->list.push_back(std::move(element));
          item.clear();
        } else {
          item.push_back(c);
        }
      }
      return absl::OkStatus();
    }
    out->kind = Yaml::Kind::kScalar;
    out->scalar = Unquote(text);
    return absl::OkStatus();
  }

  std::vector<Line> lines_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Yaml>> ParseYamlDocuments(std::string_view text) {
  std::vector<std::vector<Line>> documents(1);
  int number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string raw(text.substr(start, end - start));
    start = end + 1;
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    size_t first = raw.find_first_not_of(' ');
    if (first != std::string::npos && raw[first] == '\t') {
      return absl::InvalidArgumentError("line " + std::to_string(number) +
                                        ": tab indentation");
    }
    std::string content = StripComment(raw);
    std::string trimmed = Trim(content);
    if (trimmed.empty()) continue;
    if (trimmed == "---" || trimmed == "...") {
      if (!documents.back().empty()) documents.emplace_back();
      continue;
    }
    Line line;
    line.indent = static_cast<int>(content.find_first_not_of(' '));
    line.text = Trim(content);
    line.number = number;
    documents.back().push_back(std::move(line));
    if (end == text.size()) break;
  }
  std::vector<Yaml> parsed;
  for (std::vector<Line>& lines : documents) {
    if (lines.empty()) continue;
    absl::StatusOr<Yaml> document = Parser(std::move(lines)).Document();
    if (!document.ok()) return document.status();
    parsed.push_back(*std::move(document));
  }
  return parsed;
}

const Yaml* Yaml::Find(std::string_view path) const {
  const Yaml* node = this;
  size_t start = 0;
  while (node != nullptr && start < path.size()) {
    size_t end = path.find_first_of(".[", start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) {
      std::string key(path.substr(start, end - start));
      const Yaml* next = nullptr;
      if (node->kind == Kind::kMap) {
        for (const auto& [name, value] : node->map) {
          if (name == key) next = &value;
        }
      }
      node = next;
    }
    start = end;
    if (node != nullptr && start < path.size() && path[start] == '[') {
      size_t close = path.find(']', start);
      size_t index = std::strtoul(
          std::string(path.substr(start + 1, close - start - 1)).c_str(),
          nullptr, 10);
      node = node->kind == Kind::kList && index < node->list.size()
                 ? &node->list[index]
                 : nullptr;
      start = close + 1;
    }
    if (start < path.size() && path[start] == '.') ++start;
  }
  return node;
}

std::string Yaml::Str(std::string_view path) const {
  const Yaml* node = Find(path);
  return node != nullptr && node->kind == Kind::kScalar ? node->scalar : "";
}

}  // namespace ferry::testing
