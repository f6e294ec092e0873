// Runs a TorchScript module saved from Python (torch.jit.script + torch.jit.save of an rnnx module, e.g.
// rnnx.models.SRU) in a C++ program with no Python: libtorch plus librnnx_torch_ops, which registers the rnnx
// ops the module calls (python3 -m rnnx.models.ops.libtorch builds it; the build line is in README.md here).
//
//     run_scripted MODULE.pt SHAPE [SHAPE ...]      e.g.  run_scripted sru.pt 5x2x12
//
// Input i (fp32, the given shape) is sin(0.37 * j + i) for element j in row-major order, so a Python test
// can build the same tensors. Prints each output tensor as "output <n> <dims>" then its values.
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
