#include "server/blob_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ferry/digest.h"

namespace ferry {

bool BlobStore::Matches(const v1::Digest& digest, const std::string& bytes) {
  if (static_cast<int64_t>(bytes.size()) == digest.size_bytes() &&
      Sha256HexOf(bytes) == digest.hash()) {
    return true;
  }
  ++corrupt_;
  return false;
}

namespace {

namespace fs = std::filesystem;

class DiskBlobStore final : public BlobStore {
 public:
  DiskBlobStore(std::string directory, int64_t capacity_bytes)
      : directory_(std::move(directory)), capacity_bytes_(capacity_bytes) {
    std::error_code error;
    for (const fs::directory_entry& entry :
         fs::directory_iterator(directory_, error)) {
      if (entry.is_regular_file(error) && IsSha256Hex(NameOf(entry))) {
        used_bytes_ += static_cast<int64_t>(entry.file_size(error));
      }
    }
  }

  const char* kind() const override { return "disk"; }

  absl::StatusOr<std::vector<bool>> Contains(
      const std::vector<v1::Digest>& digests) override {
    std::vector<bool> found;
    found.reserve(digests.size());
    for (const v1::Digest& digest : digests) {
      std::error_code error;
      fs::path path = PathOf(digest);
      bool held = IsSha256Hex(digest.hash()) &&
                  static_cast<int64_t>(fs::file_size(path, error)) ==
                      digest.size_bytes() &&
                  !error;
      if (held)
        fs::last_write_time(path, fs::file_time_type::clock::now(), error);
      found.push_back(held);
    }
    return found;
  }

  absl::Status Put(const v1::Digest& digest, std::string bytes) override {
    if (!IsSha256Hex(digest.hash())) {
      return absl::InvalidArgumentError("not a SHA-256 digest");
    }
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (size > capacity_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a blob of ", size, " bytes exceeds the blob store's ",
                       capacity_bytes_, " bytes"));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    MakeRoom(size);
    fs::path temporary =
        fs::path(directory_) /
        absl::StrCat(".upload-", digest.hash(), "-", std::random_device{}());
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.flush();
      if (!out) {
        std::error_code ignored;
        fs::remove(temporary, ignored);
        return absl::UnavailableError(
            absl::StrCat("cannot write to the blob directory ", directory_));
      }
    }
    std::error_code error;
    const bool existed = fs::exists(PathOf(digest), error);
    fs::rename(temporary, PathOf(digest), error);
    if (error) {
      fs::remove(temporary, error);
      return absl::UnavailableError(
          absl::StrCat("cannot store a blob in ", directory_));
    }
    if (!existed) used_bytes_ += size;
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> Get(
      const v1::Digest& digest) override {
    if (!IsSha256Hex(digest.hash())) return std::nullopt;
    const fs::path path = PathOf(digest);
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (error || static_cast<int64_t>(size) != digest.size_bytes()) {
      if (!error) Forget(path);  // present but truncated or grown: corrupt
      if (!error) Matches(digest, {});
      return std::nullopt;
    }
    std::ifstream in(path, std::ios::binary);
    std::string bytes(size, '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!in) return std::nullopt;
    if (!Matches(digest, bytes)) {
      Forget(path);
      return std::nullopt;
    }
    fs::last_write_time(path, fs::file_time_type::clock::now(), error);
    return bytes;
  }

 private:
  static std::string NameOf(const fs::directory_entry& entry) {
    return entry.path().filename().string();
  }
  fs::path PathOf(const v1::Digest& digest) const {
    return fs::path(directory_) / digest.hash();
  }

  void Forget(const fs::path& path) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (fs::remove(path, error)) used_bytes_ -= static_cast<int64_t>(size);
  }

  // Evicts least recently used blobs until `incoming` more bytes fit
  // (mutex_ held).
  void MakeRoom(int64_t incoming) {
    if (used_bytes_ + incoming <= capacity_bytes_) return;
    struct Held {
      fs::file_time_type used;
      fs::path path;
      int64_t bytes;
    };
    std::vector<Held> held;
    std::error_code error;
    for (const fs::directory_entry& entry :
         fs::directory_iterator(directory_, error)) {
      if (!entry.is_regular_file(error) || !IsSha256Hex(NameOf(entry)))
        continue;
      held.push_back({entry.last_write_time(error), entry.path(),
                      static_cast<int64_t>(entry.file_size(error))});
    }
    std::sort(held.begin(), held.end(),
              [](const Held& a, const Held& b) { return a.used < b.used; });
    for (const Held& blob : held) {
      if (used_bytes_ + incoming <= capacity_bytes_) break;
      if (fs::remove(blob.path, error)) used_bytes_ -= blob.bytes;
    }
  }

  const std::string directory_;
  const int64_t capacity_bytes_;
  std::mutex mutex_;
  int64_t used_bytes_ = 0;
};

class RedisBlobStore final : public BlobStore {
 public:
  RedisBlobStore(RedisStore& redis, std::chrono::seconds ttl)
      : redis_(redis), ttl_(ttl) {}

  const char* kind() const override { return "redis"; }

  absl::StatusOr<std::vector<bool>> Contains(
      const std::vector<v1::Digest>& digests) override {
    std::vector<std::string> keys;
    keys.reserve(digests.size());
    for (const v1::Digest& digest : digests) keys.push_back(KeyOf(digest));
    return redis_.Refresh(keys, ttl_);
  }

  absl::Status Put(const v1::Digest& digest, std::string bytes) override {
    return redis_.Set(KeyOf(digest), bytes, ttl_);
  }

  absl::StatusOr<std::optional<std::string>> Get(
      const v1::Digest& digest) override {
    absl::StatusOr<std::optional<std::string>> value =
        redis_.Get(KeyOf(digest));
    if (!value.ok() || !value->has_value()) return value;
    if (!Matches(digest, **value)) return std::nullopt;
    return value;
  }

 private:
  // The size is part of the key: a digest naming the right hash and the
  // wrong size is another (missing) blob.
  static std::string KeyOf(const v1::Digest& digest) {
    return absl::StrCat("ferry:blob:", digest.hash(), ":", digest.size_bytes());
  }

  RedisStore& redis_;
  const std::chrono::seconds ttl_;
};

}  // namespace

absl::Status CheckBlobDirectory(const std::string& directory) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error || !fs::is_directory(directory, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--blob-dir ", directory, " is not a usable directory"));
  }
  return absl::OkStatus();
}

std::unique_ptr<BlobStore> MakeDiskBlobStore(std::string directory,
                                             int64_t capacity_bytes) {
  return std::make_unique<DiskBlobStore>(std::move(directory), capacity_bytes);
}

std::unique_ptr<BlobStore> MakeRedisBlobStore(RedisStore& redis,
                                              std::chrono::seconds ttl) {
  return std::make_unique<RedisBlobStore>(redis, ttl);
}

}  // namespace ferry
