// The capability partitioner claims only what the target backend runs
// (LowerOptions::backend_operators), narrowed by the request's allow/deny
// lists; a node carrying the registry's own schema is the registry's
// operator, one carrying another schema for a registered name is not.
#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/lower.h"
#include "passes/partition.h"
#include "passes/place_and_copy.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

constexpr char kCapability[] = "partitioner { kind: BY_CAPABILITY }";

std::string Tag(const Program& p, const std::string& node) {
  const Method& m = p.methods[0];
  return m.nodes[Find(m, node)].delegation_tag;
}

// Partitions `p` with the options in text form; fails the test on errors.
void PartitionCleanly(Program& p, const std::string& options) {
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions(options, p), d).ok());
  EXPECT_FALSE(d.HasErrors()) << FormatDiagnosticsText(d, "test");
}

// sin -> relu_ (in place) -> cos: the residual-block shape of a CNN.
std::string InPlaceBetweenOps() {
  return MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}) +
                             Call("r", "aten::relu_", {"t"}) +
                             Call("u", "aten::cos", {"t"}) + Output({"u"}));
}

TEST(Capability, EverythingSupportedIsOnePartition) {
  Program p = ParseProgram(InPlaceBetweenOps());
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions(kCapability, p), d).ok());
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "r"), "partition_0");
  EXPECT_EQ(Tag(p, "u"), "partition_0");
}

// The request denies relu_: it stays on the host between two device
// partitions, and place_and_copy copies the host-written t back to the
// device after the write (the seed's defect 2, in a real network's shape).
TEST(Capability, DeniedInPlaceOperatorStaysOnHostBetweenPartitions) {
  Program p = ParseProgram(InPlaceBetweenOps());
  LowerOptions options = ParseOptions(
      "partitioner { kind: BY_CAPABILITY deny_operators: 'aten::relu_' }", p);
  Diagnostics d;
  ASSERT_TRUE(Partition(p, options, d).ok());
  EXPECT_FALSE(d.HasErrors());
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "r"), "");
  EXPECT_EQ(Tag(p, "u"), "partition_1");
  ASSERT_TRUE(LowerPartitions(p, options, d).ok());
  ASSERT_TRUE(PlaceAndCopy(p, options, d).ok());
  ASSERT_FALSE(d.HasErrors());
  const Method& m = p.methods[0];
  EXPECT_EQ(NodeNames(m),
            "a a_to_cuda0 delegate_partition_0 t t_to_cpu r t_to_cuda0_v1 "
            "delegate_partition_1 u u_to_cpu output");
  // The second delegate reads a fresh H2D of the value relu_ wrote, made
  // after the write.
  EXPECT_EQ(ArgsOf(m, "r"), "t_to_cpu");
  EXPECT_EQ(ArgsOf(m, "t_to_cuda0_v1"), "t_to_cpu");
  EXPECT_EQ(ArgsOf(m, "delegate_partition_1"), "t_to_cuda0_v1");
}

// relu_ of a method input: a delegate cannot write its input, so the write
// stays on the host and the output is the written value (a fuzz finding:
// the partition swallowed the write and the output was the unwritten input).
TEST(Capability, InPlaceWriteOfAMethodInputStaysOnHost) {
  Program p = ParseProgram(MethodText(
      "f", Input("t") + Call("r", "aten::relu_", {"t"}) + Output({"t"})));
  PartitionCleanly(p, kCapability);
  EXPECT_EQ(Tag(p, "r"), "");
}

// sin on the device, a host reader of t, then relu_(t): relu_ must follow the
// host reader, so it cannot join partition_0, and a new partition would
// write t, its input. It stays on the host; cos opens a new partition.
TEST(Capability, InPlaceWriteAfterAHostReaderStaysOnHost) {
  Program p = ParseProgram(MethodText(
      "f", Input("a") + Call("t", "aten::sin", {"a"}) +
               Call("h", "aten::neg", {"t"}) + Call("r", "aten::relu_", {"t"}) +
               Call("u", "aten::cos", {"t"}) + Output({"u", "h"})));
  PartitionCleanly(
      p, "partitioner { kind: BY_CAPABILITY deny_operators: 'aten::neg' }");
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "h"), "");
  EXPECT_EQ(Tag(p, "r"), "");
  EXPECT_EQ(Tag(p, "u"), "partition_1");
}

// A view made inside a partition and read outside it would leave as a copy;
// a later host write of its storage would not reach the copy. With relu_
// denied (host), the view stays on the host, an alias of the delegate's t.
std::string ViewOfStorageWrittenLater(const std::string& tag) {
  return MethodText(
      "f", Input("a") + Call("t", "aten::sin", {"a"}, tag) +
               "nodes { name: 'v' call { op: 'aten::transpose.int' args { "
               "value: 't' } args { int_value: 0 } args { int_value: 1 } } "
               "tensor { dtype: F32 sizes: [4, 4] strides: [1, 4] } " +
               (tag.empty() ? "" : "delegation_tag: '" + tag + "' ") + "} " +
               Call("r", "aten::relu_", {"t"}) + Output({"v"}));
}

TEST(Capability, AliasReadOutsideItsPartitionOfStorageWrittenLaterStaysOnHost) {
  Program p = ParseProgram(ViewOfStorageWrittenLater(""));
  PartitionCleanly(
      p, "partitioner { kind: BY_CAPABILITY deny_operators: 'aten::relu_' }");
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "v"), "");
  EXPECT_EQ(Tag(p, "r"), "");
}

TEST(Capability, TaggedAliasOfStorageWrittenLaterIsAnError) {
  Program p = ParseProgram(ViewOfStorageWrittenLater("p"));
  Diagnostics d;
  ASSERT_TRUE(Partition(p,
                        ParseOptions("partitioner { tag_targets { key: 'p' "
                                     "value: 'cuda:0' } }",
                                     p),
                        d)
                  .ok());
  ASSERT_EQ(d.error_count(), 1) << FormatDiagnosticsText(d, "test");
  for (const Diagnostic& item : d.items()) {
    if (item.severity != Severity::kError) continue;
    EXPECT_EQ(item.code, codes::kPartitionUnsupported);
    EXPECT_EQ(item.nodes[0], "v");
  }
}

TEST(Capability, AllowListClaimsOnlyThoseOperators) {
  Program p = ParseProgram(InPlaceBetweenOps());
  LowerOptions options = ParseOptions(
      "partitioner { kind: BY_CAPABILITY allow_operators: 'aten::cos' "
      "allow_operators: 'aten::sin.default' }",
      p);
  EXPECT_EQ(options.allow_operators,
            (std::vector<std::string>{"aten::cos", "aten::sin"}));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, options, d).ok());
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "r"), "");
  EXPECT_EQ(Tag(p, "u"), "partition_1");
}

TEST(Capability, UnknownOperatorInAListIsABadOption) {
  Program p = ParseProgram(InPlaceBetweenOps());
  v1::LowerOptions proto;
  proto.mutable_partitioner()->add_deny_operators("aten::no_such_op");
  Diagnostics d;
  ResolveOptions(proto, p, d);
  ASSERT_TRUE(d.HasErrors());
  EXPECT_EQ(d.items()[0].code, codes::kBadOption);
  EXPECT_EQ(d.items()[0].message,
            "partitioner.deny_operators: unknown operator 'aten::no_such_op'");
}

// The backend declares what it runs; nothing else is claimed for it.
TEST(Capability, ClaimsOnlyWhatTheTargetBackendDeclares) {
  Program p = ParseProgram(InPlaceBetweenOps());
  LowerOptions options = ParseOptions(kCapability, p);
  options.backend_operators.by_backend = {
      {"FerryCudaBackend", {"aten::cos", "aten::sin"}},
      {"OtherBackend", {"aten::relu_"}}};
  Diagnostics d;
  ASSERT_TRUE(Partition(p, options, d).ok());
  EXPECT_EQ(Tag(p, "t"), "partition_0");
  EXPECT_EQ(Tag(p, "r"), "");
  EXPECT_EQ(Tag(p, "u"), "partition_1");
  // The same program for the backend that runs only relu_.
  Program q = ParseProgram(InPlaceBetweenOps());
  options.partition_backend = "OtherBackend";
  ASSERT_TRUE(Partition(q, options, d).ok());
  EXPECT_EQ(Tag(q, "t"), "");
  EXPECT_EQ(Tag(q, "u"), "");
}

TEST(Capability, TagOnAnOperatorTheBackendDoesNotRunIsAnError) {
  Program p = ParseProgram(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                          Call("u", "aten::cos", {"t"}, "d0") + Output({"u"})));
  LowerOptions options = ParseOptions("", p);
  options.backend_operators.by_backend = {{"FerryCudaBackend", {"aten::sin"}}};
  Diagnostics d;
  ASSERT_TRUE(Partition(p, options, d).ok());
  ASSERT_TRUE(d.HasErrors());
  EXPECT_EQ(d.items()[0].code, codes::kPartitionUnsupported);
  EXPECT_EQ(d.items()[0].nodes[0], "u");
  EXPECT_EQ(d.items()[0].message,
            "backend 'FerryCudaBackend' does not run operator 'aten::cos' "
            "(tag 'd0')");
}

// A call that carries exactly the registry's schema (as the frontend sends
// with --schemas=always) is the registry's operator and is delegated.
TEST(Capability, RegistrySchemaOnTheNodeIsTheRegistryOperator) {
  Program p = ParseProgram(MethodText(
      "f", Input("a") +
               "nodes { name: 't' call { op: 'aten::gelu' args { value: 'a' } "
               "schema: 'aten::gelu(Tensor self, *, str approximate=\"none\") "
               "-> Tensor' } tensor { dtype: F32 sizes: 4 sizes: 4 } }\n" +
               Output({"t"})));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions(kCapability, p), d).ok());
  EXPECT_TRUE(d.items().empty());
  EXPECT_EQ(Tag(p, "t"), "partition_0");
}

// Another schema for a registered name: a custom operator, on the host,
// with a warning naming the node.
TEST(Capability, DifferentSchemaForARegisteredNameStaysOnHost) {
  Program p = ParseProgram(MethodText(
      "f", Input("a") +
               "nodes { name: 't' call { op: 'aten::sin' args { value: 'a' } "
               "args { int_value: 2 } schema: 'aten::sin(Tensor self, int k) "
               "-> Tensor' } tensor { dtype: F32 sizes: 4 sizes: 4 } }\n" +
               Output({"t"})));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions(kCapability, p), d).ok());
  EXPECT_FALSE(d.HasErrors());
  ASSERT_EQ(d.items().size(), 1u);
  EXPECT_EQ(d.items()[0].code, codes::kSchemaDiffersFromRegistry);
  EXPECT_EQ(d.items()[0].nodes[0], "t");
  EXPECT_EQ(Tag(p, "t"), "");
}

}  // namespace
}  // namespace ferry
