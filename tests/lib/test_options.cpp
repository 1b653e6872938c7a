#include <gtest/gtest.h>

#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace {

std::string error_of(std::string_view text) {
  try {
    tfpin::parse_count("--tf-threads", text);
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), tfpin::ErrorKind::invalid_request);
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ParseCount, AcceptsWholeNumbersInRange) {
  EXPECT_EQ(tfpin::parse_count("--tf-threads", "1"), 1U);
  EXPECT_EQ(tfpin::parse_count("--tf-threads", "36"), 36U);
  EXPECT_EQ(tfpin::parse_count("--tf-threads", "65536"), 65536U);
}

TEST(ParseCount, NamesOptionValueAndValidRange) {
  EXPECT_EQ(error_of("abc"), "--tf-threads=abc is not a whole number: expected a whole number from 1 "
                             "to 65536");
  EXPECT_EQ(error_of("0"), "--tf-threads=0 is too small: expected a whole number from 1 to 65536");
  EXPECT_EQ(error_of("-3"), "--tf-threads=-3 is not a whole number: expected a whole number from 1 "
                            "to 65536");
  EXPECT_EQ(error_of("99999999999"),
            "--tf-threads=99999999999 is too large: expected a whole number from 1 to 65536");
  EXPECT_EQ(error_of(""), "--tf-threads needs a value: expected a whole number from 1 to 65536");
}

TEST(ParseCount, RejectsEverythingThatIsNotPlainDigits) {
  for (const char* bad : {"+3", " 3", "3 ", "3.0", "1e3", "0x10", "4k", "65537", "18446744073709551616"}) {
    EXPECT_FALSE(error_of(bad).empty()) << "accepted '" << bad << "'";
  }
}

TEST(ParseNonNegative, AcceptsZero) {
  EXPECT_EQ(tfpin::parse_non_negative("blocktime", "0", 1000), 0U);
  EXPECT_THROW(tfpin::parse_non_negative("blocktime", "1001", 1000), tfpin::Error);
}
