#include "ferry/digest.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <openssl/evp.h>

#include <memory>

#include "absl/strings/ascii.h"

namespace ferry {
namespace {

class Sha256 {
 public:
  Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr);
  }
  void Update(absl::string_view bytes) {
    EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size());
  }
  std::string HexDigest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_size = 0;
    EVP_DigestFinal_ex(context_.get(), digest, &digest_size);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(2 * digest_size);
    for (unsigned int i = 0; i < digest_size; ++i) {
      hex.push_back(kHex[digest[i] >> 4]);
      hex.push_back(kHex[digest[i] & 0xf]);
    }
    return hex;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

}  // namespace

namespace {

// A part's length, as Sha256Hex puts it before the part: 8 bytes, little
// endian.
void UpdateWithLength(Sha256& sha, uint64_t size) {
  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(size >> (8 * i));
  sha.Update(absl::string_view(length, sizeof(length)));
}

}  // namespace

std::string Sha256Hex(const std::vector<absl::string_view>& parts) {
  Sha256 sha;
  for (absl::string_view part : parts) {
    UpdateWithLength(sha, part.size());
    sha.Update(part);
  }
  return sha.HexDigest();
}

std::string Sha256HexOf(absl::string_view bytes) {
  Sha256 sha;
  sha.Update(bytes);
  return sha.HexDigest();
}

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return bytes;
}

std::string LowerRequestDigest(const v1::LowerRequest& request,
                               absl::string_view compiler_version) {
  return Sha256Hex({"ferry.v1.Compiler/Lower", compiler_version,
                    DeterministicBytes(request)});
}

std::string LowerRequestDigest(const v1::LowerRequest& rest,
                               std::optional<std::string_view> program,
                               absl::string_view compiler_version) {
  // The request's deterministic form, without writing it out: its program
  // (field 1, length-delimited: tag 0x0a, then the length as a varint) comes
  // first, then the rest's fields in number order, then unknown fields.
  std::string head;
  if (program) {
    head.push_back('\x0a');
    for (uint64_t n = program->size();; n >>= 7) {
      if (n < 0x80) {
        head.push_back(static_cast<char>(n));
        break;
      }
      head.push_back(static_cast<char>((n & 0x7f) | 0x80));
    }
  }
  const std::string tail = DeterministicBytes(rest);
  const absl::string_view body =
      program ? absl::string_view(program->data(), program->size())
              : absl::string_view();
  Sha256 sha;
  for (absl::string_view part :
       {absl::string_view("ferry.v1.Compiler/Lower"), compiler_version}) {
    UpdateWithLength(sha, part.size());
    sha.Update(part);
  }
  UpdateWithLength(sha, head.size() + body.size() + tail.size());
  sha.Update(head);
  sha.Update(body);
  sha.Update(tail);
  return sha.HexDigest();
}

v1::Digest BlobDigestOf(absl::string_view bytes) {
  v1::Digest digest;
  digest.set_hash(Sha256HexOf(bytes));
  digest.set_size_bytes(static_cast<int64_t>(bytes.size()));
  return digest;
}

bool IsSha256Hex(absl::string_view hash) {
  if (hash.size() != 64) return false;
  for (char c : hash) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

}  // namespace ferry
