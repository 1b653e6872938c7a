// The .npy format (numpy.lib.format): magic "\x93NUMPY", version, a little-endian header length
// (2 bytes in 1.0, 4 in 2.0 and 3.0), then a Python dict literal with 'descr', 'fortran_order'
// and 'shape', padded with spaces to an aligned length and ending in a newline; the data follows.
// (No Debian library reads .npy alone: xtensor's xnpy would bring a whole array library, and its
// errors do not say which file or why.)
#include "npy.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "tfpin/error.hpp"

namespace tfpin::cli {

namespace {

constexpr std::string_view magic = "\x93NUMPY";
// Far more than any input a model takes; keeps a hostile shape from asking for the machine.
constexpr std::int64_t max_elements = std::int64_t{1} << 34;

// The file's name and what it holds (header text, keys, dtypes) escaped: one printable line.
[[noreturn]] void bad(const std::string& what, const std::string& message) {
  throw Error(ErrorKind::invalid_request,
              fmt::format("{}: {}", shown_value(what), shown_value(message, message.size())));
}

// A tiny reader of the header's dict literal: string keys, and values that are strings, True/False
// or tuples of integers. Anything else is an error.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  struct Entries {
    std::optional<std::string> descr;
    std::optional<bool> fortran_order;
    std::optional<std::vector<std::int64_t>> shape;
  };

  Entries parse() {
    Entries e;
    expect('{');
    skip_spaces();
    while (peek() != '}') {
      const std::string key = string_literal();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        e.descr = string_literal();
      } else if (key == "fortran_order") {
        e.fortran_order = boolean();
      } else if (key == "shape") {
        e.shape = tuple();
      } else {
        bad(what_, fmt::format("unknown header key '{}' (a .npy header has descr, fortran_order "
                               "and shape)",
                               key));
      }
      skip_spaces();
      if (peek() == ',') {
        ++pos_;
        skip_spaces();
      } else if (peek() != '}') {
        fail("',' or '}'");
      }
    }
    ++pos_;
    skip_spaces();
    if (pos_ != text_.size()) fail("the end of the header");
    return e;
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_spaces() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const char* expected) const {
    bad(what_, fmt::format("malformed header at byte {}: expected {} in '{}'", pos_, expected,
                           std::string(text_.substr(0, 200))));
  }
  void expect(char c) {
    skip_spaces();
    if (peek() != c) fail(fmt::format("'{}'", c).c_str());
    ++pos_;
  }
  std::string string_literal() {
    skip_spaces();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("a closing quote");
    std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("True or False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    skip_spaces();
    while (peek() != ')') {
      std::int64_t d = 0;
      const char* begin = text_.data() + pos_;
      const char* end = text_.data() + text_.size();
      const auto [ptr, ec] = std::from_chars(begin, end, d);
      if (ec != std::errc() || ptr == begin) fail("a dimension");
      if (d < 0) bad(what_, fmt::format("negative dimension {} in the shape", d));
      pos_ += static_cast<std::size_t>(ptr - begin);
      dims.push_back(d);
      skip_spaces();
      if (peek() == ',') {
        ++pos_;
        skip_spaces();
      } else if (peek() != ')') {
        fail("',' or ')'");
      }
    }
    ++pos_;
    return dims;
  }

  std::string_view text_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

std::string dtype_meaning(const std::string& descr) {
  static const std::map<std::string, std::string> names = {
      {"f8", "float64"}, {"f2", "float16"}, {"i8", "int64"}, {"i4", "int32"}, {"i2", "int16"},
      {"i1", "int8"},    {"u1", "uint8"},   {"b1", "bool"},  {"u8", "uint64"}, {"u4", "uint32"}};
  const auto it = names.find(descr.size() > 1 ? descr.substr(1) : descr);
  return it == names.end() ? "" : fmt::format(" ({})", it->second);
}

}  // namespace

namespace {

// What a header says: where the data starts, how many bytes it must hold, and as what.
struct NpyHeader {
  std::size_t data_start = 0;
  std::size_t data_bytes = 0;
  std::vector<std::int64_t> dims;
  std::string descr;
  bool is_float = false;
  bool is_int64 = false;
};

// The length of the magic, version and header-length fields, and the header's length, from the
// first 12 bytes (fewer: a short file, refused).
std::pair<std::size_t, std::size_t> npy_header_span(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 10 || bytes.substr(0, magic.size()) != magic) {
    bad(what, "not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const auto major = static_cast<unsigned char>(bytes[6]);
  if (major == 1) {
    return {10, static_cast<unsigned char>(bytes[8]) |
                    static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8};
  }
  if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad(what, "truncated header");
    std::size_t header_length = 0;
    for (int i = 3; i >= 0; --i) {
      header_length =
          header_length << 8 | static_cast<unsigned char>(bytes[8 + static_cast<std::size_t>(i)]);
    }
    return {12, header_length};
  }
  bad(what, fmt::format(".npy format version {} (1, 2 and 3 are known)", major));
}

// The header of `bytes`, which hold at least the whole header (the data may be cut short).
NpyHeader parse_npy_header(std::string_view bytes, const std::string& what) {
  const auto [header_start, header_length] = npy_header_span(bytes, what);
  if (header_length > bytes.size() - header_start) {
    bad(what, fmt::format("truncated: the header says {} bytes, the file has {} after it",
                          header_length, bytes.size() - header_start));
  }
  const HeaderParser::Entries entries =
      HeaderParser(bytes.substr(header_start, header_length), what).parse();
  if (!entries.descr || !entries.fortran_order || !entries.shape) {
    bad(what, "the header lacks descr, fortran_order or shape");
  }
  NpyHeader header;
  header.descr = *entries.descr;
  const std::string& descr = header.descr;
  header.is_float = descr == "<f4" || descr == "=f4";
  header.is_int64 = descr == "<i8" || descr == "=i8";
  const bool is_bool = descr == "|b1";
  if (!header.is_float && !header.is_int64 && !is_bool) {
    bad(what, fmt::format("dtype '{}'{}; tfpin reads float32 ('<f4': numpy.float32, "
                          "e.g. array.astype(numpy.float32)), and int64 or bool for inputs that "
                          "are shapes, axes or flags",
                          descr, dtype_meaning(descr)));
  }
  const std::size_t element_bytes = header.is_float ? 4 : header.is_int64 ? 8 : 1;
  if (*entries.fortran_order) {
    bad(what, "Fortran order; tfpin reads C order (numpy.ascontiguousarray)");
  }
  header.dims = *entries.shape;
  std::int64_t elements = 1;
  for (std::int64_t d : header.dims) {
    if (d != 0 && elements > max_elements / d) {
      bad(what,
          fmt::format("shape ({}) has more than 2^34 elements", fmt::join(header.dims, ", ")));
    }
    elements *= d;
  }
  header.data_start = header_start + header_length;
  header.data_bytes = static_cast<std::size_t>(elements) * element_bytes;
  return header;
}

// Appends up to `count` bytes of `in` to `bytes`, a MiB at a time: a file that claims more than
// it holds costs what it holds.
void read_more(std::istream& in, std::string& bytes, std::size_t count) {
  constexpr std::size_t step = std::size_t{1} << 20;
  while (count > 0) {
    const std::size_t chunk = std::min(count, step);
    const std::size_t old = bytes.size();
    bytes.resize(old + chunk);
    in.read(bytes.data() + old, static_cast<std::streamsize>(chunk));
    const auto got = static_cast<std::size_t>(in.gcount());
    bytes.resize(old + got);
    if (got < chunk) return;
    count -= got;
  }
}

}  // namespace

engine::HostTensor parse_npy(std::string_view bytes, const std::string& what) {
  static_assert(std::endian::native == std::endian::little, "the data is read in place");
  const NpyHeader header = parse_npy_header(bytes, what);
  const std::size_t data_bytes = header.data_bytes;
  const std::size_t held = bytes.size() - header.data_start;
  if (held != data_bytes) {
    bad(what, fmt::format("holds {} data bytes where shape ({}) of {} needs {}{}", held,
                          fmt::join(header.dims, ", "), header.descr, data_bytes,
                          held < data_bytes ? " (truncated)" : ""));
  }
  engine::HostTensor out;
  out.dims = header.dims;
  const char* data = bytes.data() + header.data_start;
  if (header.is_float) {
    out.data.resize(data_bytes / sizeof(float));
    if (data_bytes > 0) std::memcpy(out.data.data(), data, data_bytes);
    return out;
  }
  out.integer = true;
  if (header.is_int64) {
    out.ints.resize(data_bytes / sizeof(std::int64_t));
    if (data_bytes > 0) std::memcpy(out.ints.data(), data, data_bytes);
  } else {
    out.ints.resize(data_bytes);
    for (std::size_t i = 0; i < out.ints.size(); ++i) out.ints[i] = data[i] != 0 ? 1 : 0;
  }
  return out;
}

engine::HostTensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, fmt::format("cannot open: {}", std::strerror(errno)));
  // Reading a directory opened as a file throws from inside the stream: say what it is instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) bad(path, "a directory, not a .npy file");
  // The header first, then the data it declares and at most 64 KiB more (to say how much there
  // is): --input /dev/zero or a file far larger than its shape is refused without reading it all.
  constexpr std::size_t max_header = std::size_t{1} << 20;
  std::string bytes;
  read_more(in, bytes, 12);
  if (in.bad()) bad(path, "read error");
  const auto [prefix, header_length] = npy_header_span(bytes, path);
  const std::size_t header_end = prefix + std::min(header_length, max_header);
  if (bytes.size() < header_end) read_more(in, bytes, header_end - bytes.size());
  // (A shorter file is refused as truncated by parse_npy_header.)
  if (header_length > max_header && bytes.size() == header_end) {
    bad(path, fmt::format("a header of {} bytes (tfpin reads headers up to {})", header_length,
                          max_header));
  }
  const NpyHeader header = parse_npy_header(bytes, path);
  constexpr std::size_t slack = std::size_t{64} << 10;
  const std::size_t wanted = header.data_start + header.data_bytes + slack;
  if (bytes.size() < wanted) read_more(in, bytes, wanted - bytes.size());
  if (in.bad()) bad(path, "read error");
  if (bytes.size() == wanted && in.peek() != std::char_traits<char>::eof()) {
    bad(path, fmt::format("holds more than {} data bytes where shape ({}) of {} needs {}",
                          header.data_bytes + slack, fmt::join(header.dims, ", "), header.descr,
                          header.data_bytes));
  }
  return parse_npy(bytes, path);
}

std::string format_npy(const std::vector<std::int64_t>& dims, const float* data) {
  std::string shape = fmt::format("{}", fmt::join(dims, ", "));
  if (dims.size() == 1) shape += ",";  // a one-element tuple
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", shape);
  // numpy pads so that the data starts on a 64-byte boundary; the header ends with a newline.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::int64_t elements = 1;
  for (std::int64_t d : dims) elements *= d;
  std::string out(magic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(elements) * sizeof(float));
  return out;
}

}  // namespace tfpin::cli
