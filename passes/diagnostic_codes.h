// Stable diagnostic codes. Each is documented in docs/diagnostics.md; a code
// never changes meaning once released. E = error, W = warning.
#ifndef FERRY_PASSES_DIAGNOSTIC_CODES_H_
#define FERRY_PASSES_DIAGNOSTIC_CODES_H_

namespace ferry::codes {

// --- Structure (import)
// --------------------------------------------------------
inline constexpr char kEmptyName[] = "FERRY-E0100";
inline constexpr char kDuplicateName[] = "FERRY-E0101";
inline constexpr char kDanglingReference[] = "FERRY-E0102";
inline constexpr char kForwardReference[] =
    "FERRY-E0103";  // cycle / not topological
inline constexpr char kMissingOutput[] = "FERRY-E0104";
inline constexpr char kOutputNotLast[] = "FERRY-E0105";
inline constexpr char kGetItemOfNonTuple[] = "FERRY-E0106";
inline constexpr char kTupleIndexOutOfRange[] = "FERRY-E0107";
inline constexpr char kMissingModule[] = "FERRY-E0108";
inline constexpr char kMissingConstant[] = "FERRY-E0109";
inline constexpr char kUnknownOperator[] = "FERRY-E0110";
inline constexpr char kBadSchema[] = "FERRY-E0111";
inline constexpr char kMissingNodeKind[] = "FERRY-E0112";
inline constexpr char kBadResult[] =
    "FERRY-E0113";  // result kind missing / wrong for the node
inline constexpr char kBadInputKind[] = "FERRY-E0114";
inline constexpr char kNoMethods[] = "FERRY-E0115";
inline constexpr char kTupleUsedAsValue[] =
    "FERRY-E0116";  // whole tuple where a tensor is needed
inline constexpr char kOutputNotAValue[] =
    "FERRY-E0117";  // an output argument that names no value

// --- Tensor specs
// -------------------------------------------------------------
inline constexpr char kBadDType[] = "FERRY-E0201";
inline constexpr char kBadStrides[] = "FERRY-E0202";  // rank mismatch, negative
inline constexpr char kBadSizes[] = "FERRY-E0203";    // negative size
inline constexpr char kSpecOverflow[] = "FERRY-E0204";
inline constexpr char kOutsideStorage[] =
    "FERRY-E0205";  // constant data too small / wrong size
inline constexpr char kBadDevice[] = "FERRY-E0206";
inline constexpr char kConstantLayout[] =
    "FERRY-E0207";  // node reads a constant in another layout
inline constexpr char kBadPlacement[] =
    "FERRY-E0208";  // memory placement outside its arena
inline constexpr char kBadBlobRef[] =
    "FERRY-E0209";  // data_digest malformed, of the wrong size, or with data

// --- Operator schemas and shapes
// ---------------------------------------------------
inline constexpr char kArity[] = "FERRY-E0301";
inline constexpr char kArgumentType[] = "FERRY-E0302";
inline constexpr char kShapeMismatch[] = "FERRY-E0303";
inline constexpr char kDTypeMismatch[] = "FERRY-E0304";
inline constexpr char kResultCount[] = "FERRY-E0305";
inline constexpr char kScalarFromDataOp[] =
    "FERRY-E0306";  // scalar result of a non-metadata op

// --- Lowered modules
// ------------------------------------------------------------
inline constexpr char kBadTargetDevice[] = "FERRY-E0401";
inline constexpr char kDelegateArity[] = "FERRY-E0402";
inline constexpr char kDelegateResult[] =
    "FERRY-E0403";  // returns_tuple vs node result
inline constexpr char kBadModule[] = "FERRY-E0404";  // subgraph problems
inline constexpr char kDuplicateModule[] = "FERRY-E0405";
inline constexpr char kModuleCycle[] =
    "FERRY-E0406";  // a module calls itself, directly or not
inline constexpr char kModuleNestingTooDeep[] = "FERRY-E0407";
inline constexpr char kModuleExpansionTooLarge[] =
    "FERRY-E0408";  // nodes instantiated by delegate calls
inline constexpr char kModuleOutputNotTensor[] = "FERRY-E0409";
inline constexpr char kDelegateLayout[] =
    "FERRY-E0410";  // argument laid out unlike input_layouts
inline constexpr char kNestedDelegateDevice[] =
    "FERRY-E0411";  // nested delegate on another device
inline constexpr char kCopyInDeviceModule[] =
    "FERRY-E0412";  // et_copy inside a device module

// --- Options
// ----------------------------------------------------------------------
inline constexpr char kBadOption[] = "FERRY-E0501";
inline constexpr char kUnknownMethodOverride[] = "FERRY-W0502";

// --- normalize_layout
// ---------------------------------------------------------------
inline constexpr char kLayoutNormalized[] = "FERRY-W0601";

// --- partition / lower
// --------------------------------------------------------------
inline constexpr char kPartitionCycle[] = "FERRY-E0701";
inline constexpr char kPartitionUnsupported[] = "FERRY-E0702";
inline constexpr char kSchemaDiffersFromRegistry[] =
    "FERRY-W0703";  // node schema != registry's

// --- place_and_copy
// -------------------------------------------------------------------
inline constexpr char kPerCallConstantCopy[] =
    "FERRY-W0801";  // constant copied every call
inline constexpr char kPerCallConstantCopyError[] = "FERRY-E0801";
inline constexpr char kInputSharedD2H[] =
    "FERRY-W0802";  // skip_h2d input read elsewhere
inline constexpr char kInputSharedD2HError[] = "FERRY-E0802";
inline constexpr char kOutputFromHost[] =
    "FERRY-W0803";  // skip_d2h output written on host
inline constexpr char kOutputFromHostError[] = "FERRY-E0803";
inline constexpr char kInputWrittenOnHost[] =
    "FERRY-E0804";  // skip_h2d input written in place
inline constexpr char kConstantLayoutRefused[] =
    "FERRY-E0805";  // non-dense constant to device

// --- plan_memory
// ------------------------------------------------------------------------
inline constexpr char kPlanFailed[] = "FERRY-E0901";

}  // namespace ferry::codes

#endif  // FERRY_PASSES_DIAGNOSTIC_CODES_H_
