// Runs a fuzz harness over files, without libFuzzer: how the normal build replays the committed
// corpora as regression tests (a crash or a broken property aborts). With libFuzzer the same
// harness is linked against its engine instead (scripts/fuzz).
//   fuzz_X DIR_OR_FILE...

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::string bytes{std::istreambuf_iterator<char>{in}, {}};
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

} // namespace

int main(int argc, char** argv) {
  size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg{argv[i]};
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file())
          files.push_back(e.path());
    } else {
      files.push_back(arg);
    }
    for (auto& f : files) {
      run_file(f);
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs: give corpus directories or files\n");
    return 2;
  }
  std::printf("%zu inputs, no crash\n", inputs);
  return 0;
}
