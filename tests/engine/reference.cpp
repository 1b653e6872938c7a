#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <variant>

namespace tfpin::engine::reference {

namespace {

using Dims = std::vector<std::int64_t>;

struct Tensor {
  Dims dims;
  std::vector<float> data;  // logical row-major
};

std::size_t count(const Dims& d) {
  std::size_t n = 1;
  for (auto x : d) n *= static_cast<std::size_t>(x);
  return n;
}

Tensor conv(const Tensor& x, const Tensor& w, const Tensor* b, const Conv2D& a) {
  const auto N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const auto O = w.dims[0], I = w.dims[1], KH = w.dims[2], KW = w.dims[3];
  const auto G = a.groups;
  const auto DH = a.dilation[0], DW = a.dilation[1];
  const auto OH = (H + a.padding[0] + a.padding[2] - ((KH - 1) * DH + 1)) / a.stride[0] + 1;
  const auto OW = (W + a.padding[1] + a.padding[3] - ((KW - 1) * DW + 1)) / a.stride[1] + 1;
  Tensor y{{N, O, OH, OW}, std::vector<float>(static_cast<std::size_t>(N * O * OH * OW))};
  const auto OG = O / G;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o) {
      const auto g = o / OG;
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double acc = b ? b->data[static_cast<std::size_t>(o)] : 0.0;
          for (std::int64_t i = 0; i < I; ++i) {
            const auto c = g * I + i;
            for (std::int64_t kh = 0; kh < KH; ++kh) {
              const auto ih = oh * a.stride[0] - a.padding[0] + kh * DH;
              if (ih < 0 || ih >= H) continue;
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const auto iw = ow * a.stride[1] - a.padding[1] + kw * DW;
                if (iw < 0 || iw >= W) continue;
                acc += static_cast<double>(
                           x.data[static_cast<std::size_t>(((n * C + c) * H + ih) * W + iw)]) *
                       w.data[static_cast<std::size_t>(((o * I + i) * KH + kh) * KW + kw)];
              }
            }
          }
          y.data[static_cast<std::size_t>(((n * O + o) * OH + oh) * OW + ow)] =
              static_cast<float>(acc);
        }
    }
  return y;
}

Tensor pool(const Tensor& x, const Pool2D& a, bool max) {
  const auto N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  std::int64_t out[2];
  for (int d = 0; d < 2; ++d) {
    const auto size = x.dims[static_cast<std::size_t>(d + 2)];
    const auto lo = a.padding[static_cast<std::size_t>(d)],
               hi = a.padding[static_cast<std::size_t>(d + 2)];
    const auto k = a.kernel[static_cast<std::size_t>(d)], s = a.stride[static_cast<std::size_t>(d)];
    const auto span = size + lo + hi - k;
    out[d] = span / s + 1;
    if (a.ceil_mode) {
      out[d] = (span + s - 1) / s + 1;
      if ((out[d] - 1) * s >= size + lo) --out[d];
    }
  }
  Tensor y{{N, C, out[0], out[1]},
           std::vector<float>(static_cast<std::size_t>(N * C * out[0] * out[1]))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t oh = 0; oh < out[0]; ++oh)
        for (std::int64_t ow = 0; ow < out[1]; ++ow) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          std::int64_t valid = 0;
          for (std::int64_t kh = 0; kh < a.kernel[0]; ++kh) {
            const auto ih = oh * a.stride[0] - a.padding[0] + kh;
            if (ih < 0 || ih >= H) continue;
            for (std::int64_t kw = 0; kw < a.kernel[1]; ++kw) {
              const auto iw = ow * a.stride[1] - a.padding[1] + kw;
              if (iw < 0 || iw >= W) continue;
              const double v = x.data[static_cast<std::size_t>(((n * C + c) * H + ih) * W + iw)];
              acc = max ? std::max(acc, v) : acc + v;
              ++valid;
            }
          }
          if (!max) {
            // oneDNN's include-padding divides by the kernel area (also where ceil mode pads).
            const auto area = a.kernel[0] * a.kernel[1];
            acc /= static_cast<double>(a.count_include_pad ? area : valid);
          }
          y.data[static_cast<std::size_t>(((n * C + c) * out[0] + oh) * out[1] + ow)] =
              static_cast<float>(acc);
        }
  return y;
}

Tensor inner_product(const Tensor& x, const Tensor& w, const Tensor* b) {
  const auto N = x.dims[0];
  const auto I = static_cast<std::int64_t>(count(x.dims)) / N;
  const auto O = w.dims[0];
  Tensor y{{N, O}, std::vector<float>(static_cast<std::size_t>(N * O))};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t o = 0; o < O; ++o) {
      double acc = b ? b->data[static_cast<std::size_t>(o)] : 0.0;
      for (std::int64_t i = 0; i < I; ++i) {
        acc += static_cast<double>(x.data[static_cast<std::size_t>(n * I + i)]) *
               w.data[static_cast<std::size_t>(o * I + i)];
      }
      y.data[static_cast<std::size_t>(n * O + o)] = static_cast<float>(acc);
    }
  return y;
}

double activation(const Eltwise& a, double x) {
  switch (a.kind) {
    case EltwiseKind::leaky_relu:
      return x >= 0 ? x : a.alpha * x;
    case EltwiseKind::clip:
      return std::min(std::max(x, static_cast<double>(a.alpha)), static_cast<double>(a.beta));
    case EltwiseKind::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case EltwiseKind::hard_sigmoid:
      return std::max(0.0, std::min(1.0, a.alpha * x + a.beta));
    case EltwiseKind::hard_swish:
      return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5));
    case EltwiseKind::tanh:
      return std::tanh(x);
  }
  throw std::invalid_argument("unknown activation");
}

// a (op) b with b broadcast NumPy's way (right-aligned, 1s stretched).
Tensor binary(const Tensor& a, const Tensor& b, BinaryKind kind) {
  Tensor y = a;
  const std::size_t rank = a.dims.size();
  Dims bd(rank - b.dims.size(), 1);
  bd.insert(bd.end(), b.dims.begin(), b.dims.end());
  std::vector<std::size_t> index(rank, 0);
  for (std::size_t k = 0; k < a.data.size(); ++k) {
    std::size_t rest = k;
    for (std::size_t d = rank; d-- > 0;) {
      index[d] = rest % static_cast<std::size_t>(a.dims[d]);
      rest /= static_cast<std::size_t>(a.dims[d]);
    }
    std::size_t j = 0;
    for (std::size_t d = 0; d < rank; ++d) {
      j = j * static_cast<std::size_t>(bd[d]) + (bd[d] == 1 ? 0 : index[d]);
    }
    y.data[k] = kind == BinaryKind::add ? a.data[k] + b.data[j] : a.data[k] * b.data[j];
  }
  return y;
}

}  // namespace

namespace {

// Copies between the two user layouts; `to_nhwc` says which way.
std::vector<float> transpose_layout(const std::vector<float>& x, const Dims& d, bool to_nhwc) {
  std::vector<float> y(x.size());
  const auto N = d[0], C = d[1], H = d[2], W = d[3];
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t w = 0; w < W; ++w) {
          const auto nchw = static_cast<std::size_t>(((n * C + c) * H + h) * W + w);
          const auto nhwc = static_cast<std::size_t>(((n * H + h) * W + w) * C + c);
          if (to_nhwc) {
            y[nhwc] = x[nchw];
          } else {
            y[nchw] = x[nhwc];
          }
        }
  return y;
}

}  // namespace

std::vector<float> nchw_to_nhwc(const std::vector<float>& x, const Dims& d) {
  return transpose_layout(x, d, true);
}

std::vector<float> nhwc_to_nchw(const std::vector<float>& x, const Dims& d) {
  return transpose_layout(x, d, false);
}

std::map<std::string, std::vector<float>> evaluate(
    const Graph& graph, const std::map<std::string, std::vector<float>>& inputs,
    bool batch_statistics) {
  const auto& defs = graph.tensors();
  std::vector<Tensor> t(defs.size());
  Layout image_layout = Layout::nchw;
  bool have_image = false;
  for (std::size_t i = 0; i < defs.size(); ++i) {
    const TensorDef& d = defs[i];
    if (d.kind == TensorDef::Kind::input) {
      const auto& data = inputs.at(d.name);
      t[i].dims = d.dims;
      t[i].data = d.layout == Layout::nhwc ? nhwc_to_nchw(data, d.dims) : data;
      if (d.dims.size() == 4 && !have_image) {
        image_layout = d.layout;
        have_image = true;
      }
    } else if (d.kind == TensorDef::Kind::constant) {
      t[i].dims = d.dims;
      t[i].data = *d.data;
    }
  }
  for (const NodeDef& n : graph.nodes()) {
    auto in = [&](std::size_t k) -> const Tensor& {
      return t[static_cast<std::size_t>(n.inputs.at(k))];
    };
    Tensor y;
    switch (n.kind) {
      case OpKind::convolution:
        y = conv(in(0), in(1), n.inputs.size() > 2 ? &in(2) : nullptr, std::get<Conv2D>(n.attrs));
        break;
      case OpKind::batch_norm: {
        const Tensor& x = in(0);
        y = x;
        const auto C = x.dims[1];
        const std::size_t inner = count(x.dims) / static_cast<std::size_t>(x.dims[0] * C);
        const double eps = std::get<BatchNorm>(n.attrs).epsilon;
        std::vector<double> mean(in(3).data.begin(), in(3).data.end());
        std::vector<double> var(in(4).data.begin(), in(4).data.end());
        if (batch_statistics) {
          std::vector<double> sum(static_cast<std::size_t>(C), 0.0);
          std::vector<double> squares(static_cast<std::size_t>(C), 0.0);
          for (std::size_t k = 0; k < x.data.size(); ++k) {
            const auto c = static_cast<std::size_t>((k / inner) % static_cast<std::size_t>(C));
            sum[c] += x.data[k];
            squares[c] += static_cast<double>(x.data[k]) * x.data[k];
          }
          const double m = static_cast<double>(x.data.size()) / static_cast<double>(C);
          for (std::size_t c = 0; c < sum.size(); ++c) {
            mean[c] = sum[c] / m;
            var[c] = squares[c] / m - mean[c] * mean[c];
          }
        }
        for (std::size_t k = 0; k < y.data.size(); ++k) {
          const auto c = static_cast<std::size_t>((k / inner) % static_cast<std::size_t>(C));
          const double v = (x.data[k] - mean[c]) / std::sqrt(var[c] + eps);
          y.data[k] = static_cast<float>(v * in(1).data[c] + in(2).data[c]);
        }
        break;
      }
      case OpKind::relu:
        y = in(0);
        for (float& v : y.data) v = std::max(v, 0.0f);
        break;
      case OpKind::max_pool:
      case OpKind::avg_pool:
        y = pool(in(0), std::get<Pool2D>(n.attrs), n.kind == OpKind::max_pool);
        break;
      case OpKind::lrn: {
        const Tensor& x = in(0);
        const auto& a = std::get<Lrn>(n.attrs);
        y = x;
        const auto N = x.dims[0], C = x.dims[1], HW = x.dims[2] * x.dims[3];
        const auto half = (a.size - 1) / 2;
        for (std::int64_t b = 0; b < N; ++b)
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t p = 0; p < HW; ++p) {
              double sum = 0;
              for (std::int64_t cc = std::max<std::int64_t>(0, c - half);
                   cc <= std::min(C - 1, c + half); ++cc) {
                const double v = x.data[static_cast<std::size_t>((b * C + cc) * HW + p)];
                sum += v * v;
              }
              const auto idx = static_cast<std::size_t>((b * C + c) * HW + p);
              y.data[idx] = static_cast<float>(
                  x.data[idx] *
                  std::pow(a.k + a.alpha / static_cast<double>(a.size) * sum, -a.beta));
            }
        break;
      }
      case OpKind::concat: {
        const Tensor& first = in(0);
        y.dims = first.dims;
        y.dims[1] = 0;
        for (std::size_t k = 0; k < n.inputs.size(); ++k) y.dims[1] += in(k).dims[1];
        const std::size_t inner =
            count(first.dims) / static_cast<std::size_t>(first.dims[0] * first.dims[1]);
        for (std::int64_t b = 0; b < first.dims[0]; ++b)
          for (std::size_t k = 0; k < n.inputs.size(); ++k) {
            const Tensor& x = in(k);
            const std::size_t block = static_cast<std::size_t>(x.dims[1]) * inner;
            y.data.insert(
                y.data.end(),
                x.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b) * block),
                x.data.begin() +
                    static_cast<std::ptrdiff_t>(static_cast<std::size_t>(b + 1) * block));
          }
        break;
      }
      case OpKind::add:
        y = in(0);
        for (std::size_t k = 0; k < y.data.size(); ++k) y.data[k] += in(1).data[k];
        break;
      case OpKind::inner_product:
        y = inner_product(in(0), in(1), n.inputs.size() > 2 ? &in(2) : nullptr);
        break;
      case OpKind::softmax: {
        // Over axis 1 at each of the inner positions (H x W of an image; 1 for N, C).
        y = in(0);
        const auto N = y.dims[0], C = y.dims[1];
        const auto inner = static_cast<std::int64_t>(count(y.dims)) / (N * C);
        for (std::int64_t b = 0; b < N; ++b)
          for (std::int64_t p = 0; p < inner; ++p) {
            auto at = [&](std::int64_t c) -> float& {
              return y.data[static_cast<std::size_t>((b * C + c) * inner + p)];
            };
            double mx = at(0);
            for (std::int64_t c = 1; c < C; ++c) mx = std::max(mx, static_cast<double>(at(c)));
            double sum = 0;
            for (std::int64_t c = 0; c < C; ++c) sum += std::exp(at(c) - mx);
            for (std::int64_t c = 0; c < C; ++c)
              at(c) = static_cast<float>(std::exp(at(c) - mx) / sum);
          }
        break;
      }
      case OpKind::eltwise: {
        y = in(0);
        const auto& a = std::get<Eltwise>(n.attrs);
        for (float& v : y.data) v = static_cast<float>(activation(a, v));
        break;
      }
      case OpKind::binary:
        y = binary(in(0), in(1), std::get<Binary>(n.attrs).kind);
        break;
      case OpKind::flatten:
        y = in(0);
        if (y.dims.size() == 4) y.dims = {y.dims[0], y.dims[1] * y.dims[2] * y.dims[3]};
        break;
      case OpKind::dropout:
        y = in(0);
        break;
    }
    t[static_cast<std::size_t>(n.output)] = std::move(y);
  }
  std::map<std::string, std::vector<float>> out;
  for (const OutputDef& o : graph.outputs()) {
    const Tensor& y = t[static_cast<std::size_t>(o.tensor)];
    Layout layout = o.layout.value_or(y.dims.size() == 4 ? image_layout : Layout::nc);
    out[o.name] = layout == Layout::nhwc ? nchw_to_nhwc(y.data, y.dims) : y.data;
  }
  return out;
}

}  // namespace tfpin::engine::reference
