// A minimal test harness for the native unit tests (no framework to fetch).
// CHECK records a failure and keeps going; main() returns non-zero if any
// check failed, which is what ctest looks at.
#pragma once
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace podwire::test {

struct Case {
  const char* name;
  std::function<void()> fn;
};

inline std::vector<Case>& Cases() {
  static std::vector<Case> cases;  // test binary only, never in the addon
  return cases;
}
inline int& Failures() {
  static int failures = 0;
  return failures;
}

struct Register {
  Register(const char* name, std::function<void()> fn) { Cases().push_back({name, std::move(fn)}); }
};

inline int RunAll() {
  int passed = 0;
  for (auto& c : Cases()) {
    int before = Failures();
    c.fn();
    bool ok = Failures() == before;
    passed += ok;
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", c.name);
  }
  std::printf("%d passed, %d failed\n", passed, static_cast<int>(Cases().size()) - passed);
  return Failures() ? 1 : 0;
}

}  // namespace podwire::test

#define PW_CONCAT2(a, b) a##b
#define PW_CONCAT(a, b) PW_CONCAT2(a, b)
#define TEST(name)                                                                      \
  static void name();                                                                   \
  static ::podwire::test::Register PW_CONCAT(reg_, name)(#name, name);                 \
  static void name()
#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);            \
      ++::podwire::test::Failures();                                                    \
    }                                                                                   \
  } while (0)
#define CHECK_EQ(a, b)                                                                  \
  do {                                                                                  \
    auto va = (a);                                                                      \
    auto vb = (b);                                                                      \
    if (!(va == vb)) {                                                                  \
      std::printf("  %s:%d: CHECK_EQ(%s, %s) failed\n", __FILE__, __LINE__, #a, #b);     \
      ++::podwire::test::Failures();                                                    \
    }                                                                                   \
  } while (0)
#define TEST_MAIN() \
  int main() { return ::podwire::test::RunAll(); }
