// The deployment files: Kubernetes manifests (rendered with
// `kubectl kustomize` where kubectl is installed, otherwise assembled from
// kustomization.yaml by this test and read with its own YAML reader; the
// same checks run either way), the container files and ferryd's config
// files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "server/config.h"
#include "server/ferry_server.h"
#include "server/memory_budget.h"
#include "tests/deploy/mini_yaml.h"

namespace ferry::testing {
namespace {

const std::string kDeploy = FERRY_DEPLOY_DIR;
const std::string kK8s = kDeploy + "/k8s";

std::string ReadText(const std::string& path) {
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

const Yaml* Child(const Yaml* node, const std::string& key) {
  if (node == nullptr || node->kind != Yaml::Kind::kMap) return nullptr;
  for (const auto& [name, value] : node->map) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string ChildStr(const Yaml* node, const std::string& key) {
  const Yaml* child = Child(node, key);
  return child != nullptr && child->kind == Yaml::Kind::kScalar ? child->scalar
                                                                : "";
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

Yaml Kustomization() {
  absl::StatusOr<std::vector<Yaml>> parsed =
      ParseYamlDocuments(ReadText(kK8s + "/kustomization.yaml"));
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() && !parsed->empty() ? parsed->front() : Yaml();
}

// What `kubectl kustomize` does with our kustomization, for machines
// without kubectl: every resource file, with the namespace set.
std::vector<Yaml> AssembleWithoutKubectl() {
  Yaml kustomization = Kustomization();
  std::string namespace_name = kustomization.Str("namespace");
  std::vector<Yaml> documents;
  const Yaml* resources = kustomization.Find("resources");
  if (resources == nullptr) return documents;
  for (const Yaml& resource : resources->list) {
    absl::StatusOr<std::vector<Yaml>> parsed =
        ParseYamlDocuments(ReadText(kK8s + "/" + resource.scalar));
    EXPECT_TRUE(parsed.ok()) << resource.scalar << ": " << parsed.status();
    if (!parsed.ok()) continue;
    for (Yaml& document : *parsed) {
      if (document.Str("kind") != "Namespace") {
        Yaml* metadata = const_cast<Yaml*>(document.Find("metadata"));
        Yaml value;
        value.kind = Yaml::Kind::kScalar;
        value.scalar = namespace_name;
        if (metadata != nullptr) metadata->map.emplace_back("namespace", value);
      }
      documents.push_back(std::move(document));
    }
  }
  return documents;
}

std::vector<Yaml> RenderedManifests(std::string* how) {
  if (HasKubectl()) {
    int exit_code = 0;
    std::string rendered =
        RunCapture("kubectl kustomize " + kK8s + " 2>&1", &exit_code);
    EXPECT_EQ(exit_code, 0) << rendered;
    absl::StatusOr<std::vector<Yaml>> parsed = ParseYamlDocuments(rendered);
    EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << rendered;
    *how = "kubectl kustomize";
    return parsed.ok() ? *parsed : std::vector<Yaml>();
  }
  *how = "the test's own assembly (no kubectl)";
  return AssembleWithoutKubectl();
}

const Yaml* FindResource(const std::vector<Yaml>& documents,
                         const std::string& kind, const std::string& name) {
  for (const Yaml& document : documents) {
    if (document.Str("kind") == kind && document.Str("metadata.name") == name) {
      return &document;
    }
  }
  return nullptr;
}

// A probe's `ferryd --probe ...` exec command, parsed as ferryd does.
CommandLine ProbeCommand(const Yaml& container, const std::string& probe) {
  std::vector<std::string> args;
  if (const Yaml* list = container.Find(probe + ".exec.command")) {
    for (const Yaml& arg : list->list) args.push_back(arg.scalar);
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
ServerConfig ContainerConfig(const Yaml& container) {
  std::vector<std::string> args;
  if (const Yaml* list = container.Find("args")) {
    for (const Yaml& arg : list->list) {
      if (arg.scalar.rfind("--config", 0) != 0) args.push_back(arg.scalar);
    }
  }
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? parsed->config : ServerConfig();
}

// The Secret mounted at the directory holding `path`; "" when none is.
std::string SecretMountedFor(const Yaml& pod, const Yaml& container,
                             const std::string& path) {
  const Yaml* mounts = container.Find("volumeMounts");
  const Yaml* volumes = pod.Find("volumes");
  if (mounts == nullptr || volumes == nullptr) return "";
  for (const Yaml& mount : mounts->list) {
    std::string dir = ChildStr(&mount, "mountPath");
    if (dir.empty() || path.rfind(dir + "/", 0) != 0) continue;
    for (const Yaml& volume : volumes->list) {
      if (ChildStr(&volume, "name") == ChildStr(&mount, "name")) {
        return volume.Str("secret.secretName");
      }
    }
  }
  return "";
}

// "--drain-grace=30s" among a container's args, in milliseconds.
int64_t DrainGraceMillis(const Yaml& container) {
  std::vector<std::string> args;
  if (const Yaml* list = container.Find("args")) {
    for (const Yaml& arg : list->list) args.push_back(arg.scalar);
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
void ExpectServingPod(const Yaml& deployment, const std::string& readiness,
                      const std::string& what) {
  SCOPED_TRACE(what);
  const Yaml* pod = deployment.Find("spec.template.spec");
  ASSERT_NE(pod, nullptr);
  const Yaml* container = pod->Find("containers[0]");
  ASSERT_NE(container, nullptr);

  // TLS and a bearer token by default, from Secrets mounted read-only.
  ServerConfig config = ContainerConfig(*container);
  EXPECT_FALSE(config.tls_cert.empty()) << "no --tls-cert";
  EXPECT_FALSE(config.tls_key.empty()) << "no --tls-key";
  EXPECT_FALSE(config.token_file.empty()) << "no --token-file";
  const std::string tls_secret =
      SecretMountedFor(*pod, *container, config.tls_cert);
  EXPECT_EQ(tls_secret, "ferry-tls");
  EXPECT_EQ(SecretMountedFor(*pod, *container, config.tls_key), tls_secret);
  EXPECT_EQ(SecretMountedFor(*pod, *container, config.token_file),
            "ferry-token");
  if (const Yaml* mounts = container->Find("volumeMounts")) {
    for (const Yaml& mount : mounts->list) {
      EXPECT_EQ(ChildStr(&mount, "readOnly"), "true")
          << ChildStr(&mount, "name");
    }
  }

  // Probes on the health names, by `ferryd --probe` over TLS (the
  // kubelet's gRPC probes cannot do TLS): liveness on "" (the process,
  // SERVING through a drain), readiness on the service, never the same.
  CommandLine liveness = ProbeCommand(*container, "livenessProbe");
  CommandLine ready = ProbeCommand(*container, "readinessProbe");
  CommandLine startup = ProbeCommand(*container, "startupProbe");
  for (const CommandLine* probe : {&liveness, &ready, &startup}) {
    EXPECT_EQ(probe->probe_address, "127.0.0.1:50051");
    EXPECT_FALSE(probe->probe_tls_ca.empty());
    EXPECT_EQ(SecretMountedFor(*pod, *container, probe->probe_tls_ca),
              tls_secret);
  }
  EXPECT_EQ(ready.probe_service, readiness);
  EXPECT_EQ(liveness.probe_service, "");
  EXPECT_NE(liveness.probe_service, readiness);

  // Requests so the scheduler and the HPA can work.
  EXPECT_FALSE(container->Str("resources.requests.cpu").empty());
  EXPECT_FALSE(container->Str("resources.requests.memory").empty());

  // Non-root with the image's fixed uid.
  EXPECT_EQ(pod->Str("securityContext.runAsNonRoot"), "true");
  EXPECT_EQ(pod->Str("securityContext.runAsUser"), "10001");
  EXPECT_EQ(container->Str("securityContext.allowPrivilegeEscalation"),
            "false");

  // The drain finishes before the kubelet's SIGKILL.
  int64_t grace_seconds =
      std::atoll(pod->Str("terminationGracePeriodSeconds").c_str());
  int64_t pre_stop_seconds = 0;
  if (const Yaml* command = container->Find("lifecycle.preStop.exec.command")) {
    if (command->list.size() == 2 && command->list[0].scalar == "/bin/sleep") {
      pre_stop_seconds = std::atoll(command->list[1].scalar.c_str());
    }
  }
  int64_t drain_millis = DrainGraceMillis(*container);
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
  const Yaml* match = deployment.Find("spec.selector.matchLabels");
  const Yaml* labels = deployment.Find("spec.template.metadata.labels");
  ASSERT_NE(match, nullptr);
  for (const auto& [key, value] : match->map) {
    EXPECT_EQ(ChildStr(labels, key), value.scalar) << key;
  }
}

// A headless Service on 50051 selecting exactly `deployment`'s pods.
void ExpectHeadlessServiceFor(const Yaml& service, const Yaml& deployment) {
  EXPECT_EQ(service.Str("spec.clusterIP"), "None");
  const Yaml* selector = service.Find("spec.selector");
  const Yaml* match = deployment.Find("spec.selector.matchLabels");
  ASSERT_NE(selector, nullptr);
  ASSERT_NE(match, nullptr);
  ASSERT_EQ(selector->map.size(), match->map.size());
  for (const auto& [key, value] : match->map) {
    EXPECT_EQ(ChildStr(selector, key), value.scalar) << key;
  }
  EXPECT_EQ(service.Str("spec.ports[0].port"), "50051");
  EXPECT_EQ(service.Str("spec.ports[0].name"), "grpc");
}

TEST(ManifestTest, RenderedManifestsHaveTheFieldsThatMatter) {
  std::string how;
  std::vector<Yaml> documents = RenderedManifests(&how);
  RecordProperty("rendered_with", how);
  std::printf("manifests rendered with %s\n", how.c_str());
  ASSERT_FALSE(documents.empty());

  for (const Yaml& document : documents) {
    if (document.Str("kind") == "Namespace") continue;
    EXPECT_EQ(document.Str("metadata.namespace"), "ferry")
        << document.Str("kind") << " " << document.Str("metadata.name");
  }

  const Yaml* compile = FindResource(documents, "Deployment", "ferry-compile");
  const Yaml* verify =
      FindResource(documents, "Deployment", "ferry-verify-gpu");
  ASSERT_NE(compile, nullptr);
  ASSERT_NE(verify, nullptr);
  ExpectServingPod(*compile, "ferry.v1.Compiler", "compile");
  ExpectServingPod(*verify, "ferry.v1.Compiler/gpu", "verify");

  // Compile pods are CPU only; the verification pods get a GPU in limits.
  const Yaml* compile_container =
      compile->Find("spec.template.spec.containers[0]");
  EXPECT_EQ(
      Child(compile_container->Find("resources.limits"), "nvidia.com/gpu"),
      nullptr);
  EXPECT_EQ(
      Child(compile_container->Find("resources.requests"), "nvidia.com/gpu"),
      nullptr);
  const Yaml* verify_container =
      verify->Find("spec.template.spec.containers[0]");
  EXPECT_EQ(
      ChildStr(verify_container->Find("resources.limits"), "nvidia.com/gpu"),
      "1");
  const Yaml* gpu_request =
      Child(verify_container->Find("resources.requests"), "nvidia.com/gpu");
  EXPECT_TRUE(gpu_request == nullptr || gpu_request->scalar == "1");

  const Yaml* compile_service =
      FindResource(documents, "Service", "ferry-compile");
  const Yaml* verify_service =
      FindResource(documents, "Service", "ferry-verify-gpu");
  ASSERT_NE(compile_service, nullptr);
  ASSERT_NE(verify_service, nullptr);
  ExpectHeadlessServiceFor(*compile_service, *compile);
  ExpectHeadlessServiceFor(*verify_service, *verify);

  const Yaml* hpa =
      FindResource(documents, "HorizontalPodAutoscaler", "ferry-compile");
  ASSERT_NE(hpa, nullptr);
  EXPECT_EQ(hpa->Str("apiVersion"), "autoscaling/v2");
  EXPECT_EQ(hpa->Str("spec.scaleTargetRef.kind"), "Deployment");
  EXPECT_EQ(hpa->Str("spec.scaleTargetRef.name"), "ferry-compile");
  int min_replicas = std::atoi(hpa->Str("spec.minReplicas").c_str());
  int max_replicas = std::atoi(hpa->Str("spec.maxReplicas").c_str());
  EXPECT_GE(min_replicas, 2);
  EXPECT_GT(max_replicas, min_replicas);
  EXPECT_TRUE(hpa->Has("spec.metrics[0]"));

  // Only client namespaces reach the pods: gRPC from namespaces labelled
  // as Ferry clients, metrics from the scraping namespace, nothing else.
  const Yaml* policy =
      FindResource(documents, "NetworkPolicy", "ferry-ingress");
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->Str("apiVersion"), "networking.k8s.io/v1");
  EXPECT_EQ(policy->Str("spec.policyTypes[0]"), "Ingress");
  std::set<std::string> selected;
  if (const Yaml* values =
          policy->Find("spec.podSelector.matchExpressions[0].values")) {
    EXPECT_EQ(policy->Str("spec.podSelector.matchExpressions[0].key"),
              "app.kubernetes.io/name");
    EXPECT_EQ(policy->Str("spec.podSelector.matchExpressions[0].operator"),
              "In");
    for (const Yaml& value : values->list) selected.insert(value.scalar);
  }
  EXPECT_EQ(selected,
            (std::set<std::string>{"ferry-compile", "ferry-verify-gpu"}));
  const Yaml* rules = policy->Find("spec.ingress");
  ASSERT_NE(rules, nullptr);
  std::set<std::string> ports;
  for (const Yaml& rule : rules->list) {
    const Yaml* from = rule.Find("from");
    ASSERT_NE(from, nullptr) << "an ingress rule without `from` admits all";
    for (const Yaml& peer : from->list) {
      // Namespaces by label only: no ipBlock, no empty selector.
      EXPECT_FALSE(peer.Has("ipBlock"));
      const Yaml* labels = peer.Find("namespaceSelector.matchLabels");
      ASSERT_NE(labels, nullptr);
      EXPECT_FALSE(labels->map.empty());
    }
    const Yaml* rule_ports = rule.Find("ports");
    ASSERT_NE(rule_ports, nullptr) << "an ingress rule without ports";
    for (const Yaml& port : rule_ports->list) ports.insert(port.Str("port"));
  }
  EXPECT_EQ(ports, (std::set<std::string>{"50051", "9090"}));

  const Yaml* pdb =
      FindResource(documents, "PodDisruptionBudget", "ferry-compile");
  ASSERT_NE(pdb, nullptr);
  EXPECT_EQ(pdb->Str("apiVersion"), "policy/v1");
  EXPECT_TRUE(pdb->Has("spec.maxUnavailable") || pdb->Has("spec.minAvailable"));
  const Yaml* pdb_selector = pdb->Find("spec.selector.matchLabels");
  ASSERT_NE(pdb_selector, nullptr);
  for (const auto& [key, value] : pdb_selector->map) {
    EXPECT_EQ(ChildStr(compile->Find("spec.template.metadata.labels"), key),
              value.scalar);
  }
}

TEST(ManifestTest, EveryManifestParsesAndIsListedInTheKustomization) {
  Yaml kustomization = Kustomization();
  EXPECT_EQ(kustomization.Str("kind"), "Kustomization");
  EXPECT_EQ(kustomization.Str("namespace"), "ferry");
  std::set<std::string> listed;
  if (const Yaml* resources = kustomization.Find("resources")) {
    for (const Yaml& resource : resources->list) listed.insert(resource.scalar);
  }
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kK8s)) {
    std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".yaml" || name == "kustomization.yaml") {
      continue;
    }
    files.insert(name);
    absl::StatusOr<std::vector<Yaml>> parsed =
        ParseYamlDocuments(ReadText(entry.path().string()));
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.status();
    for (const Yaml& document : *parsed) {
      EXPECT_FALSE(document.Str("apiVersion").empty()) << name;
      EXPECT_FALSE(document.Str("kind").empty()) << name;
      EXPECT_FALSE(document.Str("metadata.name").empty()) << name;
    }
  }
  EXPECT_EQ(files, listed);
}

TEST(MiniYamlTest, ReadsTheShapesKubectlPrints) {
  absl::StatusOr<std::vector<Yaml>> parsed = ParseYamlDocuments(R"(# c
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
  const Yaml& first = (*parsed)[0];
  EXPECT_EQ(first.Str("a"), "1");
  EXPECT_EQ(first.Str("b[0].name"), "x");
  EXPECT_EQ(first.Str("b[0].port"), "50051");
  EXPECT_EQ(first.Str("b[1]"), "plain");
  EXPECT_EQ(first.Str("c.d"), "it's");
  EXPECT_EQ(first.Str("c.e[1]"), "two, three");
  EXPECT_EQ(first.Find("c.f")->kind, Yaml::Kind::kMap);
  EXPECT_EQ(first.Str("c.g"), "line 1\nline 2");
  EXPECT_EQ((*parsed)[1].Str("kind"), "Second");
  EXPECT_FALSE(ParseYamlDocuments("a: 1\n   b: 2\n").ok());
  EXPECT_FALSE(ParseYamlDocuments("a: &anchor 1\n").ok());
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
ServerConfig ContainerConfig(const Yaml& container, const std::string& conf) {
  ServerConfig config;
  absl::Status status =
      ApplyConfigText(ReadText(kDeploy + "/" + conf), conf, config);
  EXPECT_TRUE(status.ok()) << status;
  if (const Yaml* args = container.Find("args")) {
    for (const Yaml& arg : args->list) {
      std::string flag = arg.scalar;
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
  std::vector<Yaml> documents = RenderedManifests(&how);
  ASSERT_FALSE(documents.empty());
  const Yaml* redis = FindResource(documents, "Deployment", "ferry-redis");
  const Yaml* redis_service = FindResource(documents, "Service", "ferry-redis");
  ASSERT_NE(redis, nullptr);
  ASSERT_NE(redis_service, nullptr);
  const std::string redis_port = redis_service->Str("spec.ports[0].port");

  for (const auto& [name, conf] :
       std::vector<std::pair<std::string, std::string>>{
           {"ferry-compile", "ferryd.conf"},
           {"ferry-verify-gpu", "ferryd-gpu.conf"}}) {
    SCOPED_TRACE(name);
    const Yaml* deployment = FindResource(documents, "Deployment", name);
    ASSERT_NE(deployment, nullptr);
    const Yaml* pod = deployment->Find("spec.template.spec");
    const Yaml* container =
        deployment->Find("spec.template.spec.containers[0]");
    ASSERT_NE(container, nullptr);
    ServerConfig config = ContainerConfig(*container, conf);

    // Both reach the shared tier through its Service.
    EXPECT_EQ(config.cache_redis, absl::StrCat("ferry-redis:", redis_port));
    // Connections age out so clients spread to new pods, and an aged
    // connection's calls finish before the pod could be killed.
    EXPECT_GT(config.max_connection_age.count(), 0);
    EXPECT_LE(
        config.max_connection_age_grace.count(),
        std::atoll(pod->Str("terminationGracePeriodSeconds").c_str()) * 1000);

    // Memory admission: a request at the node limit fits in the budget
    // beside the cache, and the budget sits under the pod's limit with
    // room for the process itself (measured idle peak ~60 MiB).
    const int64_t largest =
        JobMemoryEstimate(config.max_nodes) +
        RequestMemoryEstimate(config.max_nodes * 60);  // ~58 wire B/node
    EXPECT_LE(largest + config.cache_bytes, config.max_memory_bytes)
        << "a legal request at --max-nodes could never be admitted";
    const int64_t pod_limit =
        Quantity(container->Str("resources.limits.memory"));
    EXPECT_GE(pod_limit - config.max_memory_bytes, int64_t{512} << 20)
        << "the pod's memory limit leaves too little above the budget";
  }

  // The HPA scales on the queue, not CPU only.
  const Yaml* hpa =
      FindResource(documents, "HorizontalPodAutoscaler", "ferry-compile");
  ASSERT_NE(hpa, nullptr);
  bool on_queue = false;
  if (const Yaml* metrics = hpa->Find("spec.metrics")) {
    for (const Yaml& metric : metrics->list) {
      on_queue |= metric.Str("type") == "Pods" &&
                  metric.Str("pods.metric.name") == "ferry_queue_depth";
    }
  }
  EXPECT_TRUE(on_queue);

  // The GPU endpoint rolls out without a spare GPU and asks for one GPU.
  const Yaml* verify =
      FindResource(documents, "Deployment", "ferry-verify-gpu");
  ASSERT_NE(verify, nullptr);
  EXPECT_EQ(verify->Str("spec.strategy.rollingUpdate.maxSurge"), "0");
  EXPECT_EQ(verify->Str("spec.strategy.rollingUpdate.maxUnavailable"), "1");

  // Redis is a cache: bounded, evicting, not persisted; only ferryd
  // reaches it.
  const Yaml* redis_container = redis->Find("spec.template.spec.containers[0]");
  ASSERT_NE(redis_container, nullptr);
  std::vector<std::string> args;
  if (const Yaml* list = redis_container->Find("args")) {
    for (const Yaml& arg : list->list) args.push_back(arg.scalar);
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
            Quantity(redis_container->Str("resources.limits.memory")));
  const Yaml* redis_policy =
      FindResource(documents, "NetworkPolicy", "ferry-redis");
  ASSERT_NE(redis_policy, nullptr);
  EXPECT_EQ(redis_policy->Str("spec.ingress[0].ports[0].port"), redis_port);
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
