// Prints docs/operators.md, generated from the operator catalogue:
//   build/bin/ferry_operators_doc > docs/operators.md
#include <cstdio>
#include <string>

#include "passes/ops/catalogue.h"

int main() {
  std::string text = ferry::OperatorsMarkdown();
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
