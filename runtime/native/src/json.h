// A small JSON value, parser and writer: what rnnx.json and the safetensors header need (objects keep their
// key order; numbers are doubles, integers exact up to 2^53).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rnnx
{

class Json
{
public:
    enum class Kind
    {
        Null,
        Bool,
        Number,
        String,
        Array,
        Object
    };

    Json() = default;
    static Json boolean(bool value);
    static Json number(double value);
    static Json string(std::string value);
    static Json array();
    static Json object();

    Kind kind() const
    {
        return kind_;
    }
    bool is_null() const
    {
        return kind_ == Kind::Null;
    }
    bool is_number() const
    {
        return kind_ == Kind::Number;
    }
    bool is_string() const
    {
        return kind_ == Kind::String;
    }
    bool is_array() const
    {
        return kind_ == Kind::Array;
    }
    bool is_object() const
    {
        return kind_ == Kind::Object;
    }
    bool is_bool() const
    {
        return kind_ == Kind::Bool;
    }

    bool as_bool() const;
    double as_number() const;
    // The number as an integer; throws when it is not one.
    int64_t as_int() const;
    const std::string& as_string() const;
    const std::vector<Json>& items() const;
    const std::vector<std::pair<std::string, Json>>& members() const;

    // Object member by key, nullptr when absent (or when this is not an object).
    const Json* find(const std::string& key) const;
    void push(Json value);
    void set(const std::string& key, Json value);

    // Compact JSON text (keys in insertion order).
    std::string dump() const;

private:
    Kind kind_ = Kind::Null;
    bool bool_ = false;
    double number_ = 0;
    std::string string_;
    std::vector<Json> items_;
    std::vector<std::pair<std::string, Json>> members_;
};

struct JsonError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// Parses one JSON document (trailing whitespace allowed); JsonError naming the offset otherwise.
Json parse_json(const std::string& text);

// `text` as a JSON string, as JavaScript's JSON.stringify writes it: ", \ and the controls \b \f \n \r \t as their
// two-character escapes, the other controls as \u00xx, every other byte as it is (UTF-8 stays UTF-8).
std::string json_text(std::string_view text);

} // namespace rnnx
