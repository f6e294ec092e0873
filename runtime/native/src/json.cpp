#include "json.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace rnnx
{

Json Json::boolean(bool value)
{
    Json j;
    j.kind_ = Kind::Bool;
    j.bool_ = value;
    return j;
}

Json Json::number(double value)
{
    Json j;
    j.kind_ = Kind::Number;
    j.number_ = value;
    return j;
}

Json Json::string(std::string value)
{
    Json j;
    j.kind_ = Kind::String;
    j.string_ = std::move(value);
    return j;
}

Json Json::array()
{
    Json j;
    j.kind_ = Kind::Array;
    return j;
}

Json Json::object()
{
    Json j;
    j.kind_ = Kind::Object;
    return j;
}

bool Json::as_bool() const
{
    if (kind_ != Kind::Bool)
        throw JsonError("expected a boolean");
    return bool_;
}

double Json::as_number() const
{
    if (kind_ != Kind::Number)
        throw JsonError("expected a number");
    return number_;
}

int64_t Json::as_int() const
{
    const double value = as_number();
    if (std::floor(value) != value || std::fabs(value) > 9007199254740992.0)
        throw JsonError("expected an integer");
    return static_cast<int64_t>(value);
}

const std::string& Json::as_string() const
{
    if (kind_ != Kind::String)
        throw JsonError("expected a string");
    return string_;
}

const std::vector<Json>& Json::items() const
{
    if (kind_ != Kind::Array)
        throw JsonError("expected an array");
    return items_;
}

const std::vector<std::pair<std::string, Json>>& Json::members() const
{
    if (kind_ != Kind::Object)
        throw JsonError("expected an object");
    return members_;
}

const Json* Json::find(const std::string& key) const
{
    if (kind_ != Kind::Object)
        return nullptr;
    for (const auto& member : members_)
        if (member.first == key)
            return &member.second;
    return nullptr;
}

void Json::push(Json value)
{
    kind_ = Kind::Array;
    items_.push_back(std::move(value));
}

void Json::set(const std::string& key, Json value)
{
    kind_ = Kind::Object;
    for (auto& member : members_)
        if (member.first == key)
        {
            member.second = std::move(value);
            return;
        }
    members_.emplace_back(key, std::move(value));
}

namespace
{

// JSON's two-character escapes: a character and the letter written after the backslash for it.
constexpr std::pair<char, char> kShortEscapes[] = {
    {'"', '"'}, {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};

// The letter of `c`'s two-character escape; 0 when it has none.
char escape_letter(char c)
{
    for (const auto& [plain, letter] : kShortEscapes)
        if (plain == c)
            return letter;
    return 0;
}

// The character that the escape `\<letter>` stands for ('/' included: JSON reads \/, rnnx never writes it); 0 when
// `letter` is no two-character escape.
char escaped_char(char letter)
{
    if (letter == '/')
        return '/';
    for (const auto& [plain, escape] : kShortEscapes)
        if (escape == letter)
            return plain;
    return 0;
}

} // namespace

std::string json_text(std::string_view text)
{
    std::string out = "\"";
    for (const unsigned char c : text)
    {
        if (const char letter = escape_letter(static_cast<char>(c)))
        {
            out += '\\';
            out += letter;
        }
        else if (c < 0x20)
        {
            char buffer[8];
            std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
            out += buffer;
        }
        else
            out += static_cast<char>(c);
    }
    return out + "\"";
}

namespace
{

// `items` between `open` and `close`, separated by commas, each written by `dump_item`.
template <typename Items, typename DumpItem>
void dump_items(char open, const Items& items, char close, std::string& out, DumpItem dump_item)
{
    out += open;
    bool first = true;
    for (const auto& item : items)
    {
        if (!first)
            out += ',';
        first = false;
        dump_item(item);
    }
    out += close;
}

void dump_value(const Json& value, std::string& out)
{
    switch (value.kind())
    {
    case Json::Kind::Null: out += "null"; break;
    case Json::Kind::Bool: out += value.as_bool() ? "true" : "false"; break;
    case Json::Kind::Number:
    {
        const double x = value.as_number();
        char buffer[32];
        if (std::floor(x) == x && std::fabs(x) < 9007199254740992.0)
            std::snprintf(buffer, sizeof(buffer), "%lld", static_cast<long long>(x));
        else
        {
            // to_chars: the shortest round-trip form, whatever the host's locale (never a decimal comma)
            const auto result = std::to_chars(buffer, buffer + sizeof(buffer) - 1, x);
            *result.ptr = '\0';
        }
        out += buffer;
        break;
    }
    case Json::Kind::String: out += json_text(value.as_string()); break;
    case Json::Kind::Array:
        dump_items('[', value.items(), ']', out, [&](const Json& item) { dump_value(item, out); });
        break;
    case Json::Kind::Object:
        dump_items('{', value.members(), '}', out,
            [&](const std::pair<std::string, Json>& member)
            {
                out += json_text(member.first);
                out += ':';
                dump_value(member.second, out);
            });
        break;
    }
}

class Parser
{
public:
    explicit Parser(const std::string& text)
        : text_(text)
    {
    }

    Json document()
    {
        Json value = parse_value(0);
        skip_space();
        if (pos_ != text_.size())
            fail("unexpected text after the document");
        return value;
    }

private:
    [[noreturn]] void fail(const std::string& what) const
    {
        throw JsonError("invalid JSON at offset " + std::to_string(pos_) + ": " + what);
    }

    void skip_space()
    {
        while (pos_ < text_.size()
            && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
            ++pos_;
    }

    char peek()
    {
        skip_space();
        if (pos_ >= text_.size())
            fail("unexpected end");
        return text_[pos_];
    }

    void expect(const char* word)
    {
        for (const char* p = word; *p; ++p, ++pos_)
            if (pos_ >= text_.size() || text_[pos_] != *p)
                fail(std::string("expected ") + word);
    }

    Json parse_value(int depth)
    {
        if (depth > 64)
            fail("nested too deeply");
        const char c = peek();
        if (c == '{')
            return parse_object(depth);
        if (c == '[')
            return parse_array(depth);
        if (c == '"')
            return Json::string(parse_string());
        if (c == 't')
        {
            expect("true");
            return Json::boolean(true);
        }
        if (c == 'f')
        {
            expect("false");
            return Json::boolean(false);
        }
        if (c == 'n')
        {
            expect("null");
            return Json();
        }
        return Json::number(parse_number());
    }

    Json parse_object(int depth)
    {
        Json object = Json::object();
        parse_items('}',
            [&]
            {
                if (peek() != '"')
                    fail("expected a key");
                std::string key = parse_string();
                if (peek() != ':')
                    fail("expected ':'");
                ++pos_;
                object.set(key, parse_value(depth + 1));
            });
        return object;
    }

    Json parse_array(int depth)
    {
        Json array = Json::array();
        parse_items(']', [&] { array.push(parse_value(depth + 1)); });
        return array;
    }

    // The items of an object or array after its opening bracket, up to `close`: none, or `parse_item` each,
    // separated by commas.
    template <typename ParseItem> void parse_items(char close, ParseItem parse_item)
    {
        ++pos_;
        if (peek() == close)
        {
            ++pos_;
            return;
        }
        while (true)
        {
            parse_item();
            const char c = peek();
            ++pos_;
            if (c == close)
                return;
            if (c != ',')
                fail(std::string("expected ',' or '") + close + "'");
        }
    }

    static void append_utf8(uint32_t code, std::string& out)
    {
        if (code < 0x80)
            out += static_cast<char>(code);
        else if (code < 0x800)
        {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
        else if (code < 0x10000)
        {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
        else
        {
            out += static_cast<char>(0xF0 | (code >> 18));
            out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
    }

    uint32_t parse_hex4()
    {
        if (pos_ + 4 > text_.size())
            fail("short \\u escape");
        uint32_t code = 0;
        for (int i = 0; i < 4; ++i)
        {
            const char h = text_[pos_++];
            code <<= 4;
            if (h >= '0' && h <= '9')
                code |= static_cast<uint32_t>(h - '0');
            else if (h >= 'a' && h <= 'f')
                code |= static_cast<uint32_t>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F')
                code |= static_cast<uint32_t>(h - 'A' + 10);
            else
                fail("bad \\u escape");
        }
        return code;
    }

    std::string parse_string()
    {
        std::string out;
        ++pos_;
        while (true)
        {
            if (pos_ >= text_.size())
                fail("unterminated string");
            const char c = text_[pos_++];
            if (c == '"')
                return out;
            if (c != '\\')
            {
                out += c;
                continue;
            }
            if (pos_ >= text_.size())
                fail("unterminated escape");
            const char e = text_[pos_++];
            if (const char plain = escaped_char(e))
            {
                out += plain;
                continue;
            }
            switch (e)
            {
            case 'u':
            {
                uint32_t code = parse_hex4();
                if (code >= 0xD800 && code < 0xDC00)
                {
                    // a high surrogate must be followed by a low one (DC00-DFFF); otherwise U+FFFD, and the
                    // next escape is left to be read on its own
                    uint32_t low = 0;
                    const size_t mark = pos_;
                    if (pos_ + 6 <= text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u')
                    {
                        pos_ += 2;
                        low = parse_hex4();
                    }
                    if (low >= 0xDC00 && low < 0xE000)
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    else
                    {
                        pos_ = mark;
                        code = 0xFFFD;
                    }
                }
                else if (code >= 0xDC00 && code < 0xE000)
                    code = 0xFFFD;
                append_utf8(code, out);
                break;
            }
            default: fail("bad escape");
            }
        }
    }

    bool digit_at(size_t pos) const
    {
        return pos < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos]));
    }

    // JSON's number grammar, as strict as Python's and JavaScript's parsers (the artifact contract's readers refuse
    // the same files): -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; no NaN, Infinity, '+', '.5', '01' or '1.'.
    double parse_number()
    {
        const size_t start = pos_;
        if (pos_ < text_.size() && text_[pos_] == '-')
            ++pos_;
        if (!digit_at(pos_))
            fail(start == pos_ ? "unexpected character" : "bad number");
        if (text_[pos_++] != '0')
            while (digit_at(pos_))
                ++pos_;
        if (pos_ < text_.size() && text_[pos_] == '.')
        {
            if (!digit_at(++pos_))
                fail("bad number");
            while (digit_at(pos_))
                ++pos_;
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E'))
        {
            if (++pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
                ++pos_;
            if (!digit_at(pos_))
                fail("bad number");
            while (digit_at(pos_))
                ++pos_;
        }
        const std::string token = text_.substr(start, pos_ - start);
        // from_chars: "C" locale parsing, whatever the host program set with setlocale
        double value = 0;
        const auto result = std::from_chars(token.c_str(), token.c_str() + token.size(), value);
        if (result.ec == std::errc::result_out_of_range) // as Python's and JavaScript's parsers: +-inf, or +-0
        {
            const size_t e = token.find_first_of("eE");
            const double magnitude = e != std::string::npos && token[e + 1] == '-' ? 0.0 : HUGE_VAL;
            return token[0] == '-' ? -magnitude : magnitude;
        }
        if (result.ec != std::errc() || result.ptr != token.c_str() + token.size())
            fail("bad number '" + token + "'");
        return value;
    }

    const std::string& text_;
    size_t pos_ = 0;
};

} // namespace

std::string Json::dump() const
{
    std::string out;
    dump_value(*this, out);
    return out;
}

Json parse_json(const std::string& text)
{
    return Parser(text).document();
}

} // namespace rnnx
