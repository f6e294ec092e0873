#include "safetensors.h"

#include "contract.h"
#include "error.h"
#include "json.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

namespace rnnx
{

void write_safetensors(const std::string& path, const SafetensorsFile& file)
{
    Json header = Json::object();
    Json meta = Json::object();
    for (const auto& entry : file.metadata)
        meta.set(entry.first, Json::string(entry.second));
    header.set("__metadata__", meta);
    uint64_t offset = 0;
    for (const auto& named : file.tensors)
    {
        const HostTensor& t = named.second;
        Json entry = Json::object();
        entry.set("dtype", Json::string(safetensors_code(t.dtype)));
        Json shape = Json::array();
        for (int64_t d : t.shape)
            shape.push(Json::number(static_cast<double>(d)));
        entry.set("shape", shape);
        Json offsets = Json::array();
        offsets.push(Json::number(static_cast<double>(offset)));
        offsets.push(Json::number(static_cast<double>(offset + t.bytes.size())));
        entry.set("data_offsets", offsets);
        header.set(named.first, entry);
        offset += t.bytes.size();
    }
    std::string text = header.dump();
    while (text.size() % 8)
        text += ' ';
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-"
        + std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + "-" + std::to_string(counter++);
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            throw Error(RNNX_ERROR_IO, path + ": cannot be written");
        unsigned char size[8];
        for (int i = 0; i < 8; ++i)
            size[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
        out.write(reinterpret_cast<const char*>(size), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& named : file.tensors)
            out.write(reinterpret_cast<const char*>(named.second.bytes.data()),
                static_cast<std::streamsize>(named.second.bytes.size()));
        out.flush();
        if (!out)
        {
            std::remove(tmp.c_str());
            throw Error(RNNX_ERROR_IO, path + ": write failed");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
    {
        std::remove(tmp.c_str());
        throw Error(RNNX_ERROR_IO, path + ": cannot be written");
    }
}

SafetensorsFile read_safetensors(const std::string& path)
{
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in)
        throw Error(RNNX_ERROR_IO, path + ": no such state file");
    const auto size = static_cast<uint64_t>(in.tellg());
    in.seekg(0);
    // the contract's refusal of a file that is not safetensors or is cut short; `what` is this reader's own words
    auto bad = [&](const std::string& what)
    { return refusal(RNNX_ERROR_STATE_FILE, path, "state_unreadable", {{"detail", what}}); };
    if (size < 8)
        throw bad("shorter than a safetensors header");
    unsigned char raw[8];
    in.read(reinterpret_cast<char*>(raw), 8);
    uint64_t header_size = 0;
    for (int i = 0; i < 8; ++i)
        header_size |= static_cast<uint64_t>(raw[i]) << (8 * i);
    if (header_size > size - 8 || header_size > (100u << 20))
        throw bad("a header of " + std::to_string(header_size) + " bytes in a file of " + std::to_string(size));
    std::string text(header_size, '\0');
    in.read(text.data(), static_cast<std::streamsize>(header_size));
    Json header;
    try
    {
        header = parse_json(text);
    }
    catch (const JsonError& e)
    {
        throw bad(std::string("malformed safetensors header: ") + e.what());
    }
    if (!header.is_object())
        throw bad("malformed safetensors header");
    const uint64_t data_size = size - 8 - header_size;
    std::vector<uint8_t> data(data_size);
    in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data_size));
    SafetensorsFile file;
    try
    {
        for (const auto& member : header.members())
        {
            if (member.first == "__metadata__")
            {
                for (const auto& m : member.second.members())
                    file.metadata[m.first] = m.second.as_string();
                continue;
            }
            HostTensor t;
            t.dtype =
                dtype_of_safetensors_code(member.second.find("dtype") ? member.second.find("dtype")->as_string() : "");
            const Json* shape = member.second.find("shape");
            const Json* offsets = member.second.find("data_offsets");
            if (shape == nullptr || offsets == nullptr || offsets->items().size() != 2)
                throw bad("tensor '" + member.first + "' lacks shape or data_offsets");
            for (const Json& d : shape->items())
                t.shape.push_back(d.as_int());
            const int64_t begin = offsets->items()[0].as_int(), end = offsets->items()[1].as_int();
            const int64_t want = checked_bytes(t.shape, t.dtype);
            if (want < 0)
                throw bad("tensor '" + member.first + "' has a negative or overflowing shape");
            if (begin < 0 || end < begin || static_cast<uint64_t>(end) > data_size || end - begin != want)
                throw bad("tensor '" + member.first + "' lies outside the file (truncated?)");
            t.bytes.assign(data.begin() + begin, data.begin() + end);
            file.tensors.emplace_back(member.first, std::move(t));
        }
    }
    catch (const JsonError& e)
    {
        throw bad(std::string("malformed safetensors header: ") + e.what());
    }
    return file;
}

} // namespace rnnx
