#include "server/digest.h"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>

namespace ferry {

std::string Sha256Hex(const std::vector<absl::string_view>& parts) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(
      EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  for (absl::string_view part : parts) {
    unsigned char length[8];
    uint64_t size = part.size();
    for (int i = 0; i < 8; ++i)
      length[i] = static_cast<unsigned char>(size >> (8 * i));
    EVP_DigestUpdate(context.get(), length, sizeof(length));
    EVP_DigestUpdate(context.get(), part.data(), part.size());
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_size = 0;
  EVP_DigestFinal_ex(context.get(), digest, &digest_size);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_size);
  for (unsigned int i = 0; i < digest_size; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

}  // namespace ferry
