#include "types/gpu.hpp"

#include "types/catalog.hpp"

namespace loom {

const std::vector<gpu_spec>& builtin_gpus() {
  // WEAVE Table 1: H20 148 TFLOPS / 96 GB / 4.0 TB/s / $1.85; H800 989.5 / 80 / 3.35 / $5.28.
  // NVLink: H20 and H100 SXM 900 GB/s bidirectional (450 each way), H800 400 GB/s (200).
  // H100 price: no table in the papers; set near H800 and overridable in config.
  static const std::vector<gpu_spec> catalog{
    {"H20", 148.0, 96.0, 4.0, 450.0, 1.85},
    {"H800", 989.5, 80.0, 3.35, 200.0, 5.28},
    {"H100", 989.5, 80.0, 3.35, 450.0, 5.28},
  };
  return catalog;
}

std::optional<gpu_spec> find_builtin_gpu(std::string_view name) {
  return find_by_name(builtin_gpus(), name);
}

} // namespace loom
