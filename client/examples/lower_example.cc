// Lowers a program on a Ferry server: lower_example HOST:PORT PROGRAM.pb
#include <fstream>
#include <iostream>
#include <sstream>

#include "ferry/client.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::stringstream bytes;
  bytes << std::ifstream(argv[2], std::ios::binary).rdbuf();
  ferry::v1::LowerRequest request;
  if (!request.mutable_program()->ParseFromString(bytes.str())) return 2;

  ferry::ClientOptions options;  // TLS, token, deadline, retries: see client.h
  options.target = argv[1];
  auto client = ferry::Client::Create(options);
  if (!client.ok()) return std::cerr << client.status() << "\n", 1;
  auto lowered = (*client)->Lower(request);  // request errors: a status
  if (!lowered.ok()) return std::cerr << lowered.status() << "\n", 1;
  for (const auto& d : lowered->diagnostics())  // compile errors: the body
    std::cout << d.code() << ": " << d.message() << "\n";
  std::cout << (lowered->ok() ? "lowered" : "failed to compile") << ", "
            << lowered->stats().h2d_copies() << " H2D copies per call\n";
  return lowered->ok() ? 0 : 1;
}
