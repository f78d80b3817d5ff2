// Import/export round trips, file formats and hostile input.
#include "passes/proto_io.h"

#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "passes/wire_writer.h"
#include "tests/support/files.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFile;

std::vector<fs::path> ProgramFiles() {
  std::vector<fs::path> files;
  const fs::path root(FERRY_SOURCE_DIR);
  for (const char* dir : {"examples", "tests/conformance"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      // expected_diagnostics.textproto holds a CheckReport, not a program.
      if (e.path().extension() == ".textproto" &&
          e.path().filename() != "expected_diagnostics.textproto")
        files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Reads one of ProgramFiles() (a request or a bare program).
bool ReadProgramFile(const fs::path& file, v1::LowerRequest* request) {
  bool bare = false;
  return ReadRequestFile(file.string(), FileFormat::kUnknown, request, &bare)
      .ok();
}

TEST(ProtoIo, EveryExampleAndTestProgramRoundTripsByteIdentically) {
  std::vector<fs::path> files = ProgramFiles();
  ASSERT_GT(files.size(), 50u);
  for (const fs::path& file : files) {
    v1::LowerRequest request;
    ASSERT_TRUE(ReadProgramFile(file, &request)) << file;
    Diagnostics d;
    Program program = ImportProgram(request.program(), d);
    if (d.HasErrors()) continue;  // the invalid-input cases
    v1::Program exported;
    ExportProgram(program, &exported);
    EXPECT_EQ(ToText(exported), ToText(request.program())) << file;
  }
}

// The consuming export (the service's) writes the same bytes as the const
// one, for every program that lowers, and leaves the program empty.
TEST(ProtoIo, ConsumingExportWritesTheSameBytesAndFreesTheProgram) {
  int lowered = 0;
  for (const fs::path& file : ProgramFiles()) {
    v1::LowerRequest request;
    ASSERT_TRUE(ReadProgramFile(file, &request)) << file;
    absl::StatusOr<LowerResult> result = Lower(request);
    if (!result.ok() || !result->ok) continue;
    ++lowered;
    v1::Program kept;
    ExportProgram(result->program, &kept);
    v1::Program consumed;
    ExportProgram(std::move(result->program), &consumed);
    EXPECT_EQ(SerializeProgram(consumed, FileFormat::kBinary),
              SerializeProgram(kept, FileFormat::kBinary))
        << file;
    EXPECT_EQ(ToText(consumed), ToText(kept)) << file;
    EXPECT_TRUE(result->program.methods.empty() &&
                result->program.modules.empty() &&
                result->program.constants.empty())
        << file;
  }
  EXPECT_GT(lowered, 30);
}

// The wire form written straight from the IR against the message's own
// serializer, for `program`: the const and the consuming writer, alone and as
// a field of an enclosing message.
void ExpectWireMatchesMessage(Program program, const std::string& what) {
  v1::Program message;
  ExportProgram(program, &message);
  const std::string expected = SerializeProgram(message, FileFormat::kBinary);

  std::string wire;
  ASSERT_TRUE(AppendProgramWire(program, wire).ok()) << what;
  EXPECT_EQ(wire, expected) << what;

  // As field 1 of a LowerRequest, appended after what `out` holds, with the
  // request's later field (its options) after it.
  v1::LowerRequest request;
  *request.mutable_program() = message;
  request.mutable_options()->set_error_on_per_call_copies(true);
  v1::LowerRequest options_only;
  *options_only.mutable_options() = request.options();
  std::string framed = "prefix";
  ASSERT_TRUE(
      AppendProgramWire(program, framed, 1, options_only.SerializeAsString())
          .ok())
      << what;
  EXPECT_EQ(framed, "prefix" + request.SerializeAsString()) << what;

  std::string consumed;
  ASSERT_TRUE(AppendProgramWire(std::move(program), consumed).ok()) << what;
  EXPECT_EQ(consumed, expected) << what;
  EXPECT_TRUE(program.methods.empty() && program.modules.empty() &&
              program.constants.empty())
      << what;
}

TEST(WireWriter, EveryProgramWritesTheMessagesBytes) {
  int lowered = 0;
  for (const fs::path& file : ProgramFiles()) {
    v1::LowerRequest request;
    ASSERT_TRUE(ReadProgramFile(file, &request)) << file;
    Diagnostics d;
    Program imported = ImportProgram(request.program(), d);
    if (!d.HasErrors()) ExpectWireMatchesMessage(std::move(imported), file);
    absl::StatusOr<LowerResult> result = Lower(request);
    if (!result.ok() || !result->ok) continue;
    ++lowered;
    ExpectWireMatchesMessage(std::move(result->program),
                             file.string() + " (lowered)");
  }
  EXPECT_GT(lowered, 30);
}

// Every field and oneof member, with the values proto3 leaves off the wire
// (zeros, empty strings) and those it writes all the same (a oneof member
// holding its default, an empty message that is set, `optional` bytes that
// are empty), and negative numbers (ten-byte varints).
TEST(WireWriter, EveryFieldAndDefaultIsWrittenAsTheMessageWritesIt) {
  Program p;
  Method& m = p.methods.emplace_back();
  m.name = "forward";
  auto add = [&](std::string name, NodeKind kind) -> Node& {
    Node& n = m.nodes.emplace_back();
    n.name = std::move(name);
    n.kind = kind;
    return n;
  };
  Node& in = add("x", NodeKind::kInput);
  in.input_kind = InputKind::kUserInput;
  in.result = ResultKind::kTensor;
  in.tensor.dtype = DType::kF32;
  in.tensor.sizes = {2, 0, -1};
  in.tensor.strides = {1, 1ll << 40, -3};
  in.tensor.storage_offset = -7;
  in.tensor.SetDevice(Device::Cuda(0));
  in.source = Shared<const SourceLocation>::Make(
      SourceLocation{.file = "m.py", .line = -2, .name = ""});
  Node& param = add("w", NodeKind::kInput);
  param.input_kind = InputKind::kParameter;
  param.target = "w_data";
  param.result = ResultKind::kTensor;
  param.tensor.dtype = DType::kInvalid;   // dtype 0: off the wire
  param.tensor.SetDevice(Device::Cpu());  // an empty but present device
  Node& constant = add("c", NodeKind::kConstant);
  constant.target = "c_data";
  constant.result = ResultKind::kScalar;
  constant.scalar = ScalarType::kInvalid;  // oneof member 0: written
  Node& call = add("t", NodeKind::kCall);
  call.target = "aten::foo";
  call.schema_text = "aten::foo(Tensor a) -> (Tensor, Tensor)";
  call.at_load = true;
  call.delegation_tag = "d0";
  std::vector<Argument>& args = call.args;
  args.push_back(Argument::Value(ValueId{0, -1}));
  args.push_back(Argument::Value(ValueId{0, 3}));
  args.back().name = "self";
  Argument list;
  list.kind = ArgKind::kValueList;
  list.values = std::vector<ValueId>{{0, -1}, {1, 0}, {2, 5}};
  args.push_back(list);
  // One argument of `kind` per value, the value stored by `set`.
  auto add_each = [&args](ArgKind kind, const auto& values, auto set) {
    for (const auto& v : values) {
      Argument a;
      a.kind = kind;
      set(a, v);
      args.push_back(std::move(a));
    }
  };
  add_each(ArgKind::kInt, std::vector<int64_t>{0, -1, int64_t{1} << 62},
           [](Argument& a, int64_t v) { a.int_value = v; });
  add_each(ArgKind::kFloat, std::vector<double>{0.0, -0.0, 2.5},
           [](Argument& a, double v) { a.float_value = v; });
  add_each(ArgKind::kBool, std::vector<bool>{false, true},
           [](Argument& a, bool v) { a.bool_value = v; });
  add_each(ArgKind::kDType, std::vector<DType>{DType::kInvalid, DType::kBF16},
           [](Argument& a, DType v) { a.dtype = v; });
  add_each(ArgKind::kString, std::vector<std::string>{"", "mean"},
           [](Argument& a, const std::string& v) { a.string_value = v; });
  Argument ints;
  ints.kind = ArgKind::kInts;
  args.push_back(ints);  // an empty list: an empty IntList
  ints.ints = std::vector<int64_t>{3, -4, 0};
  args.push_back(ints);
  Argument none;
  none.kind = ArgKind::kNone;
  none.name = "out";
  args.push_back(none);
  call.result = ResultKind::kTuple;
  TensorSpec planned;
  planned.dtype = DType::kI64;
  planned.sizes = {1, 2, 3, 4, 5, 6};  // past the inline four
  planned.memory =
      MemoryPlacement{.arena = 0, .planned = true, .offset = 0, .size = 4096};
  TensorSpec negative_memory;
  negative_memory.memory = MemoryPlacement{.arena = -1, .offset = -64};
  call.tuple = std::vector<TensorSpec>{planned, negative_memory};
  Node& item = add("t0", NodeKind::kGetItem);
  item.getitem_source = 3;
  item.getitem_index = 0;
  item.result = ResultKind::kTensor;
  Node& item_neg = add("", NodeKind::kGetItem);  // an empty name: off
  item_neg.getitem_source = 3;
  item_neg.getitem_index = -1;
  Node& delegate = add("d", NodeKind::kDelegate);
  delegate.target = "m0";
  Node& out = add("out", NodeKind::kOutput);
  out.args.push_back(Argument::Value(ValueId{4, -1}));
  out.args.push_back(Argument::Value(ValueId{3, 1}));
  add("out2", NodeKind::kOutput);  // no values: an empty OutputNode
  m.arenas.push_back(
      Arena{.device = Device::Cuda(3), .size = 0, .lower_bound = -5});
  m.arenas.push_back(Arena{});
  m.lowered_with = LoweredWith{.enable_non_cpu_memory_planning = false,
                               .constant_staging = 1};
  p.methods.emplace_back().name = "";  // an empty method is still written
  p.methods.back().lowered_with = LoweredWith{};

  Constant& with_data = p.constants.emplace_back();
  with_data.name = "w_data";
  with_data.data = "";  // present and empty: written
  with_data.seed = ~uint64_t{0};
  Constant& by_digest = p.constants.emplace_back();
  by_digest.name = "c_data";
  by_digest.spec.dtype = DType::kU8;
  by_digest.data_digest = BlobRef{.hash = "ab", .size_bytes = -1};
  p.constants.emplace_back();  // nothing set

  LoweredModule& module = p.modules.emplace_back();
  module.id = "m0";
  module.backend = kCudaBackendId;
  module.compile_specs.push_back({"target_device", "cuda:0"});
  module.compile_specs.push_back({"", ""});
  module.graph.name = "m0_graph";
  Node& graph_in = module.graph.nodes.emplace_back();
  graph_in.name = "a";
  graph_in.kind = NodeKind::kInput;
  graph_in.input_kind = InputKind::kMutableBuffer;
  module.input_layouts.emplace_back();
  module.input_layouts.push_back(planned);
  module.returns_tuple = true;
  p.modules.emplace_back();  // nothing set

  ExpectWireMatchesMessage(std::move(p), "hand-built");
}

// The writer leaves room for each nested length before it knows it (a byte
// for a node's parts; more for a method, by its node count) and moves the
// contents when the length needs more or fewer bytes. Lengths that need two,
// three and four bytes where one was expected, a method far shorter than its
// node count suggests, and output far beyond the writer's first guess.
TEST(WireWriter,
     LengthsWiderOrNarrowerThanExpectedAreWrittenAsTheMessageWritesThem) {
  Program p;
  Method& m = p.methods.emplace_back();
  m.name = "forward";
  for (size_t length : {127, 128, 16383, 16384, 2097152}) {
    Node& n = m.nodes.emplace_back();
    n.name = std::string(length, 'n');  // the node's length needs more bytes
    n.kind = NodeKind::kInput;
    n.input_kind = InputKind::kUserInput;
    n.result = ResultKind::kTensor;
    n.tensor.dtype = DType::kF32;
    n.tensor.sizes = Dims(length % 300, 1);  // a packed list of that many
    n.source = Shared<const SourceLocation>::Make(SourceLocation{
        .file = std::string(length, 'f'), .line = 1, .name = "m"});
  }
  // A method of empty nodes: less than a byte each, where the writer
  // expects tens.
  Method& sparse = p.methods.emplace_back();
  sparse.name = "sparse";
  sparse.nodes.resize(3000);
  // A constant whose data is far longer than its node count suggests.
  Constant& big = p.constants.emplace_back();
  big.name = "big";
  big.data = std::string(300000, 'd');
  ExpectWireMatchesMessage(std::move(p), "lengths");
}

TEST(ProtoIo, EveryDTypeMapsToTheWireAndBack) {
  // Each IR dtype has a wire value of its own that reads back as it.
  std::set<int> wire;
  for (int d = 0; d <= static_cast<int>(kLastDType); ++d) {
    const DType dtype = static_cast<DType>(d);
    const v1::DType proto = DTypeToProto(dtype);
    EXPECT_TRUE(v1::DType_IsValid(proto)) << DTypeName(dtype);
    // The same name on both sides ("f32" is F32).
    const std::string name =
        dtype == DType::kInvalid
            ? "DTYPE_UNSPECIFIED"
            : absl::AsciiStrToUpper(std::string(DTypeName(dtype)));
    EXPECT_EQ(v1::DType_Name(proto), name);
    EXPECT_EQ(DTypeFromProto(proto), dtype) << DTypeName(dtype);
    wire.insert(proto);
  }
  EXPECT_EQ(static_cast<int>(wire.size()), v1::DType_ARRAYSIZE);
  // Values the wire does not define are invalid.
  EXPECT_EQ(DTypeFromProto(-1), DType::kInvalid);
  EXPECT_EQ(DTypeFromProto(v1::DType_ARRAYSIZE), DType::kInvalid);
}

TEST(ProtoIo, BinaryAndJsonReadBackTheSameRequest) {
  const fs::path file = fs::path(FERRY_SOURCE_DIR) /
                        "tests/conformance/B1_transposed_parameter/"
                        "request.textproto";
  v1::LowerRequest request;
  bool bare = true;
  ASSERT_TRUE(
      ReadRequestFile(file.string(), FileFormat::kUnknown, &request, &bare)
          .ok());
  EXPECT_FALSE(bare);
  std::string binary;
  ASSERT_TRUE(request.SerializeToString(&binary));
  v1::LowerRequest from_binary;
  ASSERT_TRUE(
      ParseRequest(binary, FileFormat::kBinary, "b", &from_binary, &bare).ok());
  EXPECT_FALSE(bare);
  EXPECT_EQ(ToText(from_binary), ToText(request));
  // A bare program in binary form.
  std::string program_binary =
      SerializeProgram(request.program(), FileFormat::kBinary);
  ASSERT_TRUE(ParseRequest(program_binary, FileFormat::kBinary, "p",
                           &from_binary, &bare)
                  .ok());
  EXPECT_TRUE(bare);
  EXPECT_EQ(ToText(from_binary.program()), ToText(request.program()));
  std::string json = SerializeProgram(request.program(), FileFormat::kJson);
  ASSERT_TRUE(
      ParseRequest(json, FileFormat::kJson, "j", &from_binary, &bare).ok());
  EXPECT_TRUE(bare);
  EXPECT_EQ(ToText(from_binary.program()), ToText(request.program()));
}

TEST(ProtoIo, HostileInputIsAnErrorNotACrash) {
  v1::LowerRequest request;
  bool bare = false;
  EXPECT_FALSE(ParseRequest("", FileFormat::kText, "e", &request, &bare).ok());
  EXPECT_FALSE(
      ParseRequest("  \n", FileFormat::kJson, "e", &request, &bare).ok());
  EXPECT_FALSE(ParseRequest("program { methods {", FileFormat::kText, "t",
                            &request, &bare)
                   .ok());
  std::string valid =
      ReadFile(fs::path(FERRY_SOURCE_DIR) / "examples/two_delegates.textproto");
  v1::LowerRequest parsed;
  ASSERT_TRUE(ParseRequest(valid, FileFormat::kText, "v", &parsed, &bare).ok());
  std::string binary;
  parsed.SerializeToString(&binary);
  // Every truncation and random garbage: parse or fail, then lower or
  // report, never crash.
  std::mt19937 rng(7);
  for (size_t cut = 1; cut < binary.size(); cut += 7) {
    std::string truncated = binary.substr(0, cut);
    if (ParseRequest(truncated, FileFormat::kBinary, "cut", &request, &bare)
            .ok())
      (void)Lower(request);
  }
  for (int round = 0; round < 300; ++round) {
    std::string garbage = binary;
    for (int k = 0; k < 4; ++k)
      garbage[rng() % garbage.size()] = static_cast<char>(rng());
    if (ParseRequest(garbage, FileFormat::kBinary, "g", &request, &bare).ok())
      (void)Lower(request);
  }
}

}  // namespace
}  // namespace ferry
