// Host kernels against PyTorch: every case of data/op_cases.txt (written by
// gen_op_cases.py with torch 1.13 on the CPU, checked in) runs its operator's
// host kernel and compares each output with PyTorch's, with the sim
// tolerances of the output's dtype (ToleranceFor); integers and bools
// exactly. Each case runs twice: with dense inputs, and with every tensor
// input stored with gaps (strides doubled, storage offset 3), so the
// kernels' strided reads are checked too. Outputs start poisoned, so an
// element a kernel leaves unwritten fails.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/host_kernels.h"
#include "runtime/ops/family.h"
#include "tests/runtime/test_util.h"
#include "tests/support/values.h"

namespace ferry {
namespace {

using testing::OwnedTensor;

struct TensorText {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> sizes;
  std::vector<double> values;
  bool compare = true;
};

struct ArgText {
  std::string
      kind;  // none, int, float, bool, ints, str, dtype, tensor, tensors
  double number = 0;
  std::vector<int64_t> ints;
  std::string text;
  DType dtype = DType::kInvalid;
  std::vector<TensorText> tensors;
};

struct OpCase {
  std::string name, op;
  std::vector<ArgText> args;
  std::vector<TensorText> outputs;
};

DType ParseDType(const std::string& s) {
  static const std::map<std::string, DType> kNames = {
      {"f32", DType::kF32},   {"f64", DType::kF64}, {"f16", DType::kF16},
      {"bf16", DType::kBF16}, {"i64", DType::kI64}, {"i32", DType::kI32},
      {"bool", DType::kBool}};
  auto it = kNames.find(s);
  return it == kNames.end() ? DType::kInvalid : it->second;
}

std::vector<int64_t> ParseInts(const std::string& s) {
  std::vector<int64_t> out;
  if (s == "-") return out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

// "DTYPE SIZES V V ..." or "DTYPE SIZES any".
TensorText ParseTensor(std::istringstream& in) {
  TensorText t;
  std::string dtype, sizes, word;
  in >> dtype >> sizes;
  t.dtype = ParseDType(dtype);
  t.sizes = ParseInts(sizes);
  while (in >> word) {
    if (word == "any") {
      t.compare = false;
      break;
    }
    t.values.push_back(word == "inf"    ? INFINITY
                       : word == "-inf" ? -INFINITY
                       : word == "nan"  ? NAN
                                        : std::stod(word));
  }
  return t;
}

std::vector<OpCase> LoadCases() {
  std::ifstream file(FERRY_OP_CASES);
  std::vector<OpCase> cases;
  std::string line;
  OpCase current;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string head;
    in >> head;
    if (head == "case") {
      current = OpCase();
      in >> current.name;
    } else if (head == "op") {
      in >> current.op;
    } else if (head == "arg") {
      ArgText a;
      in >> a.kind;
      if (a.kind == "int" || a.kind == "float" || a.kind == "bool") {
        std::string v;
        in >> v;
        a.number = v == "inf"    ? INFINITY
                   : v == "-inf" ? -INFINITY
                                 : std::stod(v);
      } else if (a.kind == "ints") {
        std::string v;
        in >> v;
        a.ints = ParseInts(v);
      } else if (a.kind == "str") {
        in >> a.text;
      } else if (a.kind == "dtype") {
        std::string v;
        in >> v;
        a.dtype = ParseDType(v);
      } else if (a.kind == "tensor") {
        a.tensors.push_back(ParseTensor(in));
      } else if (a.kind == "tensors") {
        int n = 0;
        in >> n;
        for (int i = 0; i < n && std::getline(file, line); ++i) {
          std::istringstream t(line);
          std::string word;
          t >> word;  // "tensor"
          a.tensors.push_back(ParseTensor(t));
        }
      }
      current.args.push_back(std::move(a));
    } else if (head == "out") {
      current.outputs.push_back(ParseTensor(in));
    } else if (head == "end") {
      cases.push_back(current);
    }
  }
  return cases;
}

const std::vector<OpCase>& Cases() {
  static const std::vector<OpCase>* const cases =
      new std::vector<OpCase>(LoadCases());
  return *cases;
}

std::vector<int64_t> GappedStrides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 2;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1) + 1;
  }
  return strides;
}

OwnedTensor Store(const TensorText& t, bool gapped) {
  if (!gapped) return testing::MakeTensor(t.dtype, t.sizes, t.values);
  return testing::MakeStrided(t.dtype, t.sizes, GappedStrides(t.sizes), 3,
                              t.values);
}

void RunCase(const OpCase& c, bool gapped) {
  SCOPED_TRACE(c.name + (gapped ? " (gapped inputs)" : " (dense inputs)"));
  std::vector<std::unique_ptr<OwnedTensor>> owned;
  std::vector<KernelArg> args;
  for (const ArgText& a : c.args) {
    if (a.kind == "none") {
      args.push_back(testing::NoneArg());
    } else if (a.kind == "int") {
      args.push_back(testing::IntArg(static_cast<int64_t>(a.number)));
    } else if (a.kind == "float") {
      args.push_back(testing::FloatArg(a.number));
    } else if (a.kind == "bool") {
      args.push_back(testing::BoolArg(a.number != 0));
    } else if (a.kind == "ints") {
      args.push_back(testing::IntsArg(a.ints));
    } else if (a.kind == "str") {
      args.push_back(testing::StringArg(a.text));
    } else if (a.kind == "dtype") {
      KernelArg k;
      k.kind = KernelArg::Kind::kDType;
      k.dtype = a.dtype;
      args.push_back(k);
    } else if (a.kind == "tensor") {
      owned.push_back(
          std::make_unique<OwnedTensor>(Store(a.tensors[0], gapped)));
      args.push_back(testing::TensorArg(*owned.back()));
    } else if (a.kind == "tensors") {
      std::vector<const OwnedTensor*> list;
      for (const TensorText& t : a.tensors) {
        owned.push_back(std::make_unique<OwnedTensor>(Store(t, gapped)));
        list.push_back(owned.back().get());
      }
      args.push_back(testing::ListArg(list));
    } else {
      FAIL() << "unknown argument kind " << a.kind;
    }
  }
  std::vector<std::unique_ptr<OwnedTensor>> outputs;
  std::vector<const OwnedTensor*> output_ptrs;
  for (const TensorText& o : c.outputs) {
    outputs.push_back(
        std::make_unique<OwnedTensor>(testing::MakeOutput(o.dtype, o.sizes)));
    // Poison: 0x7f bytes are a large finite float and a large integer.
    std::memset(outputs.back()->storage.data(), 0x7f,
                outputs.back()->storage.size() * sizeof(uint64_t));
    if (o.dtype == DType::kBool)
      std::memset(outputs.back()->storage.data(), 0,
                  outputs.back()->storage.size() * sizeof(uint64_t));
    output_ptrs.push_back(outputs.back().get());
  }
  ASSERT_NE(FindHostKernel(c.op), nullptr) << "no host kernel for " << c.op;
  absl::Status status = testing::RunKernel(c.op, args, output_ptrs);
  ASSERT_TRUE(status.ok()) << status;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const TensorText& want = c.outputs[i];
    if (!want.compare) continue;
    testing_util::ExpectAllClose(testing::Values(outputs[i]->view), want.values,
                                 want.dtype, "sim",
                                 c.op + " output " + std::to_string(i));
  }
}

TEST(OpCasesTest, DataFileHasCases) { EXPECT_GE(Cases().size(), 40u); }

TEST(OpCasesTest, HostKernelsMatchPyTorchDenseInputs) {
  for (const OpCase& c : Cases()) RunCase(c, false);
}

TEST(OpCasesTest, HostKernelsMatchPyTorchGappedInputs) {
  for (const OpCase& c : Cases()) RunCase(c, true);
}

// The BLAS convolution makes its im2col matrix a band of output rows at a
// time, of about 1 MiB: every case's matrix fits in one band. In bands of one
// output row, each convolution case still matches PyTorch.
TEST(OpCasesTest, ConvolutionsInBandsOfOneRowMatchPyTorch) {
  host::ConvolutionBandBytesForTesting one_row(1);
  int convolutions = 0;
  for (const OpCase& c : Cases()) {
    if (c.op != "aten::convolution") continue;
    RunCase(c, false);
    RunCase(c, true);
    ++convolutions;
  }
  EXPECT_GE(convolutions, 10);
}

// The operators the real-network models need, each with a PyTorch case.
TEST(OpCasesTest, EveryNetworkOperatorHasAPyTorchCase) {
  std::set<std::string> covered;
  for (const OpCase& c : Cases()) covered.insert(c.op);
  for (const char* op : {"aten::convolution",
                         "aten::native_batch_norm",
                         "aten::max_pool2d_with_indices",
                         "aten::hardtanh",
                         "aten::mean.dim",
                         "aten::addmm",
                         "aten::embedding",
                         "aten::native_layer_norm",
                         "aten::gelu",
                         "aten::_softmax",
                         "aten::_log_softmax",
                         "aten::arange",
                         "aten::arange.start",
                         "aten::arange.start_step",
                         "aten::ones",
                         "aten::triu",
                         "aten::masked_fill.Scalar",
                         "aten::cat",
                         "aten::_unsafe_view",
                         "aten::_native_multi_head_attention"})
    EXPECT_TRUE(covered.count(op)) << op;
}

// Known values where PyTorch's are unspecified or an error.
TEST(OpCasesTest, EmptyIsZeroFilled) {
  OwnedTensor out = testing::MakeOutput(DType::kF32, {2, 3});
  std::memset(out.storage.data(), 0x7f, out.storage.size() * 8);
  std::vector<KernelArg> args = {testing::IntsArg({2, 3}), testing::NoneArg(),
                                 testing::NoneArg(),       testing::NoneArg(),
                                 testing::NoneArg(),       testing::NoneArg()};
  ASSERT_TRUE(
      testing::RunKernel("aten::empty.memory_format", args, {&out}).ok());
  for (double v : testing::Values(out.view)) EXPECT_EQ(v, 0);
}

TEST(OpCasesTest, TransposedConvolutionIsUnimplemented) {
  OwnedTensor in =
      testing::MakeTensor(DType::kF32, {1, 1, 3, 3}, std::vector<double>(9, 1));
  OwnedTensor w =
      testing::MakeTensor(DType::kF32, {1, 1, 2, 2}, std::vector<double>(4, 1));
  OwnedTensor out = testing::MakeOutput(DType::kF32, {1, 1, 4, 4});
  std::vector<KernelArg> args = {
      testing::TensorArg(in),   testing::TensorArg(w),
      testing::NoneArg(),       testing::IntsArg({1, 1}),
      testing::IntsArg({0, 0}), testing::IntsArg({1, 1}),
      testing::BoolArg(true),   testing::IntsArg({0, 0}),
      testing::IntArg(1)};
  absl::Status status = testing::RunKernel("aten::convolution", args, {&out});
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_NE(status.message().find("transposed"), std::string::npos) << status;
}

TEST(OpCasesTest, ConvolutionWithAWrongOutputShapeIsAnError) {
  OwnedTensor in = testing::MakeTensor(DType::kF32, {1, 1, 8, 8},
                                       std::vector<double>(64, 1));
  OwnedTensor w = testing::MakeTensor(DType::kF32, {4, 1, 3, 3},
                                      std::vector<double>(36, 1));
  OwnedTensor out = testing::MakeOutput(DType::kF32, {1, 4, 5, 5});
  std::vector<KernelArg> args = {
      testing::TensorArg(in),   testing::TensorArg(w),
      testing::NoneArg(),       testing::IntsArg({1, 1}),
      testing::IntsArg({1, 1}), testing::IntsArg({1, 1}),
      testing::BoolArg(false),  testing::IntsArg({0, 0}),
      testing::IntArg(1)};
  absl::Status status = testing::RunKernel("aten::convolution", args, {&out});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(OpCasesTest, EmbeddingIndexOutOfRangeIsAnError) {
  OwnedTensor w =
      testing::MakeTensor(DType::kF32, {3, 2}, std::vector<double>(6, 1));
  OwnedTensor idx = testing::MakeTensor(DType::kI64, {2}, {0, 3});
  OwnedTensor out = testing::MakeOutput(DType::kF32, {2, 2});
  std::vector<KernelArg> args = {testing::TensorArg(w), testing::TensorArg(idx),
                                 testing::IntArg(-1), testing::BoolArg(false),
                                 testing::BoolArg(false)};
  absl::Status status = testing::RunKernel("aten::embedding", args, {&out});
  EXPECT_FALSE(status.ok());
}

}  // namespace
}  // namespace ferry
