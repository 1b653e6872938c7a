// The model zoo: the torchvision definitions of the standard CNNs (the architectures
// tf_cnn_benchmarks and PyTorch benchmarks run), inference graphs with weights from a fixed seed
// (He initialisation, batch-norm statistics near identity) so activations stay finite; nothing is
// downloaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfpin/engine/graph.hpp"

namespace tfpin::engine {

enum class Model { resnet50, inception3, vgg16, googlenet, alexnet };

const char* to_string(Model model);  // "resnet50", ...
std::optional<Model> parse_model(std::string_view name);
std::vector<std::string> model_names();
std::int64_t image_size(Model model);  // 224, or 299 for inception3
inline constexpr std::int64_t num_classes = 1000;

// Input "images" (batch, 3, S, S) in `layout`; output "probabilities" (batch, 1000), softmax.
Graph build_model(Model model, std::int64_t batch, Layout layout, std::uint64_t seed = 1);

}  // namespace tfpin::engine
