// The model zoo, following torchvision's definitions layer by layer (so PyTorch runs the very same
// networks for comparison). Weights: He-uniform from a fixed seed; batch norm near identity.
#include "tfpin/engine/models.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

namespace tfpin::engine {

const char* to_string(Model model) {
  switch (model) {
    case Model::resnet50:
      return "resnet50";
    case Model::inception3:
      return "inception3";
    case Model::vgg16:
      return "vgg16";
    case Model::googlenet:
      return "googlenet";
    case Model::alexnet:
      return "alexnet";
  }
  return "?";
}

std::vector<std::string> model_names() {
  return {"resnet50", "inception3", "vgg16", "googlenet", "alexnet"};
}

std::optional<Model> parse_model(std::string_view name) {
  for (Model m :
       {Model::resnet50, Model::inception3, Model::vgg16, Model::googlenet, Model::alexnet}) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

std::int64_t image_size(Model model) { return model == Model::inception3 ? 299 : 224; }

namespace {

// splitmix64: fast, and the same weights on every machine for a seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }

 private:
  std::uint64_t state_;
};

struct T {
  TensorId id = no_tensor;
  std::int64_t c = 0;  // channels (features for matrices)
  std::int64_t h = 0;
  std::int64_t w = 0;
};

class Net {
 public:
  Net(Graph& g, std::uint64_t seed) : g_(g), rng_(seed) {}

  std::vector<float> he_uniform(std::size_t n, std::int64_t fan_in, float gain = 1.0f) {
    const float a = gain * std::sqrt(6.0f / static_cast<float>(fan_in));
    std::vector<float> v(n);
    for (float& x : v) x = rng_.uniform(-a, a);
    return v;
  }
  std::vector<float> uniform(std::size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = rng_.uniform(lo, hi);
    return v;
  }

  T conv(const T& x, std::int64_t oc, std::int64_t kh, std::int64_t kw, std::int64_t stride,
         std::int64_t ph, std::int64_t pw, bool bias, const std::string& name) {
    const std::int64_t fan_in = x.c * kh * kw;
    TensorId w = g_.constant(name + ".weight", {oc, x.c, kh, kw},
                             he_uniform(static_cast<std::size_t>(oc * fan_in), fan_in));
    TensorId b = no_tensor;
    if (bias)
      b = g_.constant(name + ".bias", {oc}, uniform(static_cast<std::size_t>(oc), -0.05f, 0.05f));
    Conv2D a;
    a.stride = {stride, stride};
    a.padding = {ph, pw, ph, pw};
    T y;
    y.id = g_.convolution(x.id, w, b, a, name);
    y.c = oc;
    y.h = (x.h + 2 * ph - kh) / stride + 1;
    y.w = (x.w + 2 * pw - kw) / stride + 1;
    return y;
  }

  T bn(const T& x, float eps, const std::string& name, float gamma = 1.0f) {
    auto c = static_cast<std::size_t>(x.c);
    TensorId scale = g_.constant(name + ".weight", {x.c}, uniform(c, 0.9f * gamma, 1.1f * gamma));
    TensorId shift = g_.constant(name + ".bias", {x.c}, uniform(c, -0.05f, 0.05f));
    TensorId mean = g_.constant(name + ".running_mean", {x.c}, uniform(c, -0.05f, 0.05f));
    TensorId var = g_.constant(name + ".running_var", {x.c}, uniform(c, 0.9f, 1.1f));
    T y = x;
    y.id = g_.batch_norm(x.id, scale, shift, mean, var, BatchNorm{eps}, name);
    return y;
  }

  T relu(const T& x, const std::string& name) {
    T y = x;
    y.id = g_.relu(x.id, name);
    return y;
  }

  // torchvision's BasicConv2d: convolution without bias, batch norm (eps 0.001), ReLU.
  T basic(const T& x, std::int64_t oc, std::int64_t kh, std::int64_t kw, std::int64_t stride,
          std::int64_t ph, std::int64_t pw, const std::string& name) {
    T y = conv(x, oc, kh, kw, stride, ph, pw, false, name + ".conv");
    y = bn(y, 0.001f, name + ".bn");
    return relu(y, name + ".relu");
  }

  T pool(const T& x, bool max, std::int64_t k, std::int64_t stride, std::int64_t pad, bool ceil,
         const std::string& name) {
    Pool2D a;
    a.kernel = {k, k};
    a.stride = {stride, stride};
    a.padding = {pad, pad, pad, pad};
    a.ceil_mode = ceil;
    a.count_include_pad = true;
    T y = x;
    y.id = max ? g_.max_pool(x.id, a, name) : g_.avg_pool(x.id, a, name);
    auto out = [&](std::int64_t size) {
      std::int64_t span = size + 2 * pad - k;
      std::int64_t n = ceil ? (span + stride - 1) / stride + 1 : span / stride + 1;
      if (ceil && (n - 1) * stride >= size + pad) --n;
      return n;
    };
    y.h = out(x.h);
    y.w = out(x.w);
    return y;
  }

  T global_avg_pool(const T& x, const std::string& name) {
    Pool2D a;
    a.kernel = {x.h, x.w};
    T y = x;
    y.id = g_.avg_pool(x.id, a, name);
    y.h = y.w = 1;
    return y;
  }

  T concat(const std::vector<T>& xs, const std::string& name) {
    std::vector<TensorId> ids;
    T y = xs.front();
    y.c = 0;
    for (const T& x : xs) {
      ids.push_back(x.id);
      y.c += x.c;
    }
    y.id = g_.concat(ids, name);
    return y;
  }

  T flatten(const T& x, const std::string& name) {
    T y;
    y.id = g_.flatten(x.id, name);
    y.c = x.c * x.h * x.w;
    return y;
  }

  T fc(const T& x, std::int64_t out, const std::string& name) {
    TensorId w = g_.constant(name + ".weight", {out, x.c},
                             he_uniform(static_cast<std::size_t>(out * x.c), x.c, 0.7f));
    TensorId b =
        g_.constant(name + ".bias", {out}, uniform(static_cast<std::size_t>(out), -0.05f, 0.05f));
    T y;
    y.id = g_.inner_product(x.id, w, b, name);
    y.c = out;
    return y;
  }

  T dropout(const T& x, float rate, const std::string& name) {
    T y = x;
    y.id = g_.dropout(x.id, Dropout{rate}, name);
    return y;
  }

  T add(const T& a, const T& b, const std::string& name) {
    T y = a;
    y.id = g_.add(a.id, b.id, name);
    return y;
  }

  void classifier_output(const T& logits) {
    TensorId p = g_.softmax(logits.id, "softmax");
    g_.output(p, "probabilities");
  }

 private:
  Graph& g_;
  Rng rng_;
};

T resnet50(Net& n, T x) {
  x = n.conv(x, 64, 7, 7, 2, 3, 3, false, "conv1");
  x = n.relu(n.bn(x, 1e-5f, "bn1"), "relu");
  x = n.pool(x, true, 3, 2, 1, false, "maxpool");
  const std::int64_t blocks[] = {3, 4, 6, 3};
  const std::int64_t widths[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    for (std::int64_t b = 0; b < blocks[stage]; ++b) {
      const std::string p = fmt::format("layer{}.{}", stage + 1, b);
      const std::int64_t w = widths[stage];
      const std::int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      T identity = x;
      T y = n.relu(n.bn(n.conv(x, w, 1, 1, 1, 0, 0, false, p + ".conv1"), 1e-5f, p + ".bn1"),
                   p + ".relu1");
      y = n.relu(n.bn(n.conv(y, w, 3, 3, stride, 1, 1, false, p + ".conv2"), 1e-5f, p + ".bn2"),
                 p + ".relu2");
      // A small last gamma keeps the residual stream's scale in check (as zero-init-residual does).
      y = n.bn(n.conv(y, w * 4, 1, 1, 1, 0, 0, false, p + ".conv3"), 1e-5f, p + ".bn3", 0.3f);
      if (b == 0) {
        identity = n.bn(n.conv(x, w * 4, 1, 1, stride, 0, 0, false, p + ".downsample.0"), 1e-5f,
                        p + ".downsample.1");
      }
      x = n.relu(n.add(y, identity, p + ".add"), p + ".relu3");
    }
  }
  x = n.global_avg_pool(x, "avgpool");
  x = n.flatten(x, "flatten");
  return n.fc(x, num_classes, "fc");
}

T inception_a(Net& n, const T& x, std::int64_t pool_features, const std::string& p) {
  T b1 = n.basic(x, 64, 1, 1, 1, 0, 0, p + ".branch1x1");
  T b5 = n.basic(x, 48, 1, 1, 1, 0, 0, p + ".branch5x5_1");
  b5 = n.basic(b5, 64, 5, 5, 1, 2, 2, p + ".branch5x5_2");
  T b3 = n.basic(x, 64, 1, 1, 1, 0, 0, p + ".branch3x3dbl_1");
  b3 = n.basic(b3, 96, 3, 3, 1, 1, 1, p + ".branch3x3dbl_2");
  b3 = n.basic(b3, 96, 3, 3, 1, 1, 1, p + ".branch3x3dbl_3");
  T bp = n.pool(x, false, 3, 1, 1, false, p + ".branch_pool_avg");
  bp = n.basic(bp, pool_features, 1, 1, 1, 0, 0, p + ".branch_pool");
  return n.concat({b1, b5, b3, bp}, p);
}

T inception_b(Net& n, const T& x, const std::string& p) {
  T b3 = n.basic(x, 384, 3, 3, 2, 0, 0, p + ".branch3x3");
  T bd = n.basic(x, 64, 1, 1, 1, 0, 0, p + ".branch3x3dbl_1");
  bd = n.basic(bd, 96, 3, 3, 1, 1, 1, p + ".branch3x3dbl_2");
  bd = n.basic(bd, 96, 3, 3, 2, 0, 0, p + ".branch3x3dbl_3");
  T bp = n.pool(x, true, 3, 2, 0, false, p + ".branch_pool");
  return n.concat({b3, bd, bp}, p);
}

T inception_c(Net& n, const T& x, std::int64_t c7, const std::string& p) {
  T b1 = n.basic(x, 192, 1, 1, 1, 0, 0, p + ".branch1x1");
  T b7 = n.basic(x, c7, 1, 1, 1, 0, 0, p + ".branch7x7_1");
  b7 = n.basic(b7, c7, 1, 7, 1, 0, 3, p + ".branch7x7_2");
  b7 = n.basic(b7, 192, 7, 1, 1, 3, 0, p + ".branch7x7_3");
  T bd = n.basic(x, c7, 1, 1, 1, 0, 0, p + ".branch7x7dbl_1");
  bd = n.basic(bd, c7, 7, 1, 1, 3, 0, p + ".branch7x7dbl_2");
  bd = n.basic(bd, c7, 1, 7, 1, 0, 3, p + ".branch7x7dbl_3");
  bd = n.basic(bd, c7, 7, 1, 1, 3, 0, p + ".branch7x7dbl_4");
  bd = n.basic(bd, 192, 1, 7, 1, 0, 3, p + ".branch7x7dbl_5");
  T bp = n.pool(x, false, 3, 1, 1, false, p + ".branch_pool_avg");
  bp = n.basic(bp, 192, 1, 1, 1, 0, 0, p + ".branch_pool");
  return n.concat({b1, b7, bd, bp}, p);
}

T inception_d(Net& n, const T& x, const std::string& p) {
  T b3 = n.basic(x, 192, 1, 1, 1, 0, 0, p + ".branch3x3_1");
  b3 = n.basic(b3, 320, 3, 3, 2, 0, 0, p + ".branch3x3_2");
  T b7 = n.basic(x, 192, 1, 1, 1, 0, 0, p + ".branch7x7x3_1");
  b7 = n.basic(b7, 192, 1, 7, 1, 0, 3, p + ".branch7x7x3_2");
  b7 = n.basic(b7, 192, 7, 1, 1, 3, 0, p + ".branch7x7x3_3");
  b7 = n.basic(b7, 192, 3, 3, 2, 0, 0, p + ".branch7x7x3_4");
  T bp = n.pool(x, true, 3, 2, 0, false, p + ".branch_pool");
  return n.concat({b3, b7, bp}, p);
}

T inception_e(Net& n, const T& x, const std::string& p) {
  T b1 = n.basic(x, 320, 1, 1, 1, 0, 0, p + ".branch1x1");
  T b3 = n.basic(x, 384, 1, 1, 1, 0, 0, p + ".branch3x3_1");
  T b3a = n.basic(b3, 384, 1, 3, 1, 0, 1, p + ".branch3x3_2a");
  T b3b = n.basic(b3, 384, 3, 1, 1, 1, 0, p + ".branch3x3_2b");
  T b3c = n.concat({b3a, b3b}, p + ".branch3x3");
  T bd = n.basic(x, 448, 1, 1, 1, 0, 0, p + ".branch3x3dbl_1");
  bd = n.basic(bd, 384, 3, 3, 1, 1, 1, p + ".branch3x3dbl_2");
  T bda = n.basic(bd, 384, 1, 3, 1, 0, 1, p + ".branch3x3dbl_3a");
  T bdb = n.basic(bd, 384, 3, 1, 1, 1, 0, p + ".branch3x3dbl_3b");
  T bdc = n.concat({bda, bdb}, p + ".branch3x3dbl");
  T bp = n.pool(x, false, 3, 1, 1, false, p + ".branch_pool_avg");
  bp = n.basic(bp, 192, 1, 1, 1, 0, 0, p + ".branch_pool");
  return n.concat({b1, b3c, bdc, bp}, p);
}

T inception3(Net& n, T x) {
  x = n.basic(x, 32, 3, 3, 2, 0, 0, "Conv2d_1a_3x3");
  x = n.basic(x, 32, 3, 3, 1, 0, 0, "Conv2d_2a_3x3");
  x = n.basic(x, 64, 3, 3, 1, 1, 1, "Conv2d_2b_3x3");
  x = n.pool(x, true, 3, 2, 0, false, "maxpool1");
  x = n.basic(x, 80, 1, 1, 1, 0, 0, "Conv2d_3b_1x1");
  x = n.basic(x, 192, 3, 3, 1, 0, 0, "Conv2d_4a_3x3");
  x = n.pool(x, true, 3, 2, 0, false, "maxpool2");
  x = inception_a(n, x, 32, "Mixed_5b");
  x = inception_a(n, x, 64, "Mixed_5c");
  x = inception_a(n, x, 64, "Mixed_5d");
  x = inception_b(n, x, "Mixed_6a");
  x = inception_c(n, x, 128, "Mixed_6b");
  x = inception_c(n, x, 160, "Mixed_6c");
  x = inception_c(n, x, 160, "Mixed_6d");
  x = inception_c(n, x, 192, "Mixed_6e");
  x = inception_d(n, x, "Mixed_7a");
  x = inception_e(n, x, "Mixed_7b");
  x = inception_e(n, x, "Mixed_7c");
  x = n.global_avg_pool(x, "avgpool");
  x = n.dropout(x, 0.5f, "dropout");
  x = n.flatten(x, "flatten");
  return n.fc(x, num_classes, "fc");
}

T vgg16(Net& n, T x) {
  const std::int64_t cfg[] = {64, 64,  0,   128, 128, 0,   256, 256, 256,
                              0,  512, 512, 512, 0,   512, 512, 512, 0};
  int index = 0;
  for (std::int64_t c : cfg) {
    if (c == 0) {
      x = n.pool(x, true, 2, 2, 0, false, fmt::format("features.{}", index++));
    } else {
      x = n.conv(x, c, 3, 3, 1, 1, 1, true, fmt::format("features.{}", index++));
      x = n.relu(x, fmt::format("features.{}", index++));
    }
  }
  x = n.flatten(x, "flatten");
  x = n.relu(n.fc(x, 4096, "classifier.0"), "classifier.1");
  x = n.dropout(x, 0.5f, "classifier.2");
  x = n.relu(n.fc(x, 4096, "classifier.3"), "classifier.4");
  x = n.dropout(x, 0.5f, "classifier.5");
  return n.fc(x, num_classes, "classifier.6");
}

T googlenet_inception(Net& n, const T& x, std::int64_t c1, std::int64_t c3r, std::int64_t c3,
                      std::int64_t c5r, std::int64_t c5, std::int64_t pp, const std::string& p) {
  T b1 = n.basic(x, c1, 1, 1, 1, 0, 0, p + ".branch1");
  T b2 = n.basic(n.basic(x, c3r, 1, 1, 1, 0, 0, p + ".branch2.0"), c3, 3, 3, 1, 1, 1,
                 p + ".branch2.1");
  // torchvision keeps a 3x3 here where the paper has 5x5 (its pretrained weights need it).
  T b3 = n.basic(n.basic(x, c5r, 1, 1, 1, 0, 0, p + ".branch3.0"), c5, 3, 3, 1, 1, 1,
                 p + ".branch3.1");
  T b4 = n.pool(x, true, 3, 1, 1, true, p + ".branch4.0");
  b4 = n.basic(b4, pp, 1, 1, 1, 0, 0, p + ".branch4.1");
  return n.concat({b1, b2, b3, b4}, p);
}

T googlenet(Net& n, T x) {
  x = n.basic(x, 64, 7, 7, 2, 3, 3, "conv1");
  x = n.pool(x, true, 3, 2, 0, true, "maxpool1");
  x = n.basic(x, 64, 1, 1, 1, 0, 0, "conv2");
  x = n.basic(x, 192, 3, 3, 1, 1, 1, "conv3");
  x = n.pool(x, true, 3, 2, 0, true, "maxpool2");
  x = googlenet_inception(n, x, 64, 96, 128, 16, 32, 32, "inception3a");
  x = googlenet_inception(n, x, 128, 128, 192, 32, 96, 64, "inception3b");
  x = n.pool(x, true, 3, 2, 0, true, "maxpool3");
  x = googlenet_inception(n, x, 192, 96, 208, 16, 48, 64, "inception4a");
  x = googlenet_inception(n, x, 160, 112, 224, 24, 64, 64, "inception4b");
  x = googlenet_inception(n, x, 128, 128, 256, 24, 64, 64, "inception4c");
  x = googlenet_inception(n, x, 112, 144, 288, 32, 64, 64, "inception4d");
  x = googlenet_inception(n, x, 256, 160, 320, 32, 128, 128, "inception4e");
  x = n.pool(x, true, 2, 2, 0, true, "maxpool4");
  x = googlenet_inception(n, x, 256, 160, 320, 32, 128, 128, "inception5a");
  x = googlenet_inception(n, x, 384, 192, 384, 48, 128, 128, "inception5b");
  x = n.global_avg_pool(x, "avgpool");
  x = n.flatten(x, "flatten");
  x = n.dropout(x, 0.2f, "dropout");
  return n.fc(x, num_classes, "fc");
}

T alexnet(Net& n, T x) {
  x = n.relu(n.conv(x, 64, 11, 11, 4, 2, 2, true, "features.0"), "features.1");
  x = n.pool(x, true, 3, 2, 0, false, "features.2");
  x = n.relu(n.conv(x, 192, 5, 5, 1, 2, 2, true, "features.3"), "features.4");
  x = n.pool(x, true, 3, 2, 0, false, "features.5");
  x = n.relu(n.conv(x, 384, 3, 3, 1, 1, 1, true, "features.6"), "features.7");
  x = n.relu(n.conv(x, 256, 3, 3, 1, 1, 1, true, "features.8"), "features.9");
  x = n.relu(n.conv(x, 256, 3, 3, 1, 1, 1, true, "features.10"), "features.11");
  x = n.pool(x, true, 3, 2, 0, false, "features.12");
  x = n.flatten(x, "flatten");  // avgpool(6x6) of a 6x6 map is the identity
  x = n.dropout(x, 0.5f, "classifier.0");
  x = n.relu(n.fc(x, 4096, "classifier.1"), "classifier.2");
  x = n.dropout(x, 0.5f, "classifier.3");
  x = n.relu(n.fc(x, 4096, "classifier.4"), "classifier.5");
  return n.fc(x, num_classes, "classifier.6");
}

}  // namespace

Graph build_model(Model model, std::int64_t batch, Layout layout, std::uint64_t seed) {
  Graph g;
  Net n(g, seed);
  const std::int64_t s = image_size(model);
  T x;
  x.id = g.input("images", {batch, 3, s, s}, layout);
  x.c = 3;
  x.h = x.w = s;
  T logits;
  switch (model) {
    case Model::resnet50:
      logits = resnet50(n, x);
      break;
    case Model::inception3:
      logits = inception3(n, x);
      break;
    case Model::vgg16:
      logits = vgg16(n, x);
      break;
    case Model::googlenet:
      logits = googlenet(n, x);
      break;
    case Model::alexnet:
      logits = alexnet(n, x);
      break;
  }
  n.classifier_output(logits);
  return g;
}

}  // namespace tfpin::engine
