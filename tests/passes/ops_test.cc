// The operator catalogue: every family row is registered with its rule,
// docs/operators.md is what the catalogue generates, and a wrong declared
// shape of a new operator is an error naming the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "passes/diagnostic_codes.h"
#include "passes/diagnostics.h"
#include "passes/ops/catalogue.h"
#include "passes/schema.h"
#include "passes/validate.h"
#include "tests/support/files.h"
#include "tests/support/programs.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

TEST(CatalogueTest, EveryRowIsRegisteredOnceWithItsFamilyAndRule) {
  std::set<std::string> names;
  size_t rows = 0;
  for (const OpFamily& family : OpFamilies()) {
    SCOPED_TRACE(std::string(family.name));
    EXPECT_FALSE(family.ops.empty());
    for (const OpDef& op : family.ops) {
      ++rows;
      absl::StatusOr<OpSchema> schema = ParseSchema(op.schema);
      ASSERT_TRUE(schema.ok()) << op.schema << ": " << schema.status();
      std::string name = schema->QualifiedName();
      EXPECT_TRUE(names.insert(name).second) << name << " appears twice";
      const OpInfo* info = LookupOp(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->family, family.name) << name;
      EXPECT_EQ(info->rule, op.rule) << name;
      EXPECT_EQ(info->shape_rule, op.kind) << name;
      EXPECT_NE(op.rule, nullptr) << name << " has no shape rule";
    }
  }
  EXPECT_EQ(RegisteredOps().size(), rows);
}

// docs/operators.md is generated (build/bin/ferry_operators_doc); this
// fails when the checked-in file differs from what the catalogue says.
TEST(OperatorsDocTest, CheckedInFileIsCurrent) {
  const std::string text =
      testing_util::ReadFile(FERRY_SOURCE_DIR "/docs/operators.md");
  ASSERT_FALSE(text.empty()) << "docs/operators.md is missing";
  EXPECT_EQ(text, OperatorsMarkdown())
      << "docs/operators.md is stale: run build/bin/ferry_operators_doc > "
         "docs/operators.md";
}

TEST(OperatorsDocTest, ListsEveryRegisteredOperator) {
  std::string text = OperatorsMarkdown();
  for (const std::string& name : RegisteredOps()) {
    EXPECT_THAT(text, HasSubstr("| `" + name + "` |"));
  }
  EXPECT_THAT(text, HasSubstr("## Adding an operator"));
}

// The issue's case: a convolution declared [1,4,5,5] where it computes
// [1,4,8,8] fails `ferry check` (validation) naming the node, whether the
// node carries its ATen schema (as the frontend sent it before the registry
// knew convolution, when this passed) or not.
class ConvolutionCheckTest : public ::testing::TestWithParam<bool> {};

TEST_P(ConvolutionCheckTest, WrongDeclaredShapeIsAShapeMismatch) {
  std::string schema =
      GetParam() ? "schema: 'aten::convolution(Tensor input, Tensor weight, "
                   "Tensor? bias, int[] stride, int[] padding, int[] "
                   "dilation, bool transposed, int[] output_padding, int "
                   "groups) -> Tensor'"
                 : "";
  const std::string text =
      R"pb(
        methods { name: "forward"
                  nodes {
                    name: "x"
                    input { kind: USER_INPUT }
                    tensor {
                      dtype: F32
                      sizes: [ 1, 3, 8, 8 ]
                    }
                  }
                  nodes {
                    name: "w"
                    input { kind: PARAMETER target: "w" }
                    tensor {
                      dtype: F32
                      sizes: [ 4, 3, 3, 3 ]
                    }
                  }
                  nodes { name: "conv"
                          call { op: "aten::convolution"
                                 args { value: "x" }
                                 args { value: "w" }
                                 args { none {} }
                                 args { ints { values: [ 1, 1 ] } }
                                 args { ints { values: [ 1, 1 ] } }
                                 args { ints { values: [ 1, 1 ] } }
                                 args { bool_value: false }
                                 args { ints { values: [ 0, 0 ] } }
                                 args { int_value: 1 }
      )pb" +
      schema + R"pb(
    }
    tensor { dtype: F32 sizes: [ 1, 4, 5, 5 ] }
      }
      nodes {
        name: "out"
        output { values { value: "conv" } }
      }
    }
    constants {
      name: "w"
      spec { dtype: F32 sizes: [ 4, 3, 3, 3 ] }
    }
  )pb";
  Program program = testing_util::ParseProgramUnvalidated(text);
  Diagnostics diagnostics;
  EXPECT_FALSE(ValidateProgram(program, diagnostics));
  bool found = false;
  for (const Diagnostic& d : diagnostics.items()) {
    if (d.code != codes::kShapeMismatch) continue;
    found = true;
    ASSERT_FALSE(d.nodes.empty());
    EXPECT_EQ(d.nodes[0], "conv");
    EXPECT_THAT(d.message, HasSubstr("[1,4,8,8]"));
    EXPECT_THAT(d.message, HasSubstr("[1,4,5,5]"));
  }
  EXPECT_TRUE(found) << FormatDiagnosticsText(diagnostics, "conv");
}

// split's list result is a tuple node; each piece is checked.
TEST(SplitCheckTest, WrongDeclaredPieceIsAShapeMismatch) {
  const std::string text = R"pb(
    methods {
      name: "forward"
      nodes {
        name: "x"
        input { kind: USER_INPUT }
        tensor {
          dtype: F32
          sizes: [ 5, 4 ]
        }
      }
      nodes {
        name: "parts"
        call {
          op: "aten::split.Tensor"
          args { value: "x" }
          args { int_value: 2 }
        }
        tuple {
          elements {
            dtype: F32
            sizes: [ 2, 4 ]
          }
          elements {
            dtype: F32
            sizes: [ 2, 4 ]
            storage_offset: 8
          }
          elements {
            dtype: F32
            sizes: [ 2, 4 ]
            storage_offset: 16
          }
        }
      }
      nodes {
        name: "out"
        output { values { element { node: "parts" index: 0 } } }
      }
    }
  )pb";
  Program program = testing_util::ParseProgramUnvalidated(text);
  Diagnostics diagnostics;
  EXPECT_FALSE(ValidateProgram(program, diagnostics));
  ASSERT_FALSE(diagnostics.items().empty());
  const Diagnostic& d = diagnostics.items()[0];
  EXPECT_EQ(d.code, codes::kShapeMismatch)
      << FormatDiagnosticsText(diagnostics, "split");
  EXPECT_EQ(d.nodes[0], "parts");
  EXPECT_THAT(d.message, HasSubstr("[1,4]"));
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutSchema, ConvolutionCheckTest,
                         ::testing::Bool());

}  // namespace
}  // namespace ferry
