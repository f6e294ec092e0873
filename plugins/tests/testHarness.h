/*
 * A minimal test harness: TEST_CASE registers a function, CHECK records a failure and goes on,
 * REQUIRE records one and leaves the test case. runTestCases (testHarness.cpp), called by each test
 * executable's main(), runs the cases and prints "N passed, N failed".
 */
#pragma once

#include <cstdint>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace rnnx
{
namespace test
{

struct TestCase
{
    char const* name;
    std::function<void()> body;
};

std::vector<TestCase>& registry();
//! Records one failed check of the running test case.
void fail(char const* file, int line, std::string const& what);
//! Counts one error the plugins logged (called by the test executables' log sinks); keeps `message` if given.
void countLoggedError(char const* message = nullptr);
//! Errors the plugins logged since the last call (the tests install a log sink counting them).
int32_t takeLoggedErrors();
//! The messages passed to countLoggedError since the last call (or the start of the test case), one a line.
std::string takeLoggedMessages();
//! Runs the registered cases whose name contains ``filter`` (all when null), calling ``beforeEach``
//! first; with ``failOnLoggedErrors`` a case that made a plugin log an error fails. Prints one line
//! per case and "N passed, N failed"; returns the exit code (0: all passed and at least one ran).
int runTestCases(char const* filter, std::function<void(TestCase const&)> const& beforeEach, bool failOnLoggedErrors);

struct Registrar
{
    Registrar(char const* name, std::function<void()> body)
    {
        registry().push_back({name, std::move(body)});
    }
};

struct AbortTestCase
{
};

} // namespace test
} // namespace rnnx

#define RNNX_CONCAT_INNER(a, b) a##b
#define RNNX_CONCAT(a, b) RNNX_CONCAT_INNER(a, b)
#define TEST_CASE(name)                                                                                                \
    static void RNNX_CONCAT(testBody_, __LINE__)();                                                                    \
    static ::rnnx::test::Registrar const RNNX_CONCAT(testRegistrar_, __LINE__)(                                        \
        name, &RNNX_CONCAT(testBody_, __LINE__));                                                                      \
    static void RNNX_CONCAT(testBody_, __LINE__)()

//! Records a failure naming `what` when `cond` is false, then runs `onFailure` (a statement, or nothing).
#define RNNX_CHECK_OR(cond, what, onFailure)                                                                           \
    do                                                                                                                 \
    {                                                                                                                  \
        if (!(cond))                                                                                                   \
        {                                                                                                              \
            ::rnnx::test::fail(__FILE__, __LINE__, what);                                                              \
            onFailure;                                                                                                 \
        }                                                                                                              \
    } while (0)

#define CHECK(cond) RNNX_CHECK_OR(cond, #cond, )

#define CHECK_EQ(a, b)                                                                                                 \
    do                                                                                                                 \
    {                                                                                                                  \
        auto const& rnnxA_ = (a);                                                                                      \
        auto const& rnnxB_ = (b);                                                                                      \
        if (!(rnnxA_ == rnnxB_))                                                                                       \
        {                                                                                                              \
            std::ostringstream rnnxOut_;                                                                               \
            rnnxOut_ << #a << " == " << #b << " (" << rnnxA_ << " vs " << rnnxB_ << ")";                               \
            ::rnnx::test::fail(__FILE__, __LINE__, rnnxOut_.str());                                                    \
        }                                                                                                              \
    } while (0)

#define REQUIRE(cond) RNNX_CHECK_OR(cond, #cond, throw ::rnnx::test::AbortTestCase{})
