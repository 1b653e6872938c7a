#include <gtest/gtest.h>

#include <string>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"

using tfpin::format_cpulist;
using tfpin::parse_cpulist;

TEST(Cpulist, ParsesRangesAndSingles) {
  EXPECT_EQ(parse_cpulist("0-3,8,10-11"), (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpulist("7"), (std::vector<unsigned>{7}));
}

TEST(Cpulist, KeepsOrderAsWritten) {
  EXPECT_EQ(parse_cpulist("18-19,0-1"), (std::vector<unsigned>{18, 19, 0, 1}));
  EXPECT_EQ(parse_cpulist("3-1"), (std::vector<unsigned>{3, 2, 1}));
}

TEST(Cpulist, FormatsRunsAndRoundTrips) {
  const std::vector<unsigned> cpus{18, 19, 20, 21, 0, 1, 5, 7, 8, 9};
  EXPECT_EQ(format_cpulist(cpus), "18-21,0,1,5,7-9");
  EXPECT_EQ(parse_cpulist(format_cpulist(cpus)), cpus);
  EXPECT_EQ(format_cpulist(std::vector<unsigned>{}), "");
}

TEST(Cpulist, RejectsMalformedText) {
  for (const char* bad : {"", "a", "1-", "-1", "1,,2", "1-2-3", "0x3", " 1", "99999999999"}) {
    EXPECT_THROW(parse_cpulist(bad, "--cpuset"), tfpin::Error) << "accepted '" << bad << "'";
  }
}

TEST(Cpulist, RejectsDuplicates) {
  try {
    parse_cpulist("0-3,2", "--cpuset");
    FAIL() << "duplicate accepted";
  } catch (const tfpin::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU 2 is listed twice"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--cpuset"), std::string::npos) << e.what();
  }
}

// The shim's fixed masks take ids 0..4095 (tfpin/plan_contract.h).
TEST(Cpulist, RejectsIndicesTheShimCannotTake) {
  EXPECT_NO_THROW(parse_cpulist("4095"));
  try {
    parse_cpulist("4094-4097", "--cpuset");
    FAIL() << "CPU 4096 accepted";
  } catch (const tfpin::Error& e) {
    EXPECT_STREQ(e.what(), "--cpuset=4094-4097: CPU 4097 is outside the CPU ids tfpin's shim can "
                           "pin to (valid: 0..4095)");
  }
}

TEST(ShownValue, EscapesControlBytesAndTruncates) {
  EXPECT_EQ(tfpin::shown_value("0-3"), "0-3");
  EXPECT_EQ(tfpin::shown_value("2\ntfpin: forged"), "2\\ntfpin: forged");
  EXPECT_EQ(tfpin::shown_value("a\xff\x1b[0m\\"), "a\\xff\\x1b[0m\\");
  EXPECT_EQ(tfpin::shown_value(std::string(200, '7'), 4), "7777...(200 bytes)");
}

TEST(Cpulist, HugeListIsRefusedWithAShortMessage) {
  std::string huge;
  for (int i = 0; i < 14000; ++i) huge += "0-4095,";
  try {
    parse_cpulist(huge, "--cpuset");
    FAIL() << "accepted";
  } catch (const tfpin::Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300U) << e.what();
    EXPECT_NE(std::string(e.what()).find("listed twice"), std::string::npos) << e.what();
  }
}
