/*
 * The runtime of the minimal test harness (testHarness.h), shared by the test executables: the case
 * registry, failure and logged-error counting (with the messages), and the loop that runs the cases and prints
 * "N passed, N failed".
 */
#include "testHarness.h"

#include <cstring>
#include <exception>

namespace rnnx
{
namespace test
{
namespace
{
int32_t gFailures{0};
int32_t gLoggedErrors{0};
std::string gLoggedMessages;
char const* gCurrent{""};
} // namespace

std::vector<TestCase>& registry()
{
    static std::vector<TestCase> cases;
    return cases;
}

void fail(char const* file, int line, std::string const& what)
{
    ++gFailures;
    std::cout << "  FAILED " << gCurrent << ": " << file << ":" << line << ": " << what << "\n";
}

void countLoggedError(char const* message)
{
    ++gLoggedErrors;
    if (message != nullptr)
    {
        gLoggedMessages += std::string(message) + "\n";
    }
}

std::string takeLoggedMessages()
{
    std::string messages;
    messages.swap(gLoggedMessages);
    return messages;
}

int32_t takeLoggedErrors()
{
    int32_t const n = gLoggedErrors;
    gLoggedErrors = 0;
    return n;
}

int runTestCases(char const* filter, std::function<void(TestCase const&)> const& beforeEach, bool failOnLoggedErrors)
{
    int32_t passed = 0;
    int32_t failed = 0;
    for (TestCase const& testCase : registry())
    {
        if (filter != nullptr && std::strstr(testCase.name, filter) == nullptr)
        {
            continue;
        }
        gCurrent = testCase.name;
        if (beforeEach)
        {
            beforeEach(testCase);
        }
        takeLoggedErrors();
        takeLoggedMessages();
        int32_t const before = gFailures;
        try
        {
            testCase.body();
        }
        catch (AbortTestCase const&)
        {
        }
        catch (std::exception const& e)
        {
            fail(__FILE__, __LINE__, std::string("exception: ") + e.what());
        }
        int32_t const logged = takeLoggedErrors();
        if (failOnLoggedErrors && logged > 0)
        {
            fail(__FILE__, __LINE__, std::to_string(logged) + " plugin error(s) logged");
        }
        if (gFailures == before)
        {
            ++passed;
            std::cout << "ok     " << testCase.name << "\n";
        }
        else
        {
            ++failed;
            std::cout << "FAILED " << testCase.name << "\n";
        }
    }
    std::cout << passed << " passed, " << failed << " failed\n";
    return failed == 0 && passed > 0 ? 0 : 1;
}

} // namespace test
} // namespace rnnx
