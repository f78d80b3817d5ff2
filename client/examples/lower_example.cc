// Lowers a program file on a Ferry server: lower_example HOST:PORT FILE.pb
#include <fstream>
#include <iostream>
#include <sstream>

#include "ferry/client.h"

int main(int argc, char** argv) {
  if (argc != 3) return std::cerr << "usage: lower_example HOST:PORT FILE.pb\n", 2;
  std::stringstream bytes;
  bytes << std::ifstream(argv[2], std::ios::binary).rdbuf();
  ferry::v1::LowerRequest request;
  if (!request.mutable_program()->ParseFromString(bytes.str())) return std::cerr << "bad program\n", 2;

  auto client = ferry::Client::Create({.target = argv[1]});
  if (!client.ok()) return std::cerr << client.status() << "\n", 1;
  absl::StatusOr<ferry::v1::LowerResponse> lowered = (*client)->Lower(request);
  if (!lowered.ok()) return std::cerr << lowered.status() << "\n", 1;  // request error
  for (const auto& d : lowered->diagnostics()) std::cout << d.code() << ": " << d.message() << "\n";
  std::cout << (lowered->ok() ? "lowered" : "failed to compile") << ", "
            << lowered->stats().h2d_copies() << " H2D copies per call\n";
  return lowered->ok() ? 0 : 1;
}
