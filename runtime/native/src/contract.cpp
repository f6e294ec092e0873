#include "contract.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

namespace rnnx
{
namespace c = contract;
namespace
{

constexpr double kExactIntegers = 9007199254740992.0; // 2^53

// JavaScript's Number.prototype.toString of a double (ECMAScript's Number::toString, radix 10).
std::string js_number(double x)
{
    if (std::isnan(x))
        return "NaN";
    if (std::isinf(x))
        return x > 0 ? "Infinity" : "-Infinity";
    if (x == 0)
        return "0";
    char buffer[64];
    // the shortest digits that round-trip, as d[.ddd]e<exponent>
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(x), std::chars_format::scientific);
    const std::string text(buffer, result.ptr);
    const size_t e = text.find('e');
    std::string digits = text.substr(0, e);
    digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
    while (digits.size() > 1 && digits.back() == '0')
        digits.pop_back();
    const int k = static_cast<int>(digits.size());
    const int n = std::atoi(text.c_str() + e + 1) + 1; // x = 0.<digits> * 10^n
    std::string out = x < 0 ? "-" : "";
    if (k <= n && n <= 21)
        out += digits + std::string(static_cast<size_t>(n - k), '0');
    else if (0 < n && n <= 21)
        out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
    else if (-6 < n && n <= 0)
        out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
    else
    {
        const int exponent = n - 1;
        out += digits.substr(0, 1) + (k > 1 ? "." + digits.substr(1) : "") + "e" + (exponent >= 0 ? "+" : "-")
            + std::to_string(std::abs(exponent));
    }
    return out;
}

unsigned kind_of(const Json& value)
{
    switch (value.kind())
    {
    case Json::Kind::Null: return c::kNull;
    case Json::Kind::Bool: return c::kBoolean;
    case Json::Kind::Number:
    {
        const double x = value.as_number();
        return std::isfinite(x) && std::floor(x) == x ? c::kInteger : c::kNumber;
    }
    case Json::Kind::String: return c::kString;
    case Json::Kind::Array: return c::kArray;
    case Json::Kind::Object: return c::kObject;
    }
    return c::kNull;
}

std::string kind_name(unsigned kind)
{
    size_t bit = 0;
    while ((1u << bit) != kind)
        ++bit;
    return std::string(c::kKindNames[bit]);
}

// How a refusal names a value it got: an array or object by its kind, anything else as JSON.
std::string got_text(const Json& value)
{
    const unsigned kind = kind_of(value);
    return kind == c::kArray || kind == c::kObject ? kind_name(kind) : json_text(value);
}

bool is_file_name(const std::string& name)
{
    return name != "" && name != "." && name != ".." && name.find('/') == std::string::npos
        && name.find('\\') == std::string::npos;
}

[[noreturn]] void refuse(const std::string& where, std::string_view reason, RefusalValues values)
{
    throw refusal(RNNX_ERROR_METADATA, where, reason, values);
}

void check_fields(
    const Json& object, const c::Table& table, const std::string& prefix, const std::string& where, unsigned interface);

void check_value(
    const Json& value, const c::Rule& rule, const std::string& path, const std::string& where, unsigned interface)
{
    const unsigned kind = kind_of(value);
    if ((rule.kinds & kind) == 0 && !(kind == c::kInteger && (rule.kinds & c::kNumber) != 0))
        refuse(where, "field_type",
            {{"field", json_text(path)}, {"got", got_text(value)}, {"expected", std::string(rule.expected)}});
    bool bad = false;
    if (kind == c::kString)
    {
        const std::string& text = value.as_string();
        const auto* end = rule.strings + rule.strings_size;
        bad = (rule.strings_size > 0 && std::find(rule.strings, end, text) == end) || (rule.non_empty && text.empty())
            || (rule.file_name && !is_file_name(text));
    }
    else if (kind == c::kInteger)
    {
        const double x = value.as_number();
        const auto* end = rule.integers + rule.integers_size;
        bad = (rule.integers_size > 0
                  && std::none_of(rule.integers, end, [&](int64_t v) { return static_cast<double>(v) == x; }))
            || (rule.has_minimum && x < static_cast<double>(rule.minimum));
    }
    if (bad)
        refuse(where, "field_value",
            {{"field", json_text(path)}, {"got", json_text(value)}, {"expected", std::string(rule.expected)}});
    if (kind == c::kArray)
    {
        const auto& items = value.items();
        for (size_t i = 0; rule.items != nullptr && i < items.size(); ++i)
            check_value(items[i], *rule.items, path + "[" + std::to_string(i) + "]", where, interface);
        if (!rule.contains.empty()
            && std::none_of(items.begin(), items.end(),
                [&](const Json& item) { return item.is_string() && item.as_string() == rule.contains; }))
            refuse(where, "field_value",
                {{"field", json_text(path)}, {"got", json_text(value)}, {"expected", std::string(rule.expected)}});
    }
    if (kind == c::kObject)
    {
        if (rule.members >= 0)
            check_fields(value, c::kTables[rule.members], path + ".", where, interface);
        for (size_t i = 0; rule.values != nullptr && i < value.members().size(); ++i)
            check_value(
                value.members()[i].second, *rule.values, path + "." + value.members()[i].first, where, interface);
    }
}

void check_fields(
    const Json& object, const c::Table& table, const std::string& prefix, const std::string& where, unsigned interface)
{
    for (size_t i = 0; i < table.size; ++i)
    {
        const c::Field& field = table.fields[i];
        const std::string path = prefix + std::string(field.name);
        if (const Json* value = object.find(std::string(field.name)))
            check_value(*value, field.rule, path, where, interface);
        else if ((field.required & interface) != 0)
            refuse(
                where, "field_missing", {{"field", json_text(path)}, {"expected", std::string(field.rule.expected)}});
    }
}

const c::Field& metadata_field(std::string_view name)
{
    const c::Table& table = c::kTables[0];
    return *std::find_if(table.fields, table.fields + table.size, [&](const c::Field& f) { return f.name == name; });
}

unsigned interface_bit(std::string_view name)
{
    for (size_t i = 0; i < std::size(c::kInterfaces); ++i)
        if (c::kInterfaces[i] == name)
            return 1u << i;
    return 0;
}

std::string item_path(std::string_view side, size_t i, std::string_view key)
{
    return std::string(side) + "[" + std::to_string(i) + "]." + std::string(key);
}

// Step 5: a causal_lm graph's inputs (outputs) are its data inputs (outputs), in order, then one per state tensor.
template <size_t N>
void check_lm_side(const Json& meta, std::string_view side, const c::LmSlot (&slots)[N], std::string_view lead,
    const std::string& where)
{
    const auto& entries = meta.find(std::string(side))->items();
    const size_t count = N + meta.find("state")->items().size();
    if (entries.size() != count)
        refuse(where, "lm_count",
            {{"field", json_text(side)}, {"got", std::to_string(entries.size())}, {"expected", std::to_string(count)},
                {"lead", std::string(lead)}});
    for (size_t i = 0; i < N; ++i)
    {
        const Json& name = *entries[i].find("name");
        const Json& dtype = *entries[i].find("dtype");
        const auto* end = slots[i].dtypes + slots[i].dtypes_size;
        const std::string interface = json_text(c::kCausalLm);
        if (name.as_string() != slots[i].name)
            refuse(where, "lm_layout",
                {{"field", json_text(item_path(side, i, "name"))}, {"got", json_text(name)},
                    {"expected", json_text(slots[i].name)}, {"interface", interface}});
        if (std::find(slots[i].dtypes, end, dtype.as_string()) == end)
            refuse(where, "lm_layout",
                {{"field", json_text(item_path(side, i, "dtype"))}, {"got", json_text(dtype)},
                    {"expected", std::string(slots[i].expected_dtype)}, {"interface", interface}});
    }
}

} // namespace

std::string json_text(const Json& value)
{
    switch (value.kind())
    {
    case Json::Kind::Null: return "null";
    case Json::Kind::Bool: return value.as_bool() ? "true" : "false";
    case Json::Kind::Number:
    {
        const double x = value.as_number();
        if (std::floor(x) == x && std::fabs(x) < kExactIntegers)
            return std::to_string(static_cast<long long>(x));
        return js_number(x);
    }
    case Json::Kind::String: return json_text(std::string_view(value.as_string()));
    case Json::Kind::Array:
    {
        std::string out = "[";
        for (const Json& item : value.items())
            out += (out.size() > 1 ? "," : "") + json_text(item);
        return out + "]";
    }
    case Json::Kind::Object:
    {
        std::string out = "{";
        for (const auto& member : value.members())
            out += (out.size() > 1 ? "," : "") + json_text(std::string_view(member.first)) + ":"
                + json_text(member.second);
        return out + "}";
    }
    }
    return "null";
}

Error refusal(rnnx_status status, const std::string& where, std::string_view reason, RefusalValues values)
{
    const auto* found = std::find_if(
        std::begin(c::kRefusals), std::end(c::kRefusals), [&](const c::Refusal& r) { return r.reason == reason; });
    const std::string_view text = found != std::end(c::kRefusals) ? found->text : reason;
    std::string out;
    for (size_t i = 0; i < text.size(); ++i)
    {
        const size_t close = text[i] == '{' ? text.find('}', i) : std::string_view::npos;
        const auto value = close == std::string_view::npos
            ? values.end()
            : std::find_if(values.begin(), values.end(),
                  [&](const auto& v) { return v.first == text.substr(i + 1, close - i - 1); });
        if (value == values.end())
            out += text[i];
        else
        {
            out += value->second;
            i = close;
        }
    }
    return Error(status, where + ": " + out, std::string(reason));
}

void check_metadata(const Json& meta, const std::string& where)
{
    // step 2: the document
    if (!meta.is_object())
        refuse(where, "not_an_object", {{"got", got_text(meta)}});
    const Json* format = meta.find("format");
    if (format == nullptr || !format->is_string() || format->as_string() != c::kFormat)
        refuse(where, "format",
            {{"got", format != nullptr ? json_text(*format) : "missing"}, {"expected", json_text(c::kFormat)}});
    const Json* version = meta.find("format_version");
    if (version == nullptr)
        refuse(where, "field_missing",
            {{"field", json_text("format_version")},
                {"expected", std::string(metadata_field("format_version").rule.expected)}});
    const c::FormatVersion* readable = nullptr;
    for (const c::FormatVersion& v : c::kFormatVersions)
        if (kind_of(*version) == c::kInteger && static_cast<double>(v.version) == version->as_number())
            readable = &v;
    if (readable == nullptr)
        refuse(
            where, "format_version", {{"got", json_text(*version)}, {"expected", std::string(c::kFormatVersionsText)}});
    const Json* named = meta.find("interface");
    const unsigned interface = named == nullptr ? interface_bit(c::kCausalLm)
        : named->is_string()                    ? interface_bit(named->as_string()) & readable->interfaces
                                                : 0;
    const std::string shown = named != nullptr ? json_text(*named) : json_text(c::kCausalLm);
    if (interface == 0)
        refuse(where, "interface",
            {{"got", shown}, {"version", std::to_string(readable->version)},
                {"expected", std::string(readable->text)}});
    if (interface != interface_bit(c::kCausalLm))
        refuse(where, "interface_not_runnable", {{"got", shown}, {"expected", json_text(c::kCausalLm)}});
    // step 3: the fields
    check_fields(meta, c::kTables[0], "", where, interface);
    // step 4: the graph
    std::set<std::string> seen, graph[2];
    const std::string_view sides[2] = {"inputs", "outputs"};
    for (size_t side = 0; side < 2; ++side)
    {
        const auto& entries = meta.find(std::string(sides[side]))->items();
        for (size_t i = 0; i < entries.size(); ++i)
        {
            const std::string& name = entries[i].find("name")->as_string();
            if (!seen.insert(name).second)
                refuse(where, "duplicate_name",
                    {{"field", json_text(item_path(sides[side], i, "name"))}, {"got", json_text(name)}});
            graph[side].insert(name);
        }
    }
    const auto& states = meta.find("state")->items();
    for (size_t i = 0; i < states.size(); ++i)
    {
        const std::string& name = states[i].find("name")->as_string();
        const std::string want[2] = {std::string(c::kPastPrefix) + name, std::string(c::kPresentPrefix) + name};
        const std::string ends[2] = {"input", "output"};
        for (size_t end = 0; end < 2; ++end)
        {
            const Json* given = states[i].find(ends[end]);
            if (given != nullptr && given->as_string() != want[end])
                refuse(where, "state_io_name",
                    {{"field", json_text(item_path("state", i, ends[end]))}, {"got", json_text(*given)},
                        {"expected", json_text(want[end])}});
        }
        for (size_t end = 0; end < 2; ++end)
            if (graph[end].count(want[end]) == 0)
                refuse(where, "state_not_in_graph",
                    {{"name", json_text(name)}, {"got", json_text(want[end])}, {"end", ends[end]}});
    }
    // step 5: a causal_lm graph's layout
    check_lm_side(meta, "inputs", c::kLmInputs, c::kLmInputsLead, where);
    check_lm_side(meta, "outputs", c::kLmOutputs, c::kLmOutputsLead, where);
}

void check_state_header(
    const std::map<std::string, std::string>& header, const std::string& where, const std::string& signature)
{
    for (const c::HeaderField& field : c::kStateHeader)
    {
        const auto found = header.find(std::string(field.name));
        if (found == header.end())
        {
            if (!field.value.empty())
                throw refusal(RNNX_ERROR_STATE_FILE, where, field.reason,
                    {{"got", "missing"}, {"expected", std::string(field.expected)}});
            if (field.required)
                throw refusal(RNNX_ERROR_STATE_FILE, where, "state_header_missing",
                    {{"field", json_text(field.name)}, {"expected", std::string(field.expected)}});
            continue;
        }
        const std::string& value = found->second;
        if (!field.value.empty() && value != field.value)
            throw refusal(RNNX_ERROR_STATE_FILE, where, field.reason,
                {{"got", json_text(value)}, {"expected", std::string(field.expected)}});
        const bool decimal = !value.empty() && value.size() <= 18
            && std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        if (field.has_minimum && !(decimal && std::stoll(value) >= field.minimum))
            throw refusal(RNNX_ERROR_STATE_FILE, where, "state_header_value",
                {{"field", json_text(field.name)}, {"got", json_text(value)},
                    {"expected", std::string(field.expected)}});
    }
    const std::string& saved = header.at("signature");
    if (saved != signature)
        throw refusal(RNNX_ERROR_STATE_FILE, where, "state_signature",
            {{"got", saved.substr(0, 12)}, {"expected", signature.substr(0, 12)}});
}

} // namespace rnnx
