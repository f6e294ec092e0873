// Runs a TorchScript module saved from Python (torch.jit.script + torch.jit.save of an rnnx module, e.g.
// rnnx.models.SRU) in a C++ program with no Python: libtorch plus librnnx_torch_ops, which registers the rnnx
// ops the module calls (python3 -m rnnx.models.ops.libtorch builds it; the build line is in README.md here).
//
//     run_scripted MODULE.pt SHAPE [SHAPE ...]      e.g.  run_scripted sru.pt 5x2x12
//     run_scripted LM.pt --generate N TOKEN,TOKEN,...
//
// Input i (fp32, the given shape) is sin(0.37 * j + i) for element j in row-major order, so a Python test
// can build the same tensors. Prints each output tensor as "output <n> <dims>" then its values.
//
// With --generate, LM.pt is a scripted rnnx language model (torch.jit.script(model) of a RecurrentLM), whose
// scripted signature is forward(tokens (B, L) int64, state: List[Tensor], pad_mask: Optional[Tensor]) ->
// (logits (B, L, V), state) and init_state(batch_size) -> List[Tensor]: the program feeds the prompt, then
// decodes N tokens greedily, carrying the state, and prints them as "tokens t1 t2 ...".
#include <torch/script.h>

#include <cstdio>
#include <string>
#include <vector>

namespace
{
std::vector<int64_t> parse_shape(const std::string& text)
{
    std::vector<int64_t> dims;
    size_t start = 0;
    while (start <= text.size())
    {
        const size_t end = text.find('x', start);
        dims.push_back(std::stoll(text.substr(start, end == std::string::npos ? std::string::npos : end - start)));
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return dims;
}

void print(const at::Tensor& tensor, int index)
{
    const at::Tensor t = tensor.to(at::kDouble).contiguous();
    std::printf("output %d", index);
    for (int64_t d : t.sizes())
        std::printf(" %lld", static_cast<long long>(d));
    std::printf("\n");
    const double* p = t.data_ptr<double>();
    for (int64_t i = 0; i < t.numel(); ++i)
        std::printf("%.9g%c", p[i], i + 1 == t.numel() ? '\n' : ' ');
    if (t.numel() == 0)
        std::printf("\n");
}

std::vector<int64_t> parse_tokens(const std::string& text)
{
    std::vector<int64_t> tokens;
    size_t start = 0;
    while (start < text.size())
    {
        const size_t end = text.find(',', start);
        tokens.push_back(std::stoll(text.substr(start, end == std::string::npos ? std::string::npos : end - start)));
        start = end == std::string::npos ? text.size() : end + 1;
    }
    return tokens;
}

void generate(torch::jit::Module& lm, const std::vector<int64_t>& prompt, int64_t count)
{
    torch::jit::IValue state = lm.run_method("init_state", int64_t{1});
    at::Tensor tokens = torch::tensor(prompt, torch::kInt64).reshape({1, -1});
    std::printf("tokens");
    for (int64_t i = 0; i < count; ++i)
    {
        const auto result = lm.forward({tokens, state, torch::jit::IValue()}).toTuple();
        state = result->elements()[1];
        const int64_t next = result->elements()[0].toTensor().select(1, -1).argmax(-1).item<int64_t>();
        std::printf(" %lld", static_cast<long long>(next));
        tokens = torch::full({1, 1}, next, torch::kInt64);
    }
    std::printf("\n");
}
} // namespace

int main(int argc, char** argv)
{
    if (argc < 3)
    {
        std::fprintf(stderr, "usage: %s MODULE.pt SHAPE [SHAPE ...]   (SHAPE like 5x2x12)\n", argv[0]);
        return 2;
    }
    try
    {
        c10::InferenceMode inference;
        torch::jit::Module module = torch::jit::load(argv[1]);
        module.eval();
        if (std::string(argv[2]) == "--generate")
        {
            if (argc != 5)
            {
                std::fprintf(stderr, "usage: %s LM.pt --generate N TOKEN,TOKEN,...\n", argv[0]);
                return 2;
            }
            generate(module, parse_tokens(argv[4]), std::stoll(argv[3]));
            return 0;
        }
        std::vector<torch::jit::IValue> inputs;
        for (int i = 2; i < argc; ++i)
        {
            const std::vector<int64_t> shape = parse_shape(argv[i]);
            int64_t n = 1;
            for (int64_t d : shape)
                n *= d;
            inputs.emplace_back((torch::arange(n, torch::kFloat32) * 0.37 + (i - 2)).sin().reshape(shape));
        }
        const torch::jit::IValue result = module.forward(inputs);
        if (result.isTensor())
        {
            print(result.toTensor(), 0);
            return 0;
        }
        const auto elements = result.toTupleRef().elements();
        for (size_t i = 0; i < elements.size(); ++i)
            print(elements[i].toTensor(), static_cast<int>(i));
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "run_scripted: %s\n", e.what());
        return 1;
    }
    return 0;
}
