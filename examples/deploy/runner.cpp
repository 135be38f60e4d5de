// Runs the AOTInductor package of examples/deploy/model.py with no Python in the process: the opsmith ops come
// from the native op library, loaded before the package (RTLD_GLOBAL, so the package's calls find them).
//
//   runner LIBOPS MODEL.pt2 DIR      DIR holds input.bin, expected.bin (float32) and shapes.txt
//
// Prints the largest difference from the eager output and exits 0 when the outputs are equal.
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

static at::Tensor read_floats(const std::string& path, std::vector<int64_t> shape) {
  at::Tensor t = at::empty(shape, at::kFloat);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(t.data_ptr<float>()), t.numel() * sizeof(float));
  if (!f) throw std::runtime_error("cannot read " + path);
  return t;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: runner LIBOPS MODEL.pt2 DIR\n";
    return 2;
  }
  if (dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::cerr << "cannot load the op library: " << dlerror() << "\n";
    return 1;
  }
  const std::string dir = argv[3];
  int64_t rows, d_in, d_out;
  std::ifstream(dir + "/shapes.txt") >> rows >> d_in >> d_out;
  at::Tensor x = read_floats(dir + "/input.bin", {rows, d_in}).cuda();
  at::Tensor want = read_floats(dir + "/expected.bin", {rows, d_out});

  at::Tensor got;
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[2]);
    got = loader.run({x}).at(0).cpu();
  } catch (const c10::Error& e) {
    std::cerr << "the model failed: " << e.what_without_backtrace() << "\n";
    return 1;
  }
  const double diff = (got - want).abs().max().item<double>();
  std::cout << "output " << got.sizes() << ", max |runner - eager| = " << diff << "\n";
  return torch::equal(got, want) ? 0 : 1;
}
