#pragma once
// GPU specifications and prices. Built-in entries come from WEAVE Table 1 (H20, H800:
// TFLOPS, HBM, bandwidth, $/GPU-hour) and vendor datasheets (H100, NVLink bandwidth); a config
// may override any field or add a type.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

struct gpu_spec {
  std::string name;
  double bf16_tflops = 0;       // dense BF16 tensor throughput
  double hbm_gb = 0;            // HBM capacity
  double hbm_tbps = 0;          // HBM bandwidth, TB/s
  double nvlink_gbps = 0;       // NVLink bandwidth per GPU, GB/s (unidirectional)
  double cost_per_gpu_hour = 0; // USD
};

/// The built-in catalog, in a fixed order.
const std::vector<gpu_spec>& builtin_gpus();

std::optional<gpu_spec> find_builtin_gpu(std::string_view name);

} // namespace loom
