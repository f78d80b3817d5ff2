// The deployment files: Kubernetes manifests (rendered with
// `kubectl kustomize` where kubectl is installed, otherwise assembled from
// kustomization.yaml by this test; read with yaml-cpp, the same checks run
// either way), the container files and ferryd's config
// files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ferry/file.h"
#include "server/config.h"
#include "server/ferry_server.h"
#include "server/memory_budget.h"
#include "yaml-cpp/yaml.h"

namespace ferry::testing {
namespace {

const std::string kDeploy = FERRY_DEPLOY_DIR;
const std::string kK8s = kDeploy + "/k8s";

std::string ReadText(const std::string& path) {
  return ReadFile(path).value_or("");
}

// The node at a dotted path of keys and [indices] below `node`, e.g.
// "spec.template.spec.containers[0].name"; an undefined node when absent.
// (Never through a non-const Node's operator[], which would insert.)
YAML::Node Find(const YAML::Node& node, std::string_view path) {
  if (path.empty() || !node.IsDefined()) return node;
  if (path.front() == '.') return Find(node, path.substr(1));
  const YAML::Node absent(YAML::NodeType::Undefined);
  if (path.front() == '[') {
    size_t close = path.find(']');
    size_t index = 0;
    if (close == std::string_view::npos || !node.IsSequence() ||
        !absl::SimpleAtoi(std::string(path.substr(1, close - 1)), &index) ||
        index >= node.size()) {
      return absent;
    }
    return Find(node[index], path.substr(close + 1));
  }
  size_t end = std::min(path.find_first_of(".["), path.size());
  if (!node.IsMap()) return absent;
  const YAML::Node child = node[std::string(path.substr(0, end))];
  return child.IsDefined() ? Find(child, path.substr(end)) : absent;
}

// The scalar at `path`, or "" when absent or not a scalar.
std::string Str(const YAML::Node& node, std::string_view path) {
  const YAML::Node found = Find(node, path);
  return found.IsScalar() ? found.Scalar() : "";
}

// A map's value for one `key`, which may hold dots ("nvidia.com/gpu").
YAML::Node Child(const YAML::Node& node, const std::string& key) {
  if (!node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node[key];
}

std::string ChildStr(const YAML::Node& node, const std::string& key) {
  const YAML::Node child = Child(node, key);
  return child.IsScalar() ? child.Scalar() : "";
}

bool Has(const YAML::Node& node, std::string_view path) {
  return Find(node, path).IsDefined();
}

absl::StatusOr<std::vector<YAML::Node>> ParseYamlDocuments(
    const std::string& text) {
  try {
    return YAML::LoadAll(text);
  } catch (const YAML::Exception& error) {
    return absl::InvalidArgumentError(error.what());
  }
}

bool HasKubectl() {
  return std::system("command -v kubectl >/dev/null 2>&1") == 0;
}

std::string RunCapture(const std::string& command, int* exit_code) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *exit_code = -1;
    return output;
  }
  char buffer[4096];
  size_t got;
  while ((got = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, got);
  }
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

YAML::Node Kustomization() {
  absl::StatusOr<std::vector<YAML::Node>> parsed =
      ParseYamlDocuments(ReadText(kK8s + "/kustomization.yaml"));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() && !parsed->empty() ? parsed->front() : YAML::Node();
}

// What `kubectl kustomize` does with our kustomization, for machines
// without kubectl: every resource file, with the namespace set.
std::vector<YAML::Node> AssembleWithoutKubectl() {
  const YAML::Node kustomization = Kustomization();
  std::string namespace_name = Str(kustomization, "namespace");
  std::vector<YAML::Node> documents;
  const YAML::Node resources = Find(kustomization, "resources");
  if (!resources.IsDefined()) return documents;
  for (const YAML::Node& resource : resources) {
    absl::StatusOr<std::vector<YAML::Node>> parsed =
        ParseYamlDocuments(ReadText(kK8s + "/" + resource.Scalar()));
    EXPECT_TRUE(parsed.ok()) << resource.Scalar() << ": " << parsed.status();
    if (!parsed.ok()) continue;
    for (YAML::Node& document : *parsed) {
      if (Str(document, "kind") != "Namespace" && Find(document, "metadata")) {
        // A non-const Node refers into the document: this sets its field.
        YAML::Node metadata = document["metadata"];
        metadata["namespace"] = namespace_name;
      }
      documents.push_back(std::move(document));
    }
  }
  return documents;
}

std::vector<YAML::Node> RenderedManifests(std::string* how) {
  if (HasKubectl()) {
    int exit_code = 0;
    std::string rendered =
        RunCapture("kubectl kustomize " + kK8s + " 2>&1", &exit_code);
    EXPECT_EQ(exit_code, 0) << rendered;
    absl::StatusOr<std::vector<YAML::Node>> parsed =
        ParseYamlDocuments(rendered);
    EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << rendered;
    *how = "kubectl kustomize";
    return parsed.ok() ? *parsed : std::vector<YAML::Node>();
  }
  *how = "the test's own assembly (no kubectl)";
  return AssembleWithoutKubectl();
}

YAML::Node FindResource(const std::vector<YAML::Node>& documents,
                        const std::string& kind, const std::string& name) {
  for (const YAML::Node& document : documents) {
    if (Str(document, "kind") == kind &&
        Str(document, "metadata.name") == name) {
      return document;
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

// A probe's `ferryd --probe ...` exec command, parsed as ferryd does.
CommandLine ProbeCommand(const YAML::Node& container,
                         const std::string& probe) {
  std::vector<std::string> args;
  if (const YAML::Node list = Find(container, probe + ".exec.command")) {
    for (const YAML::Node& arg : list) args.push_back(arg.Scalar());
  }
  EXPECT_FALSE(args.empty()) << probe << " runs no command";
  if (args.empty()) return {};
  EXPECT_EQ(args[0], "/usr/local/bin/ferryd") << probe;
  absl::StatusOr<CommandLine> parsed =
      ParseCommandLine(std::vector<std::string>(args.begin() + 1, args.end()));
  EXPECT_TRUE(parsed.ok()) << probe << ": " << parsed.status();
  return parsed.ok() ? *parsed : CommandLine();
}

// The container's parsed ferryd flags (--config, a file inside the image,
// left out).
ServerConfig ContainerConfig(const YAML::Node& container) {
  std::vector<std::string> args;
  if (const YAML::Node list = Find(container, "args")) {
    for (const YAML::Node& arg : list) {
      if (arg.Scalar().rfind("--config", 0) != 0) args.push_back(arg.Scalar());
    }
  }
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? parsed->config : ServerConfig();
}

// The Secret mounted at the directory holding `path`; "" when none is.
std::string SecretMountedFor(const YAML::Node& pod, const YAML::Node& container,
                             const std::string& path) {
  const YAML::Node mounts = Find(container, "volumeMounts");
  const YAML::Node volumes = Find(pod, "volumes");
  if (!mounts.IsDefined() || !volumes.IsDefined()) return "";
  for (const YAML::Node& mount : mounts) {
    std::string dir = ChildStr(mount, "mountPath");
    if (dir.empty() || path.rfind(dir + "/", 0) != 0) continue;
    for (const YAML::Node& volume : volumes) {
      if (ChildStr(volume, "name") == ChildStr(mount, "name")) {
        return Str(volume, "secret.secretName");
      }
    }
  }
  return "";
}

// "--drain-grace=30s" among a container's args, in milliseconds.
int64_t DrainGraceMillis(const YAML::Node& container) {
  std::vector<std::string> args;
  if (const YAML::Node list = Find(container, "args")) {
    for (const YAML::Node& arg : list) args.push_back(arg.Scalar());
  }
  absl::StatusOr<CommandLine> parsed = ParseCommandLine([&] {
    // --config names a file inside the image; check the other flags.
    std::vector<std::string> without_config;
    for (const std::string& arg : args) {
      if (arg.rfind("--config", 0) != 0) without_config.push_back(arg);
    }
    return without_config;
  }());
  EXPECT_TRUE(parsed.ok()) << "container args are ferryd flags: "
                           << parsed.status();
  return parsed.ok() ? parsed->config.drain_grace.count() : 0;
}

// The checks every pod of ours must pass.
void ExpectServingPod(const YAML::Node& deployment,
                      const std::string& readiness, const std::string& what) {
  SCOPED_TRACE(what);
  const YAML::Node pod = Find(deployment, "spec.template.spec");
  ASSERT_TRUE(pod.IsDefined());
  const YAML::Node container = Find(pod, "containers[0]");
  ASSERT_TRUE(container.IsDefined());

  // TLS and a bearer token by default, from Secrets mounted read-only.
  ServerConfig config = ContainerConfig(container);
  EXPECT_FALSE(config.tls_cert.empty()) << "no --tls-cert";
  EXPECT_FALSE(config.tls_key.empty()) << "no --tls-key";
  EXPECT_FALSE(config.token_file.empty()) << "no --token-file";
  const std::string tls_secret =
      SecretMountedFor(pod, container, config.tls_cert);
  EXPECT_EQ(tls_secret, "ferry-tls");
  EXPECT_EQ(SecretMountedFor(pod, container, config.tls_key), tls_secret);
  EXPECT_EQ(SecretMountedFor(pod, container, config.token_file), "ferry-token");
  if (const YAML::Node mounts = Find(container, "volumeMounts")) {
    for (const YAML::Node& mount : mounts) {
      EXPECT_EQ(ChildStr(mount, "readOnly"), "true") << ChildStr(mount, "name");
    }
  }

  // Probes on the health names, by `ferryd --probe` over TLS (the
  // kubelet's gRPC probes cannot do TLS): liveness on "" (the process,
  // SERVING through a drain), readiness on the service, never the same.
  CommandLine liveness = ProbeCommand(container, "livenessProbe");
  CommandLine ready = ProbeCommand(container, "readinessProbe");
  CommandLine startup = ProbeCommand(container, "startupProbe");
  for (const CommandLine* probe : {&liveness, &ready, &startup}) {
    EXPECT_EQ(probe->probe_address, "127.0.0.1:50051");
    EXPECT_FALSE(probe->probe_tls_ca.empty());
    EXPECT_EQ(SecretMountedFor(pod, container, probe->probe_tls_ca),
              tls_secret);
  }
  EXPECT_EQ(ready.probe_service, readiness);
  EXPECT_EQ(liveness.probe_service, "");
  EXPECT_NE(liveness.probe_service, readiness);

  // Requests so the scheduler and the HPA can work.
  EXPECT_FALSE(Str(container, "resources.requests.cpu").empty());
  EXPECT_FALSE(Str(container, "resources.requests.memory").empty());

  // Non-root with the image's fixed uid.
  EXPECT_EQ(Str(pod, "securityContext.runAsNonRoot"), "true");
  EXPECT_EQ(Str(pod, "securityContext.runAsUser"), "10001");
  EXPECT_EQ(Str(container, "securityContext.allowPrivilegeEscalation"),
            "false");

  // The drain finishes before the kubelet's SIGKILL.
  int64_t grace_seconds =
      std::atoll(Str(pod, "terminationGracePeriodSeconds").c_str());
  int64_t pre_stop_seconds = 0;
  if (const YAML::Node command =
          Find(container, "lifecycle.preStop.exec.command")) {
    if (command.size() == 2 && command[0].Scalar() == "/bin/sleep") {
      pre_stop_seconds = std::atoll(command[1].Scalar().c_str());
    }
  }
  int64_t drain_millis = DrainGraceMillis(container);
  EXPECT_GT(drain_millis, 0);
  // ferryd exits at the latest kDrainExitMargin after its grace.
  EXPECT_LE(pre_stop_seconds * 1000 + drain_millis + kDrainExitMargin.count(),
            grace_seconds * 1000)
      << "preStop (" << pre_stop_seconds << " s) + --drain-grace ("
      << drain_millis << " ms) + ferryd's exit margin ("
      << kDrainExitMargin.count()
      << " ms) must fit in terminationGracePeriodSeconds (" << grace_seconds
      << " s)";

  // The selector picks the template's pods.
  const YAML::Node match = Find(deployment, "spec.selector.matchLabels");
  const YAML::Node labels = Find(deployment, "spec.template.metadata.labels");
  ASSERT_TRUE(match.IsDefined());
  for (const auto& entry : match) {
    const std::string key = entry.first.Scalar();
    EXPECT_EQ(ChildStr(labels, key), entry.second.Scalar()) << key;
  }
}

// A headless Service on 50051 selecting exactly `deployment`'s pods.
void ExpectHeadlessServiceFor(const YAML::Node& service,
                              const YAML::Node& deployment) {
  EXPECT_EQ(Str(service, "spec.clusterIP"), "None");
  const YAML::Node selector = Find(service, "spec.selector");
  const YAML::Node match = Find(deployment, "spec.selector.matchLabels");
  ASSERT_TRUE(selector.IsDefined());
  ASSERT_TRUE(match.IsDefined());
  ASSERT_EQ(selector.size(), match.size());
  for (const auto& entry : match) {
    const std::string key = entry.first.Scalar();
    EXPECT_EQ(ChildStr(selector, key), entry.second.Scalar()) << key;
  }
  EXPECT_EQ(Str(service, "spec.ports[0].port"), "50051");
  EXPECT_EQ(Str(service, "spec.ports[0].name"), "grpc");
}

TEST(ManifestTest, RenderedManifestsHaveTheFieldsThatMatter) {
  std::string how;
  std::vector<YAML::Node> documents = RenderedManifests(&how);
  RecordProperty("rendered_with", how);
  std::printf("manifests rendered with %s\n", how.c_str());
  ASSERT_FALSE(documents.empty());

  for (const YAML::Node& document : documents) {
    if (Str(document, "kind") == "Namespace") continue;
    EXPECT_EQ(Str(document, "metadata.namespace"), "ferry")
        << Str(document, "kind") << " " << Str(document, "metadata.name");
  }

  const YAML::Node compile =
      FindResource(documents, "Deployment", "ferry-compile");
  const YAML::Node verify =
      FindResource(documents, "Deployment", "ferry-verify-gpu");
  ASSERT_TRUE(compile.IsDefined());
  ASSERT_TRUE(verify.IsDefined());
  ExpectServingPod(compile, "ferry.v1.Compiler", "compile");
  ExpectServingPod(verify, "ferry.v1.Compiler/gpu", "verify");

  // Compile pods are CPU only; the verification pods get a GPU in limits.
  const YAML::Node compile_container =
      Find(compile, "spec.template.spec.containers[0]");
  EXPECT_FALSE(
      Child(Find(compile_container, "resources.limits"), "nvidia.com/gpu")
          .IsDefined());
  EXPECT_FALSE(
      Child(Find(compile_container, "resources.requests"), "nvidia.com/gpu")
          .IsDefined());
  const YAML::Node verify_container =
      Find(verify, "spec.template.spec.containers[0]");
  EXPECT_EQ(
      ChildStr(Find(verify_container, "resources.limits"), "nvidia.com/gpu"),
      "1");
  const YAML::Node gpu_request =
      Child(Find(verify_container, "resources.requests"), "nvidia.com/gpu");
  EXPECT_TRUE(!gpu_request.IsDefined() || gpu_request.Scalar() == "1");

  const YAML::Node compile_service =
      FindResource(documents, "Service", "ferry-compile");
  const YAML::Node verify_service =
      FindResource(documents, "Service", "ferry-verify-gpu");
  ASSERT_TRUE(compile_service.IsDefined());
  ASSERT_TRUE(verify_service.IsDefined());
  ExpectHeadlessServiceFor(compile_service, compile);
  ExpectHeadlessServiceFor(verify_service, verify);

  const YAML::Node hpa =
      FindResource(documents, "HorizontalPodAutoscaler", "ferry-compile");
  ASSERT_TRUE(hpa.IsDefined());
  EXPECT_EQ(Str(hpa, "apiVersion"), "autoscaling/v2");
  EXPECT_EQ(Str(hpa, "spec.scaleTargetRef.kind"), "Deployment");
  EXPECT_EQ(Str(hpa, "spec.scaleTargetRef.name"), "ferry-compile");
  int min_replicas = std::atoi(Str(hpa, "spec.minReplicas").c_str());
  int max_replicas = std::atoi(Str(hpa, "spec.maxReplicas").c_str());
  EXPECT_GE(min_replicas, 2);
  EXPECT_GT(max_replicas, min_replicas);
  EXPECT_TRUE(Has(hpa, "spec.metrics[0]"));

  // Only client namespaces reach the pods: gRPC from namespaces labelled
  // as Ferry clients, metrics from the scraping namespace, nothing else.
  const YAML::Node policy =
      FindResource(documents, "NetworkPolicy", "ferry-ingress");
  ASSERT_TRUE(policy.IsDefined());
  EXPECT_EQ(Str(policy, "apiVersion"), "networking.k8s.io/v1");
  EXPECT_EQ(Str(policy, "spec.policyTypes[0]"), "Ingress");
  std::set<std::string> selected;
  if (const YAML::Node values =
          Find(policy, "spec.podSelector.matchExpressions[0].values")) {
    EXPECT_EQ(Str(policy, "spec.podSelector.matchExpressions[0].key"),
              "app.kubernetes.io/name");
    EXPECT_EQ(Str(policy, "spec.podSelector.matchExpressions[0].operator"),
              "In");
    for (const YAML::Node& value : values) selected.insert(value.Scalar());
  }
  EXPECT_EQ(selected,
            (std::set<std::string>{"ferry-compile", "ferry-verify-gpu"}));
  const YAML::Node rules = Find(policy, "spec.ingress");
  ASSERT_TRUE(rules.IsDefined());
  std::set<std::string> ports;
  for (const YAML::Node& rule : rules) {
    const YAML::Node from = Find(rule, "from");
    ASSERT_TRUE(from.IsDefined())
        << "an ingress rule without `from` admits all";
    for (const YAML::Node& peer : from) {
      // Namespaces by label only: no ipBlock, no empty selector.
      EXPECT_FALSE(Has(peer, "ipBlock"));
      const YAML::Node labels = Find(peer, "namespaceSelector.matchLabels");
      ASSERT_TRUE(labels.IsDefined());
      EXPECT_NE(labels.size(), 0u);
    }
    const YAML::Node rule_ports = Find(rule, "ports");
    ASSERT_TRUE(rule_ports.IsDefined()) << "an ingress rule without ports";
    for (const YAML::Node& port : rule_ports) ports.insert(Str(port, "port"));
  }
  EXPECT_EQ(ports, (std::set<std::string>{"50051", "9090"}));

  const YAML::Node pdb =
      FindResource(documents, "PodDisruptionBudget", "ferry-compile");
  ASSERT_TRUE(pdb.IsDefined());
  EXPECT_EQ(Str(pdb, "apiVersion"), "policy/v1");
  EXPECT_TRUE(Has(pdb, "spec.maxUnavailable") || Has(pdb, "spec.minAvailable"));
  const YAML::Node pdb_selector = Find(pdb, "spec.selector.matchLabels");
  ASSERT_TRUE(pdb_selector.IsDefined());
  for (const auto& entry : pdb_selector) {
    EXPECT_EQ(ChildStr(Find(compile, "spec.template.metadata.labels"),
                       entry.first.Scalar()),
              entry.second.Scalar());
  }
}

TEST(ManifestTest, EveryManifestParsesAndIsListedInTheKustomization) {
  const YAML::Node kustomization = Kustomization();
  EXPECT_EQ(Str(kustomization, "kind"), "Kustomization");
  EXPECT_EQ(Str(kustomization, "namespace"), "ferry");
  std::set<std::string> listed;
  if (const YAML::Node resources = Find(kustomization, "resources")) {
    for (const YAML::Node& resource : resources)
      listed.insert(resource.Scalar());
  }
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kK8s)) {
    std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "kustomization.yaml") {
      continue;
    }
    files.insert(name);
    absl::StatusOr<std::vector<YAML::Node>> parsed =
        ParseYamlDocuments(ReadText(entry.path().string()));
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    for (const YAML::Node& document : *parsed) {
      EXPECT_FALSE(Str(document, "apiVersion").empty()) << name;
      EXPECT_FALSE(Str(document, "kind").empty()) << name;
      EXPECT_FALSE(Str(document, "metadata.name").empty()) << name;
    }
  }
  EXPECT_EQ(files, listed);
}

TEST(YamlTest, ReadsTheShapesKubectlPrints) {
  absl::StatusOr<std::vector<YAML::Node>> parsed = ParseYamlDocuments(R"(# c
a: 1
b:
- name: x   # comment
  port: "50051"
- plain
c:
  d: 'it''s'
  e: [one, "two, three"]
  f: {}
  g: |
    line 1
    line 2
---
kind: Second
)");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  const YAML::Node& first = (*parsed)[0];
  EXPECT_EQ(Str(first, "a"), "1");
  EXPECT_EQ(Str(first, "b[0].name"), "x");
  EXPECT_EQ(Str(first, "b[0].port"), "50051");
  EXPECT_EQ(Str(first, "b[1]"), "plain");
  EXPECT_EQ(Str(first, "c.d"), "it's");
  EXPECT_EQ(Str(first, "c.e[1]"), "two, three");
  EXPECT_TRUE(Find(first, "c.f").IsMap());
  // A `|` block keeps its final line break (YAML's "clip").
  EXPECT_EQ(Str(first, "c.g"), "line 1\nline 2\n");
  EXPECT_EQ(Str((*parsed)[1], "kind"), "Second");
  EXPECT_FALSE(ParseYamlDocuments("a: 1\n   b: 2\n").ok());
  // Anchors and aliases, which the manifests may use, resolve.
  absl::StatusOr<std::vector<YAML::Node>> aliased =
      ParseYamlDocuments("a: &anchor 1\nb: *anchor\n");
  ASSERT_TRUE(aliased.ok()) << aliased.status();
  EXPECT_EQ(Str(aliased->front(), "b"), "1");
}

TEST(ContainerfileTest, CompileImageIsMultiStageNonRootAndHealthCheckable) {
  std::string file = ReadText(kDeploy + "/Containerfile");
  ASSERT_FALSE(file.empty());
  std::istringstream lines(file);
  std::string line;
  int stages = 0;
  std::string final_stage;
  while (std::getline(lines, line)) {
    if (line.rfind("FROM ", 0) == 0) {
      ++stages;
      final_stage.clear();
    }
    final_stage += line + "\n";
  }
  EXPECT_EQ(stages, 2);
  EXPECT_NE(file.find("ARG BUILDER_IMAGE=debian:bookworm\n"),
            std::string::npos);
  EXPECT_NE(file.find("ARG RUNTIME_IMAGE=debian:bookworm-slim\n"),
            std::string::npos);
  EXPECT_NE(final_stage.find("FROM ${RUNTIME_IMAGE}"), std::string::npos);
  // Only runtime libraries in the final image: no compilers or -dev packages.
  EXPECT_EQ(final_stage.find("-dev"), std::string::npos);
  EXPECT_EQ(final_stage.find("build-essential"), std::string::npos);
  EXPECT_NE(final_stage.find("COPY --from=build /opt/ferry/bin/ferryd"),
            std::string::npos);
  EXPECT_NE(final_stage.find("--uid 10001"), std::string::npos);
  EXPECT_NE(final_stage.find("USER 10001:10001"), std::string::npos);
  EXPECT_NE(final_stage.find("HEALTHCHECK"), std::string::npos);
  EXPECT_NE(final_stage.find("\"--probe\", \"127.0.0.1:50051\""),
            std::string::npos);
  EXPECT_NE(final_stage.find("ENTRYPOINT [\"/usr/local/bin/ferryd\"]"),
            std::string::npos);
}

TEST(ContainerfileTest, GpuImageUsesTheCuda13RuntimeImage) {
  std::string file = ReadText(kDeploy + "/Containerfile.gpu");
  EXPECT_NE(file.find("ARG CUDA_VERSION=13."), std::string::npos);
  EXPECT_NE(file.find("nvidia/cuda:${CUDA_VERSION}-runtime-"),
            std::string::npos);
  EXPECT_NE(file.find("nvidia/cuda:${CUDA_VERSION}-devel-"), std::string::npos);
  EXPECT_NE(file.find("-DFERRY_CUDA=ON"), std::string::npos);
  EXPECT_NE(file.find("USER 10001:10001"), std::string::npos);
  EXPECT_NE(file.find("ferry.v1.Compiler/gpu"), std::string::npos);
}

// The configuration a container runs with: the image's config file, then
// its args (which override it), as ferryd reads them.
ServerConfig ContainerConfig(const YAML::Node& container,
                             const std::string& conf) {
  ServerConfig config;
  absl::Status status =
      ApplyConfigText(ReadText(kDeploy + "/" + conf), conf, config);
  EXPECT_TRUE(status.ok()) << status;
  if (const YAML::Node args = Find(container, "args")) {
    for (const YAML::Node& arg : args) {
      std::string flag = arg.Scalar();
      if (flag.rfind("--config", 0) == 0) continue;
      size_t equals = flag.find('=');
      EXPECT_NE(equals, std::string::npos) << flag;
      if (equals == std::string::npos) continue;
      status = ApplyConfigText(absl::StrCat(flag.substr(2, equals - 2), " = ",
                                            flag.substr(equals + 1)),
                               "args", config);
      EXPECT_TRUE(status.ok()) << status;
    }
  }
  EXPECT_TRUE(ValidateConfig(config).ok());
  return config;
}

// "4Gi", "512Mi", "1G" in bytes (0 when unreadable).
int64_t Quantity(const std::string& text) {
  static const std::vector<std::pair<std::string, int64_t>> kUnits = {
      {"Ki", int64_t{1} << 10}, {"Mi", int64_t{1} << 20},
      {"Gi", int64_t{1} << 30}, {"k", 1000},
      {"M", 1'000'000},         {"G", 1'000'000'000}};
  for (const auto& [suffix, scale] : kUnits) {
    if (text.size() > suffix.size() &&
        text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return std::atoll(text.substr(0, text.size() - suffix.size()).c_str()) *
             scale;
    }
  }
  return std::atoll(text.c_str());
}

TEST(ManifestTest, CacheTierRebalancingAndAdmissionFitTogether) {
  std::string how;
  std::vector<YAML::Node> documents = RenderedManifests(&how);
  ASSERT_FALSE(documents.empty());
  const YAML::Node redis = FindResource(documents, "Deployment", "ferry-redis");
  const YAML::Node redis_service =
      FindResource(documents, "Service", "ferry-redis");
  ASSERT_TRUE(redis.IsDefined());
  ASSERT_TRUE(redis_service.IsDefined());
  const std::string redis_port = Str(redis_service, "spec.ports[0].port");

  for (const auto& [name, conf] :
       std::vector<std::pair<std::string, std::string>>{
           {"ferry-compile", "ferryd.conf"},
           {"ferry-verify-gpu", "ferryd-gpu.conf"}}) {
    SCOPED_TRACE(name);
    const YAML::Node deployment = FindResource(documents, "Deployment", name);
    ASSERT_TRUE(deployment.IsDefined());
    const YAML::Node pod = Find(deployment, "spec.template.spec");
    const YAML::Node container =
        Find(deployment, "spec.template.spec.containers[0]");
    ASSERT_TRUE(container.IsDefined());
    ServerConfig config = ContainerConfig(container, conf);

    // Both reach the shared tier through its Service.
    EXPECT_EQ(config.cache_redis, absl::StrCat("ferry-redis:", redis_port));
    // Connections age out so clients spread to new pods, and an aged
    // connection's calls finish before the pod could be killed.
    EXPECT_GT(config.max_connection_age.count(), 0);
    EXPECT_LE(
        config.max_connection_age_grace.count(),
        std::atoll(Str(pod, "terminationGracePeriodSeconds").c_str()) * 1000);

    // Memory admission: a request at the node limit fits in the budget
    // beside the cache, and the budget sits under the pod's limit with
    // room for the process itself (measured idle peak ~60 MiB).
    const int64_t largest =
        JobMemoryEstimate(config.max_nodes) +
        RequestMemoryEstimate(config.max_nodes * 60);  // ~58 wire B/node
    EXPECT_LE(largest + config.cache_bytes, config.max_memory_bytes)
        << "a legal request at --max-nodes could never be admitted";
    const int64_t pod_limit =
        Quantity(Str(container, "resources.limits.memory"));
    EXPECT_GE(pod_limit - config.max_memory_bytes, int64_t{512} << 20)
        << "the pod's memory limit leaves too little above the budget";
    // Freed memory ferryd keeps for its next jobs is resident too.
    EXPECT_GE(pod_limit - config.max_memory_bytes - config.keep_freed_bytes,
              int64_t{256} << 20)
        << "the budget and the freed memory kept leave too little room";
  }

  // The HPA scales on the queue, not CPU only.
  const YAML::Node hpa =
      FindResource(documents, "HorizontalPodAutoscaler", "ferry-compile");
  ASSERT_TRUE(hpa.IsDefined());
  bool on_queue = false;
  if (const YAML::Node metrics = Find(hpa, "spec.metrics")) {
    for (const YAML::Node& metric : metrics) {
      on_queue |= Str(metric, "type") == "Pods" &&
                  Str(metric, "pods.metric.name") == "ferry_queue_depth";
    }
  }
  EXPECT_TRUE(on_queue);

  // The GPU endpoint rolls out without a spare GPU and asks for one GPU.
  const YAML::Node verify =
      FindResource(documents, "Deployment", "ferry-verify-gpu");
  ASSERT_TRUE(verify.IsDefined());
  EXPECT_EQ(Str(verify, "spec.strategy.rollingUpdate.maxSurge"), "0");
  EXPECT_EQ(Str(verify, "spec.strategy.rollingUpdate.maxUnavailable"), "1");

  // Redis is a cache: bounded, evicting, not persisted; only ferryd
  // reaches it.
  const YAML::Node redis_container =
      Find(redis, "spec.template.spec.containers[0]");
  ASSERT_TRUE(redis_container.IsDefined());
  std::vector<std::string> args;
  if (const YAML::Node list = Find(redis_container, "args")) {
    for (const YAML::Node& arg : list) args.push_back(arg.Scalar());
  }
  auto value_of = [&](const std::string& flag) {
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == flag) return args[i + 1];
    return std::string("<absent>");
  };
  EXPECT_EQ(value_of("--maxmemory-policy"), "allkeys-lru");
  EXPECT_EQ(value_of("--save"), "");
  EXPECT_EQ(value_of("--appendonly"), "no");
  // Redis' "6gb" is 6 GiB; its own overhead needs room under the limit.
  std::string maxmemory = value_of("--maxmemory");
  ASSERT_GT(maxmemory.size(), 2u);
  ASSERT_EQ(maxmemory.substr(maxmemory.size() - 2), "gb");
  EXPECT_LT(Quantity(maxmemory.substr(0, maxmemory.size() - 2) + "Gi") +
                (int64_t{512} << 20),
            Quantity(Str(redis_container, "resources.limits.memory")));
  const YAML::Node redis_policy =
      FindResource(documents, "NetworkPolicy", "ferry-redis");
  ASSERT_TRUE(redis_policy.IsDefined());
  EXPECT_EQ(Str(redis_policy, "spec.ingress[0].ports[0].port"), redis_port);
}

TEST(ContainerfileTest, ImageConfigFilesUseFerrydKeys) {
  for (const char* name : {"ferryd.conf", "ferryd-gpu.conf"}) {
    ServerConfig config;
    absl::Status status =
        ApplyConfigText(ReadText(kDeploy + "/" + name), name, config);
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_TRUE(ValidateConfig(config).ok()) << name;
    EXPECT_EQ(config.listen, "0.0.0.0:50051") << name;
  }
}

}  // namespace
}  // namespace ferry::testing
