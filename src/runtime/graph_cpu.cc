// CPU Graph backend: capture installs a CaptureSink on the capturing thread; ops that follow
// the capture rules (include/linattn/graph.h) record their bound closures in it. Instantiation
// freezes the list; replay runs the closures in order on the calling thread (each closure may
// use the thread pool). Recording is the only allocation, and it happens at capture time.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/capture.h"
#include "runtime/graph_impl.h"

namespace linattn::runtime {
namespace {

class CpuGraph final : public GraphImpl, private CaptureSink {
 public:
  ~CpuGraph() override { abort_capture(); }

  void begin_capture() override {
    recording_.clear();
    set_active_cpu_capture(this);
  }
  void end_capture() override {
    set_active_cpu_capture(nullptr);
    program_ = std::move(recording_);
    recording_.clear();
  }
  void abort_capture() override {
    if (active_cpu_capture() == this) set_active_cpu_capture(nullptr);
    recording_.clear();
  }
  void replay() override {
    for (const Node& n : program_) n.work();
  }
  void reset() override { program_.clear(); }
  bool capture_is_current() const override { return active_cpu_capture() == this; }
  size_t num_nodes() const override { return program_.size() + recording_.size(); }
  std::vector<std::string> node_names() const override {
    std::vector<std::string> names;
    for (const Node& n : program_) names.push_back(n.name);
    for (const Node& n : recording_) names.push_back(n.name);
    return names;
  }

 private:
  struct Node {
    std::string name;
    std::function<void()> work;
  };
  void record(std::string name, std::function<void()> work) override {
    recording_.push_back({std::move(name), std::move(work)});
  }

  std::vector<Node> recording_;
  std::vector<Node> program_;
};

}  // namespace

std::unique_ptr<GraphImpl> make_cpu_graph() { return std::make_unique<CpuGraph>(); }

}  // namespace linattn::runtime
